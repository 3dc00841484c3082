import { InvalidArgumentError } from '../core/errors.js';
import { checkCallback, checkOptionsObject, checkSignal, describeValue } from '../core/options.js';
import { type DeferredSignal, deferredSignal } from './deferred-signal.js';
import { durableWait } from './durable-wait.js';
import type { RowLockOwner } from './row-lock-manager.js';

/** Per call: who is asking (for deadlock detection), and how to give up waiting for a row. */
export interface CallOptions {
  /** Cancels a wait for the row lock (must be an `AbortSignal`, not its controller). */
  signal?: AbortSignal | undefined;
  /** Who asks: an object or a non-empty string, compared with `===`. */
  owner?: RowLockOwner | undefined;
  /** Overrides `rowLockWaitMs` for this call: milliseconds >= 0, `Infinity` waits forever. */
  waitMs?: number | undefined;
  /**
   * Called when the call finds its row locked and is about to wait (at most once per row it
   * waits for). The locksmith server gives the call's handler back here, so a waiting call
   * occupies none. It must not throw.
   */
  onWait?: (() => void) | undefined;
  /** Internal: the server's per-call cancellation (see `deferred-signal.ts`). */
  [deferredSignal]?: DeferredSignal | undefined;
  /** Internal: the server's hook for a write that only waits for its fsync (`durable-wait.ts`). */
  [durableWait]?: (() => void) | undefined;
}

/** {@link CallOptions} once checked: every member is of its declared type or absent. */
export interface CheckedCallOptions {
  signal?: AbortSignal;
  owner?: RowLockOwner;
  waitMs?: number;
  onWait?: () => void;
  [deferredSignal]?: DeferredSignal;
  [durableWait]?: () => void;
}

const NONE: CheckedCallOptions = Object.freeze({});
const NAMES = new Set(['signal', 'owner', 'waitMs', 'onWait']);

/**
 * Checks the per-call options of a public entry point once, before it changes any state, and
 * returns a copy holding only the checked members (so a getter cannot answer differently
 * later). Refuses, with `INVALID_ARGUMENT` naming the method and the option: a non-object, an
 * unknown option name, a `signal` that is not an `AbortSignal` (an `AbortController` is
 * named as such), an `owner` that is not an object or a non-empty string, and a `waitMs`
 * that is not a number >= 0 (NaN, -1, '2', {} are refused; `Infinity` is allowed).
 */
export function checkCallOptions(
  options: CallOptions | undefined,
  what: string,
): CheckedCallOptions {
  if (options === undefined) return NONE;
  const opts = checkOptionsObject(options, `${what} options`);
  for (const name of Object.keys(opts)) {
    if (!NAMES.has(name)) {
      throw new InvalidArgumentError(
        `${what}: unknown option ${JSON.stringify(name)} (known: signal, owner, waitMs, onWait)`,
      );
    }
  }
  const { signal, owner, waitMs, onWait } = opts;
  const checked: CheckedCallOptions = {};
  const s = checkSignal(signal, `${what} option signal`);
  if (s !== undefined) checked.signal = s;
  if (owner !== undefined) checked.owner = checkOwner(owner, `${what} option owner`);
  if (waitMs !== undefined) checked.waitMs = checkWaitMs(waitMs, `${what} option waitMs`);
  const hook = checkCallback(onWait, `${what} option onWait`);
  if (hook !== undefined) checked.onWait = hook;
  const deferred = (opts as CallOptions)[deferredSignal];
  if (deferred !== undefined) checked[deferredSignal] = deferred;
  const durable = (opts as CallOptions)[durableWait];
  if (durable !== undefined) checked[durableWait] = durable;
  return checked;
}

/** An owner: an object (not null, not an array; a function counts) or a non-empty string. */
export function checkOwner(owner: unknown, what = 'owner'): RowLockOwner {
  if (
    (typeof owner === 'string' && owner.length > 0) ||
    (typeof owner === 'object' && owner !== null && !Array.isArray(owner)) ||
    typeof owner === 'function'
  ) {
    return owner as RowLockOwner;
  }
  throw new InvalidArgumentError(
    `${what} must be an object or a non-empty string, got ${describeValue(owner)}`,
  );
}

/** A wait limit: a number of milliseconds >= 0; `Infinity` waits forever. */
export function checkWaitMs(ms: unknown, what = 'waitMs'): number {
  if (typeof ms !== 'number' || Number.isNaN(ms) || ms < 0) {
    throw new InvalidArgumentError(
      `${what} must be a number of milliseconds >= 0 (Infinity waits forever), got ${describeValue(ms)}`,
    );
  }
  return ms;
}
