import assert from 'node:assert/strict';
import { existsSync, readdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  AlreadyClosedError,
  LockIOError,
  LockObtainFailedError,
  LockReleaseFailedError,
} from '../../src/core/index.js';
import { FSDirectory, SimpleFSLockFactory } from '../../src/directory/index.js';
import { exitOf, holdLockInChild, tempDir } from '../helpers.js';

const open = (path: string) => FSDirectory.open(path, SimpleFSLockFactory.INSTANCE);

test('conformance D19: obtain creates the file exclusively; an existing file means held elsewhere', async () => {
  using tmp = tempDir();
  const dir = await open(tmp.path);
  const lock = await dir.obtainLock('write.lock');
  assert.ok(existsSync(join(tmp.path, 'write.lock')));
  await lock.close();
  writeFileSync(join(tmp.path, 'write.lock'), '');
  await assert.rejects(dir.obtainLock('write.lock'), (err: Error) => {
    assert.ok(err instanceof LockObtainFailedError);
    assert.match(err.message, /Lock held elsewhere: .*write\.lock/);
    assert.equal((err.cause as NodeJS.ErrnoException).code, 'EEXIST');
    return true;
  });
});

test('conformance D20: close deletes the file', async () => {
  using tmp = tempDir();
  const dir = await open(tmp.path);
  const lock = await dir.obtainLock('write.lock');
  await lock.close();
  assert.ok(!existsSync(join(tmp.path, 'write.lock')));
});

test('conformance D20: close after failed validation keeps the file, throws LockReleaseFailed, ends closed', async () => {
  using tmp = tempDir();
  const dir = await open(tmp.path);
  const lock = await dir.obtainLock('write.lock');
  unlinkSync(join(tmp.path, 'write.lock'));
  writeFileSync(join(tmp.path, 'write.lock'), ''); // someone else's file now
  await assert.rejects(lock.close(), (err: Error) => {
    assert.ok(err instanceof LockReleaseFailedError);
    assert.match(err.message, /cannot be safely removed\. Manual intervention is recommended/);
    return true;
  });
  assert.ok(existsSync(join(tmp.path, 'write.lock')), "the other holder's file is kept");
  assert.equal(lock.closed, true);
  await lock.close(); // idempotent even after a failed release
});

test('conformance D15: a deleted lock file is an I/O error; a recreated one is AlreadyClosed', async () => {
  using tmp = tempDir();
  const dir = await open(tmp.path);
  const lock = await dir.obtainLock('write.lock');
  unlinkSync(join(tmp.path, 'write.lock'));
  assert.throws(
    () => lock.ensureValid(),
    (err: Error) => err instanceof LockIOError && !(err instanceof AlreadyClosedError),
  );
  writeFileSync(join(tmp.path, 'write.lock'), '');
  // Once lost, always lost: a file recreated at the name does not make the lock valid again.
  assert.throws(() => lock.ensureValid(), LockIOError);
  await assert.rejects(lock.close(), LockReleaseFailedError);
  unlinkSync(join(tmp.path, 'write.lock'));

  const second = await dir.obtainLock('write.lock');
  unlinkSync(join(tmp.path, 'write.lock'));
  writeFileSync(join(tmp.path, 'write.lock'), '');
  assert.throws(
    () => second.ensureValid(),
    (err: Error) =>
      err instanceof AlreadyClosedError && /changed by an external force/.test(err.message),
  );
  await assert.rejects(second.close(), LockReleaseFailedError);
});

test('conformance D21: a stale file left by a killed process blocks until it is removed', async () => {
  using tmp = tempDir();
  const { child, token } = await holdLockInChild(tmp.path, 'simple');
  child.kill('SIGKILL');
  await exitOf(child);
  const dir = await open(tmp.path);
  await assert.rejects(dir.obtainLock('write.lock'), LockObtainFailedError);
  unlinkSync(join(tmp.path, 'write.lock'));
  const lock = await dir.obtainLock('write.lock');
  assert.ok(lock.token > token);
  await lock.close();
  assert.deepEqual(readdirSync(tmp.path).sort(), ['write.lock.fence']);
});
