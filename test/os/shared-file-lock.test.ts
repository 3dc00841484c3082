/**
 * Shared (read) kernel file locks: an OFD `F_RDLCK` on Linux, `flock(LOCK_SH)` on BSD. Shared
 * holders coexist, a shared and an exclusive holder exclude each other, the probes answer per
 * mode, and the directory factories (always exclusive) are excluded by a shared holder in
 * another process.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { closeSync, constants, openSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { LockObtainFailedError } from '../../src/core/errors.js';
import { FSDirectory } from '../../src/directory/fs-directory.js';
import { fileLocks } from '../../src/os/file-lock.js';
import {
  KernelFileLock,
  kernelFileLockedElsewhere,
  kernelFileLockHeldHere,
} from '../../src/os/kernel-file-lock.js';
import { lockHolders } from '../../src/os/lock-holders.js';
import { cliPath, exitOf, orphanProof, tempDir, waitForLine } from '../helpers.js';

const RW = constants.O_RDWR | constants.O_CREAT;
const supported = process.platform === 'linux' || process.platform === 'darwin';

test('fileLocks(): shared locks of two descriptions coexist and exclude an exclusive one, both ways', {
  skip: !supported && 'no kernel file locks here',
}, () => {
  using tmp = tempDir();
  const path = join(tmp.path, 'f');
  const locks = fileLocks();
  const [a, b, c] = [openSync(path, RW), openSync(path, RW), openSync(path, RW)];
  const probe = openSync(path, constants.O_RDONLY);
  try {
    assert.equal(locks.tryLock(a, path, 'shared'), true);
    assert.equal(locks.tryLock(b, path, 'shared'), true, 'a second shared holder');
    assert.equal(locks.tryLock(c, path), false, 'exclusive (the default) while shared are held');
    assert.equal(locks.tryLock(c, path, 'exclusive'), false);
    // Probes per mode: a shared holder conflicts with an exclusive lock only.
    assert.equal(locks.isLockedElsewhere(probe, path), true);
    assert.equal(locks.isLockedElsewhere(probe, path, 'exclusive'), true);
    assert.equal(locks.isLockedElsewhere(probe, path, 'shared'), false);
    if (locks.mechanism === 'ofd') assert.equal(locks.isLocked(a), true);
    locks.unlock(a, path);
    assert.equal(locks.tryLock(c, path), false, 'one shared holder is still there');
    locks.unlock(b, path);
    assert.equal(locks.isLockedElsewhere(probe, path), false);
    assert.equal(locks.tryLock(c, path), true, 'exclusive once every shared holder left');
    assert.equal(locks.tryLock(a, path, 'shared'), false, 'shared while exclusive is held');
    assert.equal(locks.isLockedElsewhere(probe, path, 'shared'), true);
    locks.unlock(c, path);
    assert.equal(locks.tryLock(a, path, 'shared'), true);
  } finally {
    for (const fd of [a, b, c, probe]) closeSync(fd);
  }
});

test('KernelFileLock shared: one holder per key in this process, whatever the modes', {
  skip: !supported && 'no kernel file locks here',
}, () => {
  using tmp = tempDir();
  const path = join(tmp.path, 'f.lock');
  const shared = KernelFileLock.tryAcquire(tmp.path, path, { mode: 'shared' });
  assert.ok(shared instanceof KernelFileLock);
  try {
    assert.equal(shared.mode, 'shared');
    assert.ok(shared.ownsKernelLock());
    assert.equal(KernelFileLock.tryAcquire(tmp.path, path, { mode: 'shared' }), 'this process');
    assert.equal(KernelFileLock.tryAcquire(tmp.path, path), 'this process');
    assert.ok(kernelFileLockHeldHere(path));
  } finally {
    shared.release();
  }
  const exclusive = KernelFileLock.tryAcquire(tmp.path, path);
  assert.ok(exclusive instanceof KernelFileLock);
  assert.equal(exclusive.mode, 'exclusive');
  exclusive.release();
});

test('a shared holder in another process: shared here coexists, exclusive and the directory factory are refused', {
  skip: process.platform !== 'linux' && 'the CLI holder and /proc are Linux here',
}, async () => {
  using tmp = tempDir();
  const path = join(tmp.path, 'write.lock');
  const holder = orphanProof(
    spawn(
      process.execPath,
      [cliPath, 'lock', '--shared', tmp.path, '--', 'sh', '-c', 'echo started; read _'],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    ),
  );
  try {
    await waitForLine(holder, /^started/);
    assert.equal(kernelFileLockedElsewhere(tmp.path, path), true, 'an exclusive probe sees it');
    assert.equal(kernelFileLockedElsewhere(tmp.path, path, 'shared'), false);
    assert.equal(
      KernelFileLock.tryAcquire(tmp.path, path, { probeFirst: true }),
      'another process',
    );
    const shared = KernelFileLock.tryAcquire(tmp.path, path, { mode: 'shared', probeFirst: true });
    assert.ok(shared instanceof KernelFileLock, 'a shared lock beside the other process');
    try {
      // Two shared locks (two lines in /proc/locks): every holder named, each once.
      const pids = (lockHolders(path) ?? []).map((h) => h.pid);
      assert.ok(pids.includes(holder.pid) && pids.includes(process.pid), String(pids));
      assert.equal(new Set(pids).size, pids.length, `no holder twice: ${pids}`);
    } finally {
      shared.release();
    }
    // The factories stay exclusive: NativeFSLockFactory is refused and sees the lock held.
    const directory = await FSDirectory.open(tmp.path);
    await assert.rejects(directory.obtainLock('write.lock'), LockObtainFailedError);
    assert.equal(directory.lockFactory.isHeldElsewhere(directory, 'write.lock'), true);
  } finally {
    holder.stdin?.end();
    await exitOf(holder);
  }
  const directory = await FSDirectory.open(tmp.path);
  const lock = await directory.obtainLock('write.lock');
  await lock.close();
});

test('the probe of a read-only descriptor needs no write access, in either mode', {
  skip: !supported && 'no kernel file locks here',
}, () => {
  using tmp = tempDir();
  const path = join(tmp.path, 'f');
  closeSync(openSync(path, RW));
  const probe = openSync(path, constants.O_RDONLY);
  try {
    assert.equal(fileLocks().isLockedElsewhere(probe, path, 'exclusive'), false);
    assert.equal(fileLocks().isLockedElsewhere(probe, path, 'shared'), false);
  } finally {
    closeSync(probe);
  }
});
