import { UnsupportedOperationError } from '../core/errors.js';
import { bsdFlock } from './bsd-flock.js';
import { linuxOfdLock } from './linux-ofd-lock.js';

/**
 * An exclusive, whole-file, non-blocking kernel lock owned by an open file description, freed
 * by the kernel when the last descriptor closes (so also when the process dies).
 *
 * - Linux: open-file-description locks (`F_OFD_SETLK`). A second descriptor in the same
 *   process conflicts instead of silently sharing, closing another descriptor of the same file
 *   does not drop the lock, and they conflict with Java `FileChannel` (POSIX) locks, so Lucene
 *   and ActiveMQ processes are excluded too.
 * - macOS/BSD: `flock(LOCK_EX|LOCK_NB)`, also per open file description. It does not conflict
 *   with Java's POSIX locks.
 * - Windows: `LockFileEx(LOCKFILE_EXCLUSIVE_LOCK|LOCKFILE_FAIL_IMMEDIATELY)` would fit this
 *   interface; it is not implemented yet.
 */
export interface FileLockApi {
  /** Which kernel mechanism backs the locks. */
  readonly mechanism: 'ofd' | 'flock';
  /** Tries to lock `fd` (opened for writing). True when acquired, false when held elsewhere. */
  tryLock(fd: number, path: string): boolean;
  /** Releases a lock taken on `fd`. Closing `fd` releases it too. */
  unlock(fd: number, path: string): void;
  /**
   * True when another open file description holds a conflicting lock. `fd` may be read-only:
   * a probe that opens read-only and closes again does not look like a release to watchers.
   */
  isLockedElsewhere(fd: number, path: string): boolean;
  /**
   * Whether the kernel still sees a lock on the file behind `fd` (ours, since nobody else can
   * hold it while we do), checked through a new read-only description of the same inode, even
   * if the path was deleted or replaced. `undefined` where the platform cannot tell.
   */
  isLocked(fd: number): boolean | undefined;
}

let selected: FileLockApi | undefined;

/** The kernel lock API of this platform. Throws {@link UnsupportedOperationError} where none is. */
export function fileLocks(): FileLockApi {
  if (selected !== undefined) return selected;
  switch (process.platform) {
    case 'linux':
      selected = linuxOfdLock();
      break;
    case 'darwin':
    case 'freebsd':
      selected = bsdFlock();
      break;
    default:
      throw new UnsupportedOperationError(
        `Kernel file locks are not implemented on ${process.platform}`,
      );
  }
  return selected;
}
