import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Which locks the current call holds through a `with…` helper (`withLock`, `withRowLock`,
 * `withHandle` given a `held` key), so that a wait that could never end — the caller waits for
 * a lock it holds itself, e.g. `withLock(dir)` nested in `withLock(dir)` — fails at once
 * instead of hanging. Locks are not re-entrant; this only turns the hang into an error.
 *
 * "The caller" is the async call tree of the helper's function (Node's AsyncLocalStorage):
 * another task of the same process waiting for the lock is not the caller, and waits as usual
 * until the holder releases. Locks taken with a plain `acquire…`/`lock…` outside a helper are
 * not known here (their holder cannot be told apart from other tasks).
 */
export interface HeldLock {
  /** The namespace of `key`: a lock table (a row lock manager), or a family's constant. */
  readonly target: object;
  readonly key: string;
}

const holding = new AsyncLocalStorage<readonly HeldLock[]>();

/** Runs `fn` (and everything it starts) with `held` counted as held by the caller. */
export function runHolding<T>(held: HeldLock, fn: () => T): T {
  const current = holding.getStore();
  return holding.run(current === undefined ? [held] : [...current, held], fn);
}

/** Whether the current call runs inside any helper that holds a lock (a cheap first test). */
export function callerHoldsAny(): boolean {
  return holding.getStore() !== undefined;
}

/** Whether the current call runs inside a helper that holds `key` of `target`. */
export function heldByCaller(target: object, key: string): boolean {
  const current = holding.getStore();
  if (current === undefined) return false;
  for (const h of current) if (h.target === target && h.key === key) return true;
  return false;
}
