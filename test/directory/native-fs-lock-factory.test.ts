import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import {
  AlreadyClosedError,
  LockIOError,
  LockObtainFailedError,
  UnsupportedOperationError,
} from '../../src/core/index.js';
import {
  ByteBuffersDirectory,
  FSDirectory,
  NativeFSLockFactory,
} from '../../src/directory/index.js';
import { internals } from '../../src/directory/internals.js';
import { fileLocks } from '../../src/os/file-lock.js';
import { exitOf, fixture, holdLockInChild, run, tempDir, waitForLine } from '../helpers.js';

type Internals = { fd: number; path: string; registry: Map<string, unknown> };
const inside = (lock: object) =>
  (lock as unknown as Record<symbol, Internals>)[internals] as Internals;
const openFds = () => readdirSync('/proc/self/fd').length;

test('conformance D10: a pre-existing empty lock file does not block, and close never deletes it', async () => {
  using tmp = tempDir();
  writeFileSync(join(tmp.path, 'write.lock'), '');
  const dir = await FSDirectory.open(tmp.path);
  const lock = await dir.obtainLock('write.lock');
  await lock.close();
  assert.equal(statSync(join(tmp.path, 'write.lock')).size, 0, 'write.lock exists and stays empty');
});

test('conformance D11: a second obtain in this process fails from the registry and opens no descriptor', async () => {
  using tmp = tempDir();
  const a = await FSDirectory.open(tmp.path);
  const b = await FSDirectory.open(`${tmp.path}/.`);
  const lock = await a.obtainLock('write.lock');
  const before = openFds();
  await assert.rejects(b.obtainLock('write.lock'), (err: Error) => {
    assert.ok(err instanceof LockObtainFailedError);
    assert.match(err.message, /Lock held by this virtual machine: .*write\.lock/);
    return true;
  });
  assert.equal(openFds(), before, 'no descriptor opened or closed');
  lock.ensureValid();
  await lock.close();
});

test('conformance D12, D13: held by another process, then freed when that process is SIGKILLed', async () => {
  using tmp = tempDir();
  const { child, token } = await holdLockInChild(tmp.path);
  const dir = await FSDirectory.open(tmp.path);
  await assert.rejects(dir.obtainLock('write.lock'), (err: Error) => {
    assert.ok(err instanceof LockObtainFailedError);
    assert.match(err.message, /Lock held by another program: /);
    return true;
  });
  child.kill('SIGKILL');
  await exitOf(child);
  const lock = await dir.obtainLock('write.lock');
  assert.ok(lock.token > token, 'token increases across processes');
  await lock.close();
  assert.ok(statSync(join(tmp.path, 'write.lock')).isFile());
});

test('a second descriptor in the same process conflicts (OFD semantics), and closing it keeps the lock', async () => {
  using tmp = tempDir();
  const dir = await FSDirectory.open(tmp.path);
  const lock = await dir.obtainLock('write.lock');
  const { openSync } = await import('node:fs');
  const fd = openSync(join(tmp.path, 'write.lock'), 'r+');
  assert.equal(fileLocks().tryLock(fd, 'x'), false, 'a second description cannot take the lock');
  closeSync(fd);
  lock.ensureValid();
  const { child: _unused, ...probe } = {
    child: null,
    ...(await run([fixture('try-obtain'), tmp.path, 'native'])),
  };
  assert.match(probe.stdout, /"ok":false.*Lock held by another program/);
  await lock.close();
});

test('conformance D14: ensureValid fails with AlreadyClosed when the kernel lock is released', async () => {
  using tmp = tempDir();
  const dir = await FSDirectory.open(tmp.path);
  const lock = await dir.obtainLock('write.lock');
  const lost: Error[] = [];
  lock.on('lost', (e) => lost.push(e));
  fileLocks().unlock(inside(lock).fd, 'x');
  assert.throws(
    () => lock.ensureValid(),
    (err: Error) => err instanceof AlreadyClosedError && /FileLock invalidated/.test(err.message),
  );
  assert.equal(lost.length, 1);
  assert.equal(lock.signal.aborted, true);
  assert.equal((lock.signal.reason as Error & { code: string }).code, 'LOCK_LOST');
  await lock.close();
});

test('conformance D14: ensureValid fails with AlreadyClosed when the descriptor is closed', async () => {
  using tmp = tempDir();
  const dir = await FSDirectory.open(tmp.path);
  const lock = await dir.obtainLock('write.lock');
  closeSync(inside(lock).fd);
  assert.throws(() => lock.ensureValid(), AlreadyClosedError);
  await lock.close();
  await (await dir.obtainLock('write.lock')).close();
});

