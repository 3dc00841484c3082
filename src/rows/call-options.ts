import { checkWaitDuration } from '../core/duration.js';
import { InvalidArgumentError } from '../core/errors.js';
import { customOption, readOptions, type SpecOf, signalOption } from '../core/option-spec.js';
import { describeValue } from '../core/options.js';
import { callContext, type RowCallContext } from './call-context.js';
import type { RowLockOwner } from './row-lock-manager.js';

/** Per call: who is asking (for deadlock detection), and how to give up waiting for a row. */
export interface CallOptions {
  /** Cancels a wait for the row lock (must be an `AbortSignal`, not its controller). */
  signal?: AbortSignal | undefined;
  /** Who asks: an object or a non-empty string, compared with `===`. */
  owner?: RowLockOwner | undefined;
  /** Overrides `rowLockWaitMs` for this call: milliseconds >= 0, `Infinity` waits forever. */
  waitMs?: number | undefined;
  /** Internal: the host's view of the call (see `call-context.ts`). */
  [callContext]?: RowCallContext | undefined;
}

/** {@link CallOptions} once checked: every member is of its declared type or absent. */
export interface CheckedCallOptions {
  signal?: AbortSignal;
  owner?: RowLockOwner;
  waitMs?: number;
  [callContext]?: RowCallContext;
}

const NONE: CheckedCallOptions = Object.freeze({});

const CALL_SPEC = {
  signal: signalOption(),
  owner: customOption('an object or a non-empty string', (value, label) =>
    checkOwner(value, label),
  ),
  waitMs: customOption('milliseconds >= 0, or Infinity', (value, label) =>
    checkWaitMs(value, label),
  ),
} as const satisfies SpecOf<Omit<CallOptions, typeof callContext>>;

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
  const { signal, owner, waitMs } = readOptions(
    options,
    `${what} options`,
    CALL_SPEC,
    `${what} option `,
  );
  const checked: CheckedCallOptions = {};
  if (signal !== undefined) checked.signal = signal;
  if (owner !== undefined) checked.owner = owner;
  if (waitMs !== undefined) checked.waitMs = waitMs;
  const context = options[callContext];
  if (context !== undefined) checked[callContext] = context;
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
  return checkWaitDuration(ms, what);
}

/** `tryLockRow`'s options. */
export interface TryLockOptions {
  /** Who asks (for deadlock detection): an object or a non-empty string. */
  owner?: RowLockOwner | undefined;
}

const TRY_LOCK_SPEC = { owner: CALL_SPEC.owner } as const satisfies SpecOf<TryLockOptions>;

/** The owner named by `tryLockRow`'s options, checked (unknown names refused). */
export function checkTryLockOptions(options: TryLockOptions | undefined): RowLockOwner | undefined {
  if (options === undefined) return undefined;
  return readOptions(options, 'tryLockRow options', TRY_LOCK_SPEC, 'tryLockRow option ').owner;
}
