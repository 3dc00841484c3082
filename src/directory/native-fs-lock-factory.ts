import { constants } from 'node:fs';
import { systemClock } from '../core/clock.js';
import {
  AlreadyClosedError,
  LockIOError,
  LockObtainFailedError,
  UnsupportedOperationError,
} from '../core/errors.js';
import type { WakeSource } from '../core/wait.js';
import { fileCalls } from '../os/file-calls.js';
import { fileLocks } from '../os/file-lock.js';
import { fileWakeSource } from '../os/file-watcher.js';
import type { Directory } from './directory.js';
import { advanceFenceTokenOf } from './fence-token-file.js';
import { FileLockHandle } from './file-lock-handle.js';
import type { FSDirectory } from './fs-directory.js';
import { FSLockFactory } from './fs-lock-factory.js';
import { anyWake, InProcessReleases } from './in-process-releases.js';
import { internals } from './internals.js';
import type { Lock } from './lock.js';
import {
  type FileIdentity,
  formatBirthtime,
  identityOf,
  lockPath,
  openInLockDir,
  sameIdentity,
} from './lock-file.js';

const OPEN_FLAGS = constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW;
const PROBE_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW;

/**
 * Process-wide registry of held lock paths (Lucene's static `LOCK_HELD`), consulted before any
 * descriptor is opened. Keys are real paths: the directory's stored real path plus the name,
 * which cannot contain a separator and is never followed if it is a symlink. Every key, here
 * and in `releases`, is spelled by `lockPath`, so a release wakes the waiters it should.
 */
const LOCK_HELD = new Map<string, NativeFSLock>();
const releases = new InProcessReleases();

/**
 * Lucene's `NativeFSLockFactory`, the default for file-system directories: a real kernel lock
 * (see `src/os/file-lock.ts`), freed by the OS when the process dies, so a leftover
 * `write.lock` is harmless. The lock file is created if missing, never written and never
 * deleted. A second obtain in this process fails from the registry without touching the file.
 *
 * Not for NFS: kernel locks there depend on the NFS lock manager and can be double-granted.
 */
export class NativeFSLockFactory extends FSLockFactory {
  static readonly INSTANCE: NativeFSLockFactory = new NativeFSLockFactory();

  /**
   * A singleton, as in Lucene: use `NativeFSLockFactory.INSTANCE`. The constructor is private for the type
   * checker and throws at run time once `INSTANCE` exists, so plain JavaScript cannot make a
   * second instance either.
   */
  private constructor() {
    if (NativeFSLockFactory.INSTANCE !== undefined) {
      throw new UnsupportedOperationError(
        'NativeFSLockFactory is a singleton: use NativeFSLockFactory.INSTANCE instead of new NativeFSLockFactory()',
      );
    }
    super();
  }

  protected obtainFSLock(directory: FSDirectory, lockName: string): Promise<Lock> {
    return Promise.resolve(obtainNative(directory.path, lockName));
  }

  override wakeSource(directory: Directory, lockName: string): WakeSource {
    const path = lockPath(this.fsDirectory(directory).path, lockName);
    return anyWake(releases.source(path), fileWakeSource(path));
  }

  /** Held in this process, or (by a read-only probe) by another open file description. */
  override isHeldElsewhere(directory: Directory, lockName: string): boolean {
    const path = lockPath(this.fsDirectory(directory).path, lockName);
    if (LOCK_HELD.has(path)) return true;
    let fd: number;
    try {
      fd = fileCalls().open(path, PROBE_FLAGS, 0);
    } catch {
      return false;
    }
    try {
      return fileLocks().isLockedElsewhere(fd, path);
    } catch {
      return false;
    } finally {
      fileCalls().close(fd);
    }
  }
}

function obtainNative(dir: string, name: string): NativeFSLock {
  const path = lockPath(dir, name);
  // This runs synchronously to the end, so no other obtain in this thread can interleave
  // between the registry check and the registration.
  if (LOCK_HELD.has(path)) {
    throw new LockObtainFailedError(`Lock held by this virtual machine: ${path}`);
  }
  const calls = fileCalls();
  const fd = openInLockDir(dir, path, OPEN_FLAGS);
  try {
    if (!fileLocks().tryLock(fd, path)) {
      throw new LockObtainFailedError(`Lock held by another program: ${path}`);
    }
    const st = calls.fstat(fd);
    if (!st.isFile) throw new LockIOError(`Lock file ${path} is not a regular file`);
    if (st.nlink === 0) {
      // Deleted between our open and our lock: the lock is on an orphan inode.
      throw new LockObtainFailedError(`Lock file was deleted while being obtained: ${path}`);
    }
    const lock = new NativeFSLock(
      path,
      fd,
      identityOf(st),
      advanceFenceTokenOf(path, systemClock.wall()),
    );
    LOCK_HELD.set(path, lock);
    return lock;
  } catch (err) {
    calls.close(fd);
    throw err;
  }
}

