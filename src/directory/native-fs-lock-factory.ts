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
import { anyWake } from '../os/in-process-releases.js';
import {
  heldKernelFileLocks,
  KernelFileLock,
  kernelFileLockedElsewhere,
  kernelFileLockHeldHere,
  kernelFileLockReleases,
} from '../os/kernel-file-lock.js';
import type { Directory } from './directory.js';
import { advanceFenceTokenOf } from './fence-token-file.js';
import { FileLockHandle } from './file-lock-handle.js';
import type { FSDirectory } from './fs-directory.js';
import { FSLockFactory } from './fs-lock-factory.js';
import { internals } from './internals.js';
import type { Lock } from './lock.js';
import {
  createLockDirectory,
  type FileIdentity,
  formatBirthtime,
  identityOf,
  lockPath,
} from './lock-file.js';

/**
 * Every obtain recreates a lock directory deleted meanwhile (Lucene). The kernel lock's
 * process-wide registry (`src/os/kernel-file-lock.ts`) plays Lucene's static `LOCK_HELD`; its
 * keys are real paths: the directory's stored real path plus the name, which cannot contain a
 * separator and is never followed if it is a symlink. Every key is spelled by `lockPath`, so
 * a release wakes the waiters it should.
 */
const OBTAIN_OPTIONS = { createDirectory: createLockDirectory };

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
    return anyWake(kernelFileLockReleases(path), fileWakeSource(path));
  }

  /** Held in this process, or (by a read-only probe) by another open file description. */
  override isHeldElsewhere(directory: Directory, lockName: string): boolean {
    const dir = this.fsDirectory(directory).path;
    const path = lockPath(dir, lockName);
    if (kernelFileLockHeldHere(path)) return true;
    try {
      return kernelFileLockedElsewhere(dir, path);
    } catch {
      return false;
    }
  }
}

function obtainNative(dir: string, name: string): NativeFSLock {
  const path = lockPath(dir, name);
  const kernel = KernelFileLock.tryAcquire(dir, path, OBTAIN_OPTIONS);
  switch (kernel) {
    case 'this process':
      throw new LockObtainFailedError(`Lock held by this virtual machine: ${path}`);
    case 'another process':
      throw new LockObtainFailedError(`Lock held by another program: ${path}`);
    case 'deleted':
      throw new LockObtainFailedError(`Lock file was deleted while being obtained: ${path}`);
  }
  try {
    return new NativeFSLock(
      kernel,
      identityOf(kernel.status),
      advanceFenceTokenOf(path, systemClock.wall()),
    );
  } catch (err) {
    kernel.release();
    throw err;
  }
}

/**
 * A held NativeFS lock: a {@link KernelFileLock} plus Lucene's validity checks and close.
 * Valid while its registry entry is its own, the kernel lock is still held through its
 * descriptor, the file is empty and the path still names the locked file.
 */
class NativeFSLock extends FileLockHandle {
  readonly #kernel: KernelFileLock;
  /** Java's `FileLock.isValid()`: false once the kernel lock was released or the fd closed. */
  #osLockValid = true;

  constructor(kernel: KernelFileLock, identity: FileIdentity, token: number) {
    super(kernel.path, identity, token);
    this.#kernel = kernel;
  }

  /** For tests that play "an external force". */
  get [internals]() {
    return { fd: this.#kernel.fd, path: this.path, registry: heldKernelFileLocks };
  }

  /** Lucene's checks, in Lucene's order, each loss described; also run in the background. */
  protected checkValid(): void {
    if (!this.#kernel.registered) {
      this.lose({
        description: "its entry was cleared from this process's registry of held locks",
        error: new AlreadyClosedError(`Lock path unexpectedly cleared from map: ${this}`),
      });
    }
    if (!this.#osLockValid || !this.#kernel.ownsKernelLock()) {
      this.#osLockValid = false;
      this.lose({
        description: 'the kernel lock was released or its descriptor closed by an external force',
        error: new AlreadyClosedError(`FileLock invalidated by an external force: ${this}`),
      });
    }
    const size = fileCalls().fstat(this.#kernel.fd).size;
    if (size !== 0) {
      this.lose({
        description: `the lock file was written to (size ${size}; it must stay empty)`,
        error: new AlreadyClosedError(`Unexpected lock file size: ${size}, (lock=${this})`),
      });
    }
    this.checkLockFile();
  }

  protected closeOnce(): void {
    this.stopWatching();
    // No validation: closing can't break anyone else's lock (Lucene). The file stays: deleting
    // it is unsafe and a leftover is harmless.
    const { registered, closeError } = this.#kernel.release();
    this.#osLockValid = false;
    if (!registered) {
      // Lucene reports this from its finally block, over a failed close.
      throw new AlreadyClosedError(`Lock path was cleared but never marked as held: ${this.path}`);
    }
    if (closeError !== undefined) {
      throw new LockIOError(`Cannot close lock file ${this.path}`, { cause: closeError });
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
