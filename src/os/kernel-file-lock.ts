import { constants } from 'node:fs';
import { LockIOError } from '../core/errors.js';
import type { WakeSource } from '../core/wait.js';
import { type FileStatus, fileCalls } from './file-calls.js';
import { type FileLockMode, fileLocks } from './file-lock.js';
import { InProcessReleases } from './in-process-releases.js';

/**
 * The kernel lock on a lock file, as both the directory family (`NativeFSLockFactory`) and the
 * store family (`SharedFileLocker`) take it (always exclusive), and `locksmith lock --shared` /
 * `--file` (exclusive or shared): open or create the file without following a
 * symlink at its name, lock it non-blocking, check that the locked inode is a regular file
 * that still has a name, and register the holder in this process so a second holder here is
 * refused without touching the file and waiters here wake on release. What the holder then
 * does with the file (keep it empty, write a record) and how it judges validity beyond the
 * kernel lock are the caller's.
 */

const OPEN_FLAGS = constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW;
const PROBE_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW;

/**
 * Process-wide registry of held kernel file locks, by key (the lock file's real path),
 * consulted before any descriptor is opened: two holders in this process exclude each other
 * here, cheaply, whichever family they belong to, and whatever their modes: a second lock on a
 * key this process holds is refused even when both are shared (one holder per key and
 * process; other processes' shared holders are what shared mode is for). Exported only for tests that play "an
 * external force" by clearing an entry; nothing else may write to it.
 */
export const heldKernelFileLocks = new Map<string, KernelFileLock>();
const releases = new InProcessReleases();

/** Why {@link KernelFileLock.tryAcquire} took no lock. */
export type KernelFileLockRefusal =
  /** A holder in this process has the key (the registry; no file was touched). */
  | 'this process'
  /** Another open file description holds the kernel lock (the probe or the lock said so). */
  | 'another process'
  /** The lock was taken on an inode that had lost its name meanwhile: worthless, dropped. */
  | 'deleted';

export interface KernelFileLockOptions {
  /**
   * `exclusive` (the default: what both lock families take) or `shared`: a read lock that
   * coexists with other processes' shared locks on the file and excludes exclusive ones.
   */
  readonly mode?: FileLockMode | undefined;
  /** The registry key, when it is not `path` itself (the real path of a path given otherwise). */
  readonly key?: string | undefined;
  /**
   * Probe read-only first and refuse without opening for writing when another description
   * holds the lock: a waiter that opens for writing and closes again would wake every watcher
   * of the file (close-after-write is the release hint).
   */
  readonly probeFirst?: boolean | undefined;
  /**
   * Called with `dir` when the open fails with ENOENT (the directory is missing); the open is
   * then retried once. What it throws is thrown as is.
   */
  readonly createDirectory?: ((dir: string) => void) | undefined;
}

/**
 * One kernel lock on a lock file, exclusive unless taken `shared` (see `file-lock.ts`: an OFD
 * lock on Linux, so it conflicts with Java `FileChannel` locks), held through the descriptor `fd` and registered
 * in this process under its key from acquisition to {@link release}. The file is never
 * deleted here; writing to it is the holder's business.
 */
export class KernelFileLock {
  readonly path: string;
  readonly key: string;
  readonly mode: FileLockMode;
  /** The descriptor that holds the lock. Closing it releases the lock: leave that to `release`. */
  readonly fd: number;
  /** The file's status right after it was locked (`nlink` > 0, a regular file). */
  readonly status: FileStatus;
  /** False once the descriptor was seen closed or reused by someone else: never close it then. */
  #fdOurs = true;

  private constructor(
    path: string,
    key: string,
    mode: FileLockMode,
    fd: number,
    status: FileStatus,
  ) {
    this.path = path;
    this.key = key;
    this.mode = mode;
    this.fd = fd;
    this.status = status;
  }

  /**
   * One non-blocking attempt at the kernel lock on `path` (a file in `dir`): refused at once if
   * a holder in this process has the key; else (after the optional read-only probe) the file is
   * opened for reading and writing (a shared holder too, so that its release wakes watchers),
   * created (mode 0644) if missing, never through a symlink at its name, and locked in
   * `options.mode`. A lock on a file that is not regular is an error; one on an inode deleted
   * between the open and the lock is dropped ('deleted'). On success the lock is registered
   * before this returns, and this runs synchronously, so no other attempt in this thread can
   * come in between the registry check and the registration.
   *
   * Open failures are explained ({@link explainOpenError}); a failure of the kernel lock call
   * itself, or of the status call, is thrown as the OS error. No descriptor is left open when
   * no lock is returned.
   */
  static tryAcquire(
    dir: string,
    path: string,
    options: KernelFileLockOptions = {},
  ): KernelFileLock | KernelFileLockRefusal {
    const key = options.key ?? path;
    const mode = options.mode ?? 'exclusive';
    if (heldKernelFileLocks.has(key)) return 'this process';
    if (options.probeFirst === true && kernelFileLockedElsewhere(dir, path, mode))
      return 'another process';
    const calls = fileCalls();
    const fd = openLockFile(dir, path, OPEN_FLAGS, options.createDirectory);
    let status: FileStatus | 'another process' | 'deleted';
    try {
      status = lockAndCheck(fd, path, mode);
    } catch (err) {
      calls.close(fd);
      throw err;
    }
    if (typeof status === 'string') {
      calls.close(fd);
      return status;
    }
    const lock = new KernelFileLock(path, key, mode, fd, status);
    heldKernelFileLocks.set(key, lock);
    return lock;
  }

