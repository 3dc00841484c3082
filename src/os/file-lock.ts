import { UnsupportedOperationError } from '../core/errors.js';
import { bsdFlock } from './bsd-flock.js';
import { linuxOfdLock } from './linux-ofd-lock.js';

/**
 * Whether a lock excludes every other lock (`exclusive`, a write lock) or only exclusive ones
 * (`shared`, a read lock: several shared holders coexist).
 */
export type FileLockMode = 'exclusive' | 'shared';

/**
 * A whole-file, non-blocking kernel lock owned by an open file description, exclusive unless
 * asked `shared`, freed by the kernel when the last descriptor closes (so also when the process
 * dies).
 *
 * - Linux: open-file-description locks (`F_OFD_SETLK`, `F_WRLCK` or, shared, `F_RDLCK`). A
 *   second descriptor in the same process conflicts instead of silently sharing, closing
 *   another descriptor of the same file does not drop the lock, and they conflict with Java
 *   `FileChannel` (POSIX) locks, so Lucene and ActiveMQ processes are excluded too. They do
 *   not conflict with `flock(2)` locks (the `flock(1)` utility's) on Linux.
 * - macOS/BSD: `flock(LOCK_EX|LOCK_NB)` (shared: `LOCK_SH|LOCK_NB`), also per open file
 *   description. It does not conflict with Java's POSIX locks.
 * - Windows: `LockFileEx(LOCKFILE_EXCLUSIVE_LOCK|LOCKFILE_FAIL_IMMEDIATELY)` would fit this
 *   interface; it is not implemented yet.
 */
export interface FileLockApi {
  /** Which kernel mechanism backs the locks. */
  readonly mechanism: 'ofd' | 'flock';
  /**
   * Tries to lock `fd` (opened for reading and writing), exclusive unless `mode` says shared.
   * True when acquired, false when a conflicting lock is held elsewhere.
   */
  tryLock(fd: number, path: string, mode?: FileLockMode): boolean;
  /** Releases a lock taken on `fd`. Closing `fd` releases it too. */
  unlock(fd: number, path: string): void;
  /**
   * True when another open file description holds a lock that conflicts with a lock of `mode`
   * (default exclusive: any lock; shared: an exclusive lock). `fd` may be read-only: a probe
   * that opens read-only and closes again does not look like a release to watchers.
   */
  isLockedElsewhere(fd: number, path: string, mode?: FileLockMode): boolean;
  /**
   * Whether the kernel still sees a lock (of any mode) on the file behind `fd`, checked through
   * a new read-only description of the same inode, even if the path was deleted or replaced:
   * for an exclusive lock of `fd`'s that is ours, since nobody else can hold one while we do
   * (a shared one may be another holder's). `undefined` where the platform cannot tell.
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
