import { InvalidArgumentError } from '../core/errors.js';
import { describeValue } from '../core/options.js';
import { withHandle } from '../core/with-lock.js';
import {
  type AcquireLockOptions,
  acquireChecked,
  checkAcquire,
  heldLockOf,
} from './acquire-lock.js';
import type { Directory } from './directory.js';
import type { Lock } from './lock.js';

/**
 * Obtains the lock `options.name` (default `write.lock`) in `directory`, waiting as
 * {@link acquireLock} does (`timeoutMs`, `signal`), runs `fn` with the held lock, and releases
 * it on every exit path: return, throw, or a loss in the middle.
 *
 * `fn` gets the {@link Lock}: pass `lock.signal` to the work (it aborts by itself if the lock
 * file is deleted or replaced) and `lock.token` to whatever the work writes. Resolves with
 * `fn`'s result only if the lock was not lost while `fn` ran; otherwise rejects with the
 * `LockLostError` (code `LOCK_LOST`), since the work may have overlapped another holder. If
 * `fn` throws, that error wins over a failing release (kept as its `suppressed` property).
 *
 * Every argument is checked before anything is touched ({@link InvalidArgumentError}). Locks
 * are not re-entrant: inside `fn`, a `withLock` or `acquireLock` of the same lock fails at once
 * with `DeadlockError` (`DEADLOCK`) instead of waiting forever.
 */
export function withLock<T>(
  directory: Directory,
  fn: (lock: Lock) => T | PromiseLike<T>,
  options?: AcquireLockOptions,
): Promise<T> {
  try {
    if (typeof fn !== 'function') {
      throw new InvalidArgumentError(`withLock needs a function to run, got ${describeValue(fn)}`);
    }
    const checked = checkAcquire('withLock', directory, options);
    return acquireChecked(directory, checked).then((lock) =>
      withHandle(lock, fn, heldLockOf(directory, checked.name)),
    );
  } catch (err) {
    return Promise.reject(err);
  }
}