  /** Whether the registry still names this lock under its key (nobody cleared or replaced it). */
  get registered(): boolean {
    return heldKernelFileLocks.get(this.key) === this;
  }

  /**
   * Whether the kernel lock is still ours: the descriptor still refers to the inode we locked
   * (same dev, ino and birth time: not closed, not reused for another file) and the kernel
   * still sees a lock on that inode, which nobody else can hold while we do (for a shared lock
   * this only tells that some lock is there). `isLocked` answering "cannot tell" (flock) counts
   * as held. A descriptor seen closed or reused is
   * never closed by {@link release}.
   */
  ownsKernelLock(): boolean {
    let now: FileStatus;
    try {
      now = fileCalls().fstat(this.fd);
    } catch {
      this.#fdOurs = false;
      return false;
    }
    if (
      now.dev !== this.status.dev ||
      now.ino !== this.status.ino ||
      now.birthtimeMs !== this.status.birthtimeMs
    ) {
      this.#fdOurs = false;
      return false;
    }
    try {
      return fileLocks().isLocked(this.fd) !== false;
    } catch {
      this.#fdOurs = false;
      return false;
    }
  }

  /**
   * Closes the descriptor, which drops the kernel lock (its open file description has no
   * other descriptor), unless it was seen not to be ours; then leaves the registry (if still
   * registered) and wakes this process's waiters on the key. Never throws: `registered` says
   * whether the entry was still ours, `closeError` is a close failure other than EBADF (the
   * registry and the waiters are done anyway). The file stays.
   */
  release(): { registered: boolean; closeError: unknown } {
    let closeError: unknown;
    try {
      if (this.#fdOurs) fileCalls().close(this.fd);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EBADF') closeError = err;
    }
    this.#fdOurs = false;
    const registered = this.registered;
    if (registered) heldKernelFileLocks.delete(this.key);
    releases.notify(this.key);
    return { registered, closeError };
  }
}

function lockAndCheck(
  fd: number,
  path: string,
  mode: FileLockMode,
): FileStatus | 'another process' | 'deleted' {
  if (!fileLocks().tryLock(fd, path, mode)) return 'another process';
  const status = fileCalls().fstat(fd);
  if (!status.isFile) throw new LockIOError(`Lock file ${path} is not a regular file`);
  // Deleted between our open and our lock: a lock on an orphan inode protects nothing.
  if (status.nlink === 0) return 'deleted';
  return status;
}

/** Whether a holder in this process has `key` (no system call). */
export function kernelFileLockHeldHere(key: string): boolean {
  return heldKernelFileLocks.has(key);
}

/**
 * Whether another open file description holds a kernel lock on `path` that a lock of `mode`
 * conflicts with (exclusive, the default: any lock; shared: an exclusive one), by a read-only
 * probe (which, closed again, does not look like a release to watchers). A missing file is not
 * locked; other open failures are thrown explained, a failed probe call as the OS error.
 */
export function kernelFileLockedElsewhere(
  dir: string,
  path: string,
  mode: FileLockMode = 'exclusive',
): boolean {
  const calls = fileCalls();
  let fd: number;
  try {
    fd = calls.open(path, PROBE_FLAGS, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw explainOpenError(err, dir, path);
  }
  try {
    return fileLocks().isLockedElsewhere(fd, path, mode);
  } finally {
    calls.close(fd);
  }
}

/** Wakes when a holder in this process releases the lock registered under `key`. */
export function kernelFileLockReleases(key: string): WakeSource {
  return releases.source(key);
}

/**
 * Opens `path` (a file in `dir`) with `flags` (mode 0644 if created). On ENOENT,
 * `createDirectory(dir)` (if given) runs and the open is retried once. Open failures are
 * thrown explained ({@link explainOpenError}).
 */
export function openLockFile(
  dir: string,
  path: string,
  flags: number,
  createDirectory?: (dir: string) => void,
): number {
  try {
    return fileCalls().open(path, flags, 0o644);
  } catch (err) {
    if (createDirectory === undefined || (err as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw explainOpenError(err, dir, path);
    }
  }
  createDirectory(dir);
  try {
    return fileCalls().open(path, flags, 0o644);
  } catch (err) {
    throw explainOpenError(err, dir, path);
  }
}

/**
 * The OS error of opening lock file `path` in `dir` as a {@link LockIOError} naming the path
 * (or the directory, where the directory is at fault), the OS error as its cause: a symlink
 * planted at the lock's name (ELOOP with O_NOFOLLOW) is refused in so many words. An error
 * without an errno code is returned as is.
 */
export function explainOpenError(err: unknown, dir: string, path: string): unknown {
  const code = (err as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ELOOP':
      return new LockIOError(`Refusing to follow a symbolic link at lock file ${path}`, {
        cause: err,
      });
    case 'ENOTDIR':
      return new LockIOError(`Lock directory ${dir} is not a directory`, { cause: err });
    case 'EISDIR':
      return new LockIOError(`Lock file ${path} is a directory`, { cause: err });
    case 'EACCES':
    case 'EPERM':
      return new LockIOError(`Permission denied creating or opening lock file ${path}`, {
        cause: err,
      });
    case 'EROFS':
      return new LockIOError(`Lock directory ${dir} is on a read-only file system`, { cause: err });
    case undefined:
      return err;
    default:
      return new LockIOError(`Cannot create or open lock file ${path}: ${code}`, { cause: err });
  }
}
