// Lucene's BaseLockFactoryTestCase, run against every factory.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AlreadyClosedError, LockObtainFailedError } from '../../src/core/index.js';
import {
  ByteBuffersDirectory,
  type Directory,
  FSDirectory,
  NativeFSLockFactory,
  SimpleFSLockFactory,
  SleepingLockWrapper,
} from '../../src/directory/index.js';
import { tempDir } from '../helpers.js';

const variants: [string, (path: string) => Promise<Directory>][] = [
  ['NativeFSLockFactory', (p) => FSDirectory.open(p, NativeFSLockFactory.INSTANCE)],
  ['SimpleFSLockFactory', (p) => FSDirectory.open(p, SimpleFSLockFactory.INSTANCE)],
  ['SingleInstanceLockFactory', async () => new ByteBuffersDirectory()],
  [
    'SleepingLockWrapper',
    async (p) =>
      new SleepingLockWrapper(
        await FSDirectory.open(p),
        20 + Math.floor(Math.random() * 80),
        2 + Math.floor(Math.random() * 8),
      ),
  ],
];

for (const [label, open] of variants) {
  describe(label, () => {
    test('basics: a second obtain fails while held, the first stays valid, obtain again after close (conformance D1, D2, D3)', async () => {
      using tmp = tempDir();
      const dir = await open(tmp.path);
      const lock = await dir.obtainLock('commit');
      await assert.rejects(dir.obtainLock('commit'), LockObtainFailedError);
      lock.ensureValid();
      await lock.close();
      const again = await dir.obtainLock('commit');
      again.ensureValid();
      assert.ok(again.token > lock.token, 'the fencing token increases with each grant');
      await again.close();
    });

    test('double close is a silent no-op (conformance D4)', async () => {
      using tmp = tempDir();
      const dir = await open(tmp.path);
      const lock = await dir.obtainLock('commit');
      await lock.close();
      await lock.close();
      await lock[Symbol.asyncDispose]();
    });

    test('valid right after acquire, AlreadyClosed after close, signal aborted (conformance D5, D6)', async () => {
      using tmp = tempDir();
      const dir = await open(tmp.path);
      const lock = await dir.obtainLock('commit');
      lock.ensureValid();
      assert.equal(lock.signal.aborted, false);
      await lock.close();
      assert.throws(() => lock.ensureValid(), AlreadyClosedError);
      assert.equal(lock.signal.aborted, true);
      assert.ok(lock.signal.reason instanceof AlreadyClosedError);
    });

    test('await using releases the lock', async () => {
      using tmp = tempDir();
      const dir = await open(tmp.path);
      {
        await using lock = await dir.obtainLock('scoped');
        lock.ensureValid();
      }
      await (await dir.obtainLock('scoped')).close();
    });

    test('concurrent tasks never hold at once, every failed obtain is LockObtainFailed, tokens increase (conformance D8)', async () => {
      using tmp = tempDir();
      const dir = await open(tmp.path);
      const tasks = 2 + Math.floor(Math.random() * 10);
      const iterations = Math.ceil(1000 / tasks);
      let holders = 0;
      let maxHolders = 0;
      let grants = 0;
      let lastToken = 0;
      await Promise.all(
        Array.from({ length: tasks }, async () => {
          for (let i = 0; i < iterations; i++) {
            let lock: Awaited<ReturnType<Directory['obtainLock']>>;
            try {
              lock = await dir.obtainLock('foo.lock');
            } catch (err) {
              assert.ok(err instanceof LockObtainFailedError, `unexpected ${err}`);
              await new Promise((r) => setImmediate(r));
              continue;
            }
            holders++;
            maxHolders = Math.max(maxHolders, holders);
            grants++;
            assert.ok(lock.token > lastToken);
            lastToken = lock.token;
            await new Promise((r) => setImmediate(r));
            holders--;
            await lock.close();
          }
        }),
      );
      assert.equal(maxHolders, 1);
      assert.ok(grants > 0);
    });
  });
}
