import { closeSync, constants, fstatSync, unlinkSync } from 'node:fs';
import { systemClock } from '../core/clock.js';
import {
  LockObtainFailedError,
  LockReleaseFailedError,
  UnsupportedOperationError,
} from '../core/errors.js';
import type { WakeSource } from '../core/wait.js';
import { fileWakeSource } from '../os/file-watcher.js';
import { anyWake, InProcessReleases } from '../os/in-process-releases.js';
import type { Directory } from './directory.js';
import { advanceFenceToken } from './fence-token-file.js';
import { FileLockHandle } from './file-lock-handle.js';
import type { FSDirectory } from './fs-directory.js';
import { FSLockFactory } from './fs-lock-factory.js';
import type { Lock } from './lock.js';
import {
  type FileIdentity,
  formatBirthtime,
  identityOf,
  lockPath,
  openInLockDir,
} from './lock-file.js';

const CREATE_FLAGS =
  constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
const releases = new InProcessReleases();

/**
 * Lucene's `SimpleFSLockFactory`: the lock is the existence of the file, created exclusively
 * and deleted on close. Works wherever exclusive create works (including NFS), but a process
 * that dies holding it leaves the file behind, and that stale file blocks every obtain until
 * someone removes it by hand (`locksmith status` shows it).
 */
export class SimpleFSLockFactory extends FSLockFactory {
  static readonly INSTANCE: SimpleFSLockFactory = new SimpleFSLockFactory();

  /**
   * A singleton, as in Lucene: use `SimpleFSLockFactory.INSTANCE`. The constructor is private for the type
   * checker and throws at run time once `INSTANCE` exists, so plain JavaScript cannot make a
   * second instance either.
   */
  private constructor() {
    if (SimpleFSLockFactory.INSTANCE !== undefined) {
      throw new UnsupportedOperationError(
        'SimpleFSLockFactory is a singleton: use SimpleFSLockFactory.INSTANCE instead of new SimpleFSLockFactory()',
      );
    }
    super();
  }

  protected async obtainFSLock(directory: FSDirectory, lockName: string): Promise<Lock> {
    const dir = directory.path;
    const path = lockPath(dir, lockName);
    let fd: number;
    try {
      fd = openInLockDir(dir, path, CREATE_FLAGS);
    } catch (err) {
      const code =
        (err as { cause?: NodeJS.ErrnoException }).cause?.code ??
        (err as NodeJS.ErrnoException).code;
      if (code === 'EEXIST' || code === 'EACCES') {
        throw new LockObtainFailedError(`Lock held elsewhere: ${path}`, {
          cause: (err as { cause?: unknown }).cause ?? err,
        });
      }
      throw err;
    }
    let identity: FileIdentity;
    try {
      identity = identityOf(fstatSync(fd));
    } finally {
      closeSync(fd);
    }
    try {
      return new SimpleFSLock(path, identity, advanceFenceToken(dir, lockName, systemClock.wall()));
    } catch (err) {
      unlinkSync(path);
      throw err;
    }
  }

  override wakeSource(directory: Directory, lockName: string): WakeSource {
    const path = lockPath(this.fsDirectory(directory).path, lockName);
    return anyWake(releases.source(path), fileWakeSource(path));
  }
}

class SimpleFSLock extends FileLockHandle {
  protected checkValid(): void {
    this.checkLockFile();
  }

  protected closeOnce(): void {
    // Before the delete below, which the watch would otherwise take for a loss.
    this.stopWatching();
    try {
      this.ensureValid();
    } catch (err) {
      throw new LockReleaseFailedError(
        `Lock file cannot be safely removed. Manual intervention is recommended: ${this.path}`,
        { cause: err },
      );
    }
    try {
      unlinkSync(this.path);
    } catch (err) {
      throw new LockReleaseFailedError(
        `Unable to remove lock file. Manual intervention is recommended: ${this.path}`,
        {
          cause: err,
        },
      );
    }
    releases.notify(this.path);
  }

  override toString(): string {
    return `SimpleFSLock(path=${this.path},creationTime=${formatBirthtime(this.identity)})`;
  }
}
