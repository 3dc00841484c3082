import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  AlreadyClosedError,
  FakeClock,
  LockObtainFailedError,
  LockTimeoutError,
} from '../../src/core/index.js';
import {
  ByteBuffersDirectory,
  type Directory,
  FilterDirectory,
  FSDirectory,
  LockValidatingDirectoryWrapper,
  SleepingLockWrapper,
} from '../../src/directory/index.js';
import { tempDir } from '../helpers.js';

/** Counts obtain attempts and fails them with the given error. */
class CountingDirectory extends FilterDirectory {
  attempts = 0;
  constructor(
    inner: Directory,
    readonly failWith: () => Error,
  ) {
    super(inner);
  }
  override async obtainLock(): Promise<never> {
    this.attempts++;
    throw this.failWith();
  }
}

async function runSleeping(timeout: number, poll: number) {
  const clock = new FakeClock();
  const counting = new CountingDirectory(
    new ByteBuffersDirectory(),
    () => new LockObtainFailedError(`held #${Math.random()}`),
  );
  const wrapper = new SleepingLockWrapper(counting, timeout, poll, clock);
  let error: unknown;
  const done = wrapper.obtainLock('write.lock').catch((e: unknown) => {
    error = e;
  });
  while (error === undefined) await clock.advance(poll);
  await done;
  return { attempts: counting.attempts, error: error as Error, elapsed: clock.monotonic() };
}

test('conformance D27: timeout T and poll P make floor(T/P)+1 attempts, sleeping after each, then time out', async () => {
  for (const [t, p] of [
    [100, 10],
    [95, 10],
    [0, 10],
    [10, 10],
    [1000, 300],
  ] as const) {
    const { attempts, error, elapsed } = await runSleeping(t, p);
    assert.equal(attempts, Math.floor(t / p) + 1, `T=${t} P=${p}`);
    assert.ok(
      elapsed >= attempts * p && elapsed <= (attempts + 1) * p,
      `slept after every failed attempt (${elapsed})`,
    );
    assert.ok(error instanceof LockTimeoutError);
    assert.ok(error instanceof LockObtainFailedError);
    assert.match(error.message, /^Lock obtain timed out: SleepingLockWrapper\(.*\): held #/);
    assert.match((error.cause as Error).message, /^held #/);
    assert.ok(error.message.endsWith((error.cause as Error).message), 'cause is the first failure');
  }
});

test('conformance D27: only LockObtainFailed is retried', async () => {
  const counting = new CountingDirectory(
    new ByteBuffersDirectory(),
    () => new Error('disk on fire'),
  );
  const wrapper = new SleepingLockWrapper(counting, 1000, 10);
  await assert.rejects(wrapper.obtainLock('write.lock'), /disk on fire/);
  assert.equal(counting.attempts, 1);
});

test('conformance D27: -1 waits forever; other negative timeouts and negative polls are rejected', async () => {
  const clock = new FakeClock();
  const inner = new ByteBuffersDirectory();
  const held = await inner.obtainLock('write.lock');
  const wrapper = new SleepingLockWrapper(
    inner,
    SleepingLockWrapper.LOCK_OBTAIN_WAIT_FOREVER,
    1000,
    clock,
  );
  const pending = wrapper.obtainLock('write.lock');
  for (let i = 0; i < 50; i++) await clock.advance(1000);
  await held.close();
  await clock.advance(1000);
  const lock = await pending;
  assert.ok(lock.token > held.token);
  await lock.close();
  for (const [t, p] of [
    [-2, 10],
    [-100, 10],
    [100, -1],
    [100, 0],
    [Number.NaN, 10],
  ]) {
    assert.throws(() => new SleepingLockWrapper(inner, t as number, p as number), {
      code: 'INVALID_ARGUMENT',
    });
  }
});

test('the sleeping wrapper wait can be aborted', async () => {
  const inner = new ByteBuffersDirectory();
  const held = await inner.obtainLock('write.lock');
  const wrapper = new SleepingLockWrapper(inner, SleepingLockWrapper.LOCK_OBTAIN_WAIT_FOREVER, 50);
  const controller = new AbortController();
  const pending = wrapper.obtainLock('write.lock', { signal: controller.signal });
  setTimeout(() => controller.abort(), 20);
  await assert.rejects(pending, { code: 'ABORTED', name: 'AbortError' });
  await held.close();
});

test('conformance D28: the validating wrapper checks the lock before every destructive operation', async () => {
  using tmp = tempDir();
  const fsDir = await FSDirectory.open(tmp.path);
  const source = new ByteBuffersDirectory();
  await source.createOutput('src', Buffer.from('data'));
  const lock = await fsDir.obtainLock('write.lock');
  const dir = new LockValidatingDirectoryWrapper(fsDir, lock);
  await dir.createOutput('a', Buffer.from('1'));
  await dir.copyFrom(source, 'src', 'b');
  await dir.rename('b', 'c');
  await dir.sync(['a', 'c']);
  await dir.syncMetaData();
  await dir.deleteFile('a');
  assert.deepEqual(await dir.listAll(), ['c', 'write.lock', 'write.lock.fence']);

  writeFileSync(join(tmp.path, 'write.lock'), 'corrupt'); // the lock is no longer valid
  const before = await fsDir.listAll();
  const operations: [string, () => Promise<unknown>][] = [
    ['createOutput', () => dir.createOutput('x', Buffer.from('1'))],
    ['copyFrom', () => dir.copyFrom(source, 'src', 'y')],
    ['rename', () => dir.rename('c', 'z')],
    ['sync', () => dir.sync(['c'])],
    ['syncMetaData', () => dir.syncMetaData()],
    ['deleteFile', () => dir.deleteFile('c')],
  ];
  for (const [name, op] of operations) {
    await assert.rejects(op(), AlreadyClosedError, name);
  }
  assert.deepEqual(await fsDir.listAll(), before, 'nothing was modified');
  assert.ok(existsSync(join(tmp.path, 'c')));
  // Reads and temp outputs are not checked, as in Lucene.
  assert.equal((await dir.readFile('c')).toString(), 'data');
  await dir.createTempOutput('tmp', '.t', Buffer.from('x'));
  await lock.close();
});

test('directory file names cannot escape the directory', async () => {
  using tmp = tempDir();
  const dir = await FSDirectory.open(join(tmp.path, 'inner'));
  for (const name of ['../outside', '/etc/passwd', '..', 'a/b']) {
    await assert.rejects(dir.createOutput(name, Buffer.from('x')), { code: 'INVALID_ARGUMENT' });
    await assert.rejects(dir.deleteFile(name), { code: 'INVALID_ARGUMENT' });
    await assert.rejects(dir.rename('x', name), { code: 'INVALID_ARGUMENT' });
  }
  assert.ok(!existsSync(join(tmp.path, 'outside')));
});

test('wrappers and helpers reject arguments that are not what they need', async () => {
  const { acquireLock } = await import('../../src/directory/index.js');
  assert.throws(() => new SleepingLockWrapper({} as Directory, 10, 1), {
    code: 'INVALID_ARGUMENT',
  });
  assert.throws(() => new LockValidatingDirectoryWrapper(new ByteBuffersDirectory(), {} as never), {
    code: 'INVALID_ARGUMENT',
  });
  await assert.rejects(acquireLock({} as Directory), { code: 'INVALID_ARGUMENT' });
  await assert.rejects(FSDirectory.open(''), { code: 'INVALID_ARGUMENT' });
  await assert.rejects(FSDirectory.open('/tmp/x', {} as never), { code: 'INVALID_ARGUMENT' });
});
