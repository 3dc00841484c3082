import { type LockLossCode, LockLostError } from '../core/errors.js';
import { LockHandleBase } from '../core/lock-handle.js';
import type { FileIdentity } from './lock-file.js';
import { type LockFileLoss, lockFileLoss, watchLockFile } from './lock-file-watch.js';

/**
 * What the file-system locks share: a lock file whose deletion or replacement is noticed in
 * the background, once someone observes the handle.
 *
 * Nothing runs for a handle nobody watches (an uncontended obtain + release costs no watch).
 * The first read of `signal` or the first `lost` listener starts a watch of the lock file
 * (inotify hints plus a slow poll, see {@link watchLockFile}) and checks at once, on a
 * microtask, since the file may have changed before the watch began. Each hint runs the
 * subclass's `checkValid()`; a loss aborts `signal` and fires `lost` with a
 * {@link LockLostError} (`LOCK_LOST`) saying what happened. The watch stops on loss and on
 * close (subclasses call {@link stopWatching} first thing in `closeOnce`, so their own
 * release — deleting the file, closing the descriptor — is never taken for a loss).
 */
export abstract class FileLockHandle extends LockHandleBase {
  protected readonly path: string;
  protected readonly identity: FileIdentity;
  #stopWatch: (() => void) | undefined;
  #watching = false;

  constructor(path: string, identity: FileIdentity, token: number) {
    super(path, token);
    this.path = path;
    this.identity = identity;
  }

  protected override observed(): void {
    this.#watching = true;
    this.#stopWatch = watchLockFile(this.path, this.#recheck);
    queueMicrotask(this.#recheck);
  }

  /** Stops the background watch; idempotent. */
  protected stopWatching(): void {
    this.#watching = false;
    const stop = this.#stopWatch;
    this.#stopWatch = undefined;
    stop?.();
  }

  /** Throws (after reporting the loss) when the lock file is no longer the one we locked. */
  protected checkLockFile(): void {
    const loss = lockFileLoss(this.path, this.identity, this);
    if (loss !== undefined) this.lose(loss);
  }

  /** Reports `loss` (abort, `lost`), then throws its error, as `ensureValid()` must. */
  protected lose(loss: LockFileLoss, code: LockLossCode = 'LOCK_LOST'): never {
    this.markLost(
      new LockLostError(`Lock lost: ${this.path}: ${loss.description}`, {
        cause: loss.error,
        code,
      }),
      loss.error,
    );
    throw loss.error;
  }

  protected override markLost(reason: LockLostError, thrownByEnsureValid?: Error): void {
    super.markLost(reason, thrownByEnsureValid);
    this.stopWatching();
  }

  readonly #recheck = (): void => {
    if (!this.#watching || this.closed || this.lostReason !== undefined) return;
    try {
      this.checkValid();
    } catch {
      // A loss was reported by checkValid itself; anything else (an I/O error of the check)
      // proves nothing, and the next hint or poll checks again.
    }
  };
}