test('conformance D14: ensureValid fails with AlreadyClosed when the file is not empty', async () => {
  using tmp = tempDir();
  const dir = await FSDirectory.open(tmp.path);
  const lock = await dir.obtainLock('write.lock');
  writeFileSync(join(tmp.path, 'write.lock'), 'x');
  assert.throws(() => lock.ensureValid(), /Unexpected lock file size: 1/);
  await lock.close();
});

test('conformance D14: ensureValid fails with AlreadyClosed when the registry entry is removed', async () => {
  using tmp = tempDir();
  const dir = await FSDirectory.open(tmp.path);
  const lock = await dir.obtainLock('write.lock');
  const { registry, path } = inside(lock);
  registry.delete(path);
  assert.throws(() => lock.ensureValid(), /unexpectedly cleared from map/);
  await assert.rejects(lock.close(), /cleared but never marked as held/);
  assert.equal(lock.closed, true, 'closed anyway');
});

test('conformance D15: a deleted lock file is an I/O error, a recreated one is AlreadyClosed', async () => {
  using tmp = tempDir();
  const dir = await FSDirectory.open(tmp.path);
  const lock = await dir.obtainLock('write.lock');
  unlinkSync(join(tmp.path, 'write.lock'));
  assert.throws(
    () => lock.ensureValid(),
    (err: Error) =>
      err instanceof LockIOError &&
      !(err instanceof AlreadyClosedError) &&
      /gone/.test(err.message),
  );
  await lock.close();

  const second = await dir.obtainLock('write.lock');
  unlinkSync(join(tmp.path, 'write.lock'));
  writeFileSync(join(tmp.path, 'write.lock'), '');
  assert.throws(
    () => second.ensureValid(),
    (err: Error) =>
      err instanceof AlreadyClosedError && /changed by an external force/.test(err.message),
  );
  await second.close();
});

test('conformance D16: symlinked and relative paths to one directory contend for one lock', async () => {
  using tmp = tempDir();
  mkdirSync(join(tmp.path, 'real'));
  symlinkSync(join(tmp.path, 'real'), join(tmp.path, 'link'));
  const viaReal = await FSDirectory.open(join(tmp.path, 'real'));
  const viaLink = await FSDirectory.open(join(tmp.path, 'link'));
  const viaRelative = await FSDirectory.open(
    relative(process.cwd(), join(tmp.path, 'link', '..', 'real')),
  );
  assert.equal(viaLink.path, viaReal.path);
  const lock = await viaReal.obtainLock('write.lock');
  await assert.rejects(viaLink.obtainLock('write.lock'), LockObtainFailedError);
  await assert.rejects(viaRelative.obtainLock('write.lock'), LockObtainFailedError);
  await lock.close();
});

test('a symlink planted at the lock name is never followed', async () => {
  using tmp = tempDir();
  writeFileSync(join(tmp.path, 'victim'), 'precious');
  symlinkSync(join(tmp.path, 'victim'), join(tmp.path, 'write.lock'));
  const dir = await FSDirectory.open(tmp.path);
  await assert.rejects(dir.obtainLock('write.lock'), (err: Error) => {
    assert.ok(err instanceof LockIOError);
    assert.match(err.message, /Refusing to follow a symbolic link/);
    assert.equal((err.cause as NodeJS.ErrnoException).code, 'ELOOP');
    return true;
  });
  assert.equal(readFileSync(join(tmp.path, 'victim'), 'utf8'), 'precious');
});

test('invalid lock names are rejected before touching the file system', async () => {
  using tmp = tempDir();
  const dir = await FSDirectory.open(tmp.path);
  for (const name of ['', '.', '..', '../escape', 'a/b', 'a\0b', 'x'.repeat(256)]) {
    await assert.rejects(dir.obtainLock(name), { code: 'INVALID_ARGUMENT' });
  }
  assert.deepEqual(readdirSync(tmp.path), []);
});

