import { type HeldLock, runHolding } from './held-by-caller.js';
import type { LockHandle } from './lock-handle.js';

/**
 * Runs `fn` while holding `handle`, and releases it on every exit path: return, throw, or a
 * loss in the middle. `fn` gets the handle, so it can pass `handle.signal` to its work and
 * `handle.token` to whatever it writes.
 *
 * Resolves with `fn`'s result only if the lock was not found lost while `fn` ran; otherwise
 * it rejects with the {@link LockLostError} (the work may have overlapped another holder, and
 * the caller must not treat it as done under the lock). If `fn` throws, that error wins over
 * a failing release; the release error is kept as its `suppressed` property.
 *
 * With `held`, `fn` runs counted as holding that lock (see `held-by-caller.ts`): a wait for
 * the same lock from inside `fn` fails at once with `DEADLOCK` instead of never ending.
 *
 * Each family exports a thin form of this that also acquires (`withLock` in
 * `locksmith-locks/directory`, `withMastership` in `locksmith-locks/store`, `Region.withRowLock`).
 */
export async function withHandle<H extends LockHandle, T>(
  handle: H,
  fn: (handle: H) => T | PromiseLike<T>,
  held?: HeldLock,
): Promise<T> {
  let result: T;
  try {
    result = await (held === undefined ? fn(handle) : runHolding(held, () => fn(handle)));
  } catch (err) {
    await closeKeeping(handle, err);
    throw err;
  }
  const lost = handle.lostReason;
  if (lost === undefined) {
    await handle.close();
    return result;
  }
  await closeKeeping(handle, lost);
  throw lost;
}

/** Closes `handle`; a release error is attached to `err` as `suppressed` instead of thrown. */
async function closeKeeping(handle: LockHandle, err: unknown): Promise<void> {
  try {
    await handle.close();
  } catch (closeErr) {
    if (err instanceof Error && !('suppressed' in err)) {
      Object.defineProperty(err, 'suppressed', { value: closeErr, configurable: true });
    }
  }
}