class NativeFSLock extends FileLockHandle {
  readonly #fd: number;
  /** Java's `FileLock.isValid()`: false once the kernel lock was released or the fd closed. */
  #osLockValid = true;
  /** False once the descriptor was seen closed or reused by someone else: never close it then. */
  #fdOurs = true;

  constructor(path: string, fd: number, identity: FileIdentity, token: number) {
    super(path, identity, token);
    this.#fd = fd;
  }

  /** For tests that play "an external force". */
  get [internals]() {
    return { fd: this.#fd, path: this.path, registry: LOCK_HELD };
  }

  /** Lucene's checks, in Lucene's order, each loss described; also run in the background. */
  protected checkValid(): void {
    if (LOCK_HELD.get(this.path) !== this) {
      this.lose({
        description: "its entry was cleared from this process's registry of held locks",
        error: new AlreadyClosedError(`Lock path unexpectedly cleared from map: ${this}`),
      });
    }
    if (!this.#osLockValid || !this.#ownsKernelLock()) {
      this.#osLockValid = false;
      this.lose({
        description: 'the kernel lock was released or its descriptor closed by an external force',
        error: new AlreadyClosedError(`FileLock invalidated by an external force: ${this}`),
      });
    }
    const size = fileCalls().fstat(this.#fd).size;
    if (size !== 0) {
      this.lose({
        description: `the lock file was written to (size ${size}; it must stay empty)`,
        error: new AlreadyClosedError(`Unexpected lock file size: ${size}, (lock=${this})`),
      });
    }
    this.checkLockFile();
  }

  /**
   * The descriptor must still be ours (not closed, not reused for another file) and the
   * kernel must still see a lock on its inode: since nobody else can hold it while we do,
   * that lock is ours.
   */
  #ownsKernelLock(): boolean {
    let mine: FileIdentity;
    try {
      mine = identityOf(fileCalls().fstat(this.#fd));
    } catch {
      this.#fdOurs = false;
      return false;
    }
    if (!sameIdentity(mine, this.identity)) {
      this.#fdOurs = false;
      return false;
    }
    try {
      return fileLocks().isLocked(this.#fd) !== false;
    } catch {
      this.#fdOurs = false;
      return false;
    }
  }

  protected closeOnce(): void {
    this.stopWatching();
    // No validation: closing can't break anyone else's lock (Lucene). Closing the descriptor
    // releases the kernel lock (its open file description has no other descriptor), so no
    // separate unlock call is made. The file stays: deleting it is unsafe and a leftover is
    // harmless.
    try {
      if (this.#fdOurs) fileCalls().close(this.#fd);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EBADF')
        throw new LockIOError(`Cannot close lock file ${this.path}`, { cause: err });
    } finally {
      this.#osLockValid = false;
      const registered = LOCK_HELD.get(this.path) === this;
      if (registered) LOCK_HELD.delete(this.path);
      releases.notify(this.path);
      if (!registered) {
        // biome-ignore lint/correctness/noUnsafeFinally: Lucene reports this from its finally block too.
        throw new AlreadyClosedError(
          `Lock path was cleared but never marked as held: ${this.path}`,
        );
      }
    }
  }

  override toString(): string {
    return `NativeFSLock(path=${this.path},impl=${fileLocks().mechanism},creationTime=${formatBirthtime(this.identity)})`;
  }
}

/**
 * The descriptor that holds a NativeFS lock's kernel lock, or `undefined` for any other lock.
 * Handing it to a child process (as `flock(1)` does) keeps the lock held for as long as the
 * child runs, even if this process dies first. Never close it yourself.
 */
export function nativeLockDescriptor(lock: Lock): number | undefined {
  return lock instanceof NativeFSLock && !lock.closed ? lock[internals].fd : undefined;
}
