import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LockTimeoutError } from '../../src/core/index.js';
import {
  acquireLock,
  ByteBuffersDirectory,
  FSDirectory,
  SimpleFSLockFactory,
  withLock,
} from '../../src/directory/index.js';
import { exitOf, holdLockInChild, sleep, tempDir } from '../helpers.js';

// These tests check that waiters are woken, not how fast: a poll-only waiter would still pass
// with the generous bounds below, the benchmark measures the latency.

test('an in-process waiter gets the lock when the holder releases', async () => {
  const dir = new ByteBuffersDirectory();
  const held = await dir.obtainLock('write.lock');
  const pending = acquireLock(dir, { timeoutMs: 5000 });
  setTimeout(() => void held.close(), 30);
  const lock = await pending;
  assert.ok(lock.token > held.token);
  await lock.close();
});

for (const factory of ['native', 'simple'] as const) {
  test(`${factory}: a waiter in another process gets the lock on release and on kill -9`, async () => {
    using tmp = tempDir();
    const dir = await FSDirectory.open(
      tmp.path,
      factory === 'simple' ? SimpleFSLockFactory.INSTANCE : undefined,
    );
    const first = await holdLockInChild(tmp.path, factory);
    const waiting = acquireLock(dir, { timeoutMs: 10_000 });
    await sleep(50);
    first.child.stdin?.write('release\n');
    const lock = await waiting;
    assert.ok(lock.token > first.token);
    await lock.close();
    await exitOf(first.child);

    if (factory === 'native') {
      const second = await holdLockInChild(tmp.path, factory);
      const waiting2 = acquireLock(dir, { timeoutMs: 10_000 });
      await sleep(50);
      second.child.kill('SIGKILL');
      const lock2 = await waiting2;
      assert.ok(lock2.token > second.token);
      await lock2.close();
    }
  });
}

test('acquireLock times out with LOCK_TIMEOUT naming the lock, and can be aborted', async () => {
  using tmp = tempDir();
  const dir = await FSDirectory.open(tmp.path);
  const { child } = await holdLockInChild(tmp.path);
  await assert.rejects(acquireLock(dir, { timeoutMs: 100 }), (err: Error) => {
    assert.ok(err instanceof LockTimeoutError);
    assert.match(err.message, /timed out after 100 ms: .*write\.lock/);
    assert.match((err.cause as Error).message, /held (elsewhere|by another program)/);
    return true;
  });
  const controller = new AbortController();
  const pending = acquireLock(dir, { signal: controller.signal });
  setTimeout(() => controller.abort(new Error('shutting down')), 50);
  await assert.rejects(pending, { code: 'ABORTED' });
  child.kill('SIGKILL');
  await exitOf(child);
});

test('acquireLock rejects invalid names and timeouts', async () => {
  const dir = new ByteBuffersDirectory();
  await assert.rejects(acquireLock(dir, { name: '../x' }), { code: 'INVALID_ARGUMENT' });
  await assert.rejects(acquireLock(dir, { timeoutMs: -1 }), { code: 'INVALID_ARGUMENT' });
});

test('inside withLock, a wait for the same lock fails at once with DEADLOCK; other tasks still wait and get it', async () => {
  using tmp = tempDir();
  const dir = await FSDirectory.open(tmp.path);
  const sameDir = await FSDirectory.open(tmp.path); // another instance, the same lock files
  const memory = new ByteBuffersDirectory();
  const order: string[] = [];
  await withLock(dir, async (lock) => {
    // No timeout given: without the check these would wait forever.
    await assert.rejects(
      withLock(dir, () => 'never'),
      {
        code: 'DEADLOCK',
        message: /held by this call's own withLock/,
      },
    );
    await assert.rejects(acquireLock(sameDir), { code: 'DEADLOCK' });
    await assert.rejects(
      new Promise((resolve, reject) => setTimeout(() => acquireLock(dir).then(resolve, reject), 1)),
      { code: 'DEADLOCK' },
      'a wait started later from inside fn is the caller too',
    );
    // Another lock, and another directory's lock of the same name, are not held: fine.
    await withLock(dir, () => order.push('other lock'), { name: 'other.lock' });
    await withLock(memory, () => order.push('memory'));
    lock.ensureValid();
    order.push('inner done');
  });
  // A task that is not inside fn waits for the holder as always.
  let inside = false;
  const holder = withLock(memory, async () => {
    inside = true;
    await sleep(100);
    order.push('holder releases');
  });
  while (!inside) await sleep(1);
  const outside = withLock(memory, () => order.push('outside waiter'));
  await holder;
  await outside;
  assert.deepEqual(order, [
    'other lock',
    'memory',
    'inner done',
    'holder releases',
    'outside waiter',
  ]);
});