/** Runs try-obtain as an unprivileged user when we are root, since root ignores permissions. */
async function tryObtainUnprivileged(dir: string) {
  const asNobody = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
  const child = spawn(process.execPath, [fixture('try-obtain'), dir, 'native'], {
    ...asNobody,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await waitForLine(child, /^\{/);
  await exitOf(child);
  return JSON.parse(line) as {
    ok: boolean;
    name: string;
    code: string;
    message: string;
    cause?: { code: string };
  };
}

test('conformance D17: a lock file that cannot be created fails with the OS error as cause (read-only dir)', async () => {
  using tmp = tempDir();
  chmodSync(tmp.path, 0o755);
  const ro = join(tmp.path, 'ro');
  mkdirSync(ro);
  chmodSync(ro, 0o555);
  const result = await tryObtainUnprivileged(ro);
  assert.equal(result.ok, false);
  assert.equal(result.code, 'IO_ERROR');
  assert.match(result.message, /Permission denied creating or opening lock file .*write\.lock/);
  assert.equal(result.cause?.code, 'EACCES');
});

test('an unreadable lock directory fails clearly with the OS error as cause', async () => {
  using tmp = tempDir();
  chmodSync(tmp.path, 0o755);
  const closed = join(tmp.path, 'closed');
  mkdirSync(closed);
  chmodSync(closed, 0o000);
  const result = await tryObtainUnprivileged(closed);
  assert.equal(result.ok, false);
  assert.equal(result.code, 'IO_ERROR');
  assert.equal(result.cause?.code, 'EACCES');
});

test('a lock directory that is a file fails clearly', async () => {
  using tmp = tempDir();
  writeFileSync(join(tmp.path, 'file'), 'x');
  await assert.rejects(FSDirectory.open(join(tmp.path, 'file')), (err: Error) => {
    assert.ok(err instanceof LockIOError);
    assert.match(err.message, /it is a file, not a directory/);
    assert.ok(err.cause);
    return true;
  });
  // Replaced by a file after the directory was opened.
  const dir = await FSDirectory.open(join(tmp.path, 'd'));
  rmSync(join(tmp.path, 'd'), { recursive: true });
  writeFileSync(join(tmp.path, 'd'), 'x');
  await assert.rejects(dir.obtainLock('write.lock'), (err: Error) => {
    assert.ok(err instanceof LockIOError);
    assert.match(err.message, /is not a directory/);
    assert.equal((err.cause as NodeJS.ErrnoException).code, 'ENOTDIR');
    return true;
  });
});

test('conformance D18: a failed obtain leaves no registry entry and no descriptor', async () => {
  using tmp = tempDir();
  const { child } = await holdLockInChild(tmp.path);
  const dir = await FSDirectory.open(tmp.path);
  const before = openFds();
  await assert.rejects(dir.obtainLock('write.lock'), LockObtainFailedError);
  assert.equal(openFds(), before);
  child.stdin?.write('release\n');
  await exitOf(child);
  // Not blocked by a leftover registry entry.
  await (await dir.obtainLock('write.lock')).close();
});

test('conformance D22: a missing lock directory is created recursively, also after it was deleted', async () => {
  using tmp = tempDir();
  const path = join(tmp.path, 'a', 'b', 'c');
  const dir = await FSDirectory.open(path);
  assert.ok(statSync(path).isDirectory());
  rmSync(join(tmp.path, 'a'), { recursive: true });
  const lock = await dir.obtainLock('write.lock');
  assert.ok(statSync(join(path, 'write.lock')).isFile());
  await lock.close();
});

test('conformance D23: FS factories reject directories that are not file-system based', async () => {
  await assert.rejects(
    NativeFSLockFactory.INSTANCE.obtainLock(new ByteBuffersDirectory(), 'write.lock'),
    (err: Error) => {
      assert.ok(err instanceof UnsupportedOperationError);
      assert.match(err.message, /can only be used with FSDirectory subclasses/);
      return true;
    },
  );
});

test('conformance D33: fencing tokens increase across processes and restarts, and write.lock stays empty', async () => {
  using tmp = tempDir();
  let last = 0;
  for (let i = 0; i < 3; i++) {
    const { child, token } = await holdLockInChild(tmp.path);
    assert.ok(token > last, `grant ${i}: ${token} > ${last}`);
    last = token;
    if (i === 1) child.kill('SIGKILL');
    else child.stdin?.write('release\n');
    await exitOf(child);
  }
  const dir = await FSDirectory.open(tmp.path);
  const lock = await dir.obtainLock('write.lock');
  assert.ok(lock.token > last);
  await lock.close();
  assert.equal(statSync(join(tmp.path, 'write.lock')).size, 0);
  assert.match(readFileSync(join(tmp.path, 'write.lock.fence'), 'utf8'), /^\d{20}\n$/);
});
