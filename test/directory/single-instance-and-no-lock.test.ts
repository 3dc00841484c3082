import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AlreadyClosedError, LockObtainFailedError } from '../../src/core/index.js';
import {
  ByteBuffersDirectory,
  FSDirectory,
  NoLockFactory,
  SingleInstanceLockFactory,
} from '../../src/directory/index.js';
import { internals } from '../../src/directory/internals.js';
import { tempDir } from '../helpers.js';

test('conformance D24: in-memory directories default to their own SingleInstance factory', async () => {
  const a = new ByteBuffersDirectory();
  const b = new ByteBuffersDirectory();
  assert.ok(a.lockFactory instanceof SingleInstanceLockFactory);
  assert.notEqual(a.lockFactory, b.lockFactory);
  const la = await a.obtainLock('write.lock');
  const lb = await b.obtainLock('write.lock'); // a different directory, a different factory
  await assert.rejects(a.obtainLock('write.lock'), (err: Error) => {
    assert.ok(err instanceof LockObtainFailedError);
    assert.match(
      err.message,
      /lock instance already obtained: \(dir=ByteBuffersDirectory@\d+.*, lockName=write\.lock\)/,
    );
    return true;
  });
  await la.close();
  await lb.close();
});

test('conformance D24: a SingleInstance factory keys by name only, across directories that share it', async () => {
  using tmp = tempDir();
  const factory = new SingleInstanceLockFactory();
  const mem = new ByteBuffersDirectory(factory);
  const fs = await FSDirectory.open(tmp.path, factory);
  const lock = await mem.obtainLock('x');
  await assert.rejects(fs.obtainLock('x'), LockObtainFailedError);
  await lock.close();
});

test('conformance D25: close after the name was removed externally throws AlreadyClosed, and the lock is closed', async () => {
  const dir = new ByteBuffersDirectory();
  const lock = await dir.obtainLock('write.lock');
  const inner = (
    lock as unknown as Record<symbol, { factory: SingleInstanceLockFactory; name: string }>
  )[internals];
  assert.ok(inner);
  inner.factory.clear(inner.name);
  assert.throws(() => lock.ensureValid(), /invalidated from map/);
  assert.equal(lock.signal.aborted, true);
  await assert.rejects(
    lock.close(),
    (err: Error) => err instanceof AlreadyClosedError && /already released/.test(err.message),
  );
  assert.equal(lock.closed, true);
  await lock.close();
});

test('conformance D26: NoLock always succeeds, two writers coexist, close and ensureValid never throw', async () => {
  using tmp = tempDir();
  const dir = await FSDirectory.open(tmp.path, NoLockFactory.INSTANCE);
  const a = await dir.obtainLock('write.lock');
  const b = await dir.obtainLock('write.lock');
  assert.equal(a, b);
  await a.close();
  a.ensureValid();
  await a.close();
  assert.equal(a.signal.aborted, false);
});

test('factories called directly validate lock names too', async () => {
  const dir = new ByteBuffersDirectory();
  for (const factory of [new SingleInstanceLockFactory(), NoLockFactory.INSTANCE]) {
    await assert.rejects(factory.obtainLock(dir, '../x'), { code: 'INVALID_ARGUMENT' });
    await assert.rejects(factory.obtainLock(dir, ''), { code: 'INVALID_ARGUMENT' });
  }
});
