import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LockTimeoutError } from '../../src/core/index.js';
import {
  acquireLock,
  ByteBuffersDirectory,
  FSDirectory,
  SimpleFSLockFactory,
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
