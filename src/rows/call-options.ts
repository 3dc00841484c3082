import { checkWaitDuration } from '../core/duration.js';
import { InvalidArgumentError } from '../core/errors.js';
import {
  booleanOption,
  customOption,
  readOptions,
  type SpecOf,
  signalOption,
} from '../core/option-spec.js';
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

/**
 * `lockRow`'s and `withRowLock`'s options: a call's, and whether the lock renews itself.
 *
 * `renew` (default `true`): the lock stays held while its holder is alive — in process, until
 * it is unlocked or the region closes; over the network, while the client's session lives
 * (the client's heartbeats keep it, as etcd's session keeps a lock). `false`: HBase's lease —
 * the lock is lost (`LEASE_EXPIRED`) unless some use or `renewLease` comes within the lease.
 */
export interface LockRowOptions extends CallOptions {
  renew?: boolean | undefined;
}

/** {@link CallOptions} once checked: every member is of its declared type or absent. */
export interface CheckedCallOptions {
  signal?: AbortSignal;
  owner?: RowLockOwner;
  waitMs?: number;
  renew?: boolean;
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

const LOCK_ROW_SPEC = {
  ...CALL_SPEC,
  renew: booleanOption(),
} as const satisfies SpecOf<Omit<LockRowOptions, typeof callContext>>;

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

/**
 * {@link checkCallOptions} for `lockRow` and `withRowLock`, with `renew` (a boolean; absent
 * means `true`, so the checked copy always carries it).
 */
export function checkLockRowOptions(
  options: LockRowOptions | undefined,
  what: string,
): CheckedCallOptions & { renew: boolean } {
  const { renew, ...rest } = readOptions(
    options,
    `${what} options`,
    LOCK_ROW_SPEC,
    `${what} option `,
  );
  const checked: CheckedCallOptions & { renew: boolean } = { renew: renew ?? true };
  if (rest.signal !== undefined) checked.signal = rest.signal;
  if (rest.owner !== undefined) checked.owner = rest.owner;
  if (rest.waitMs !== undefined) checked.waitMs = rest.waitMs;
  const context = options?.[callContext];
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
  /** As {@link LockRowOptions.renew}; default `true`. */
  renew?: boolean | undefined;
}

const TRY_LOCK_SPEC = {
  owner: CALL_SPEC.owner,
  renew: LOCK_ROW_SPEC.renew,
} as const satisfies SpecOf<TryLockOptions>;

/** `tryLockRow`'s options, checked (unknown names refused); `renew` defaults to `true`. */
export function checkTryLockOptions(options: TryLockOptions | undefined): {
  owner: RowLockOwner | undefined;
  renew: boolean;
} {
  if (options === undefined) return { owner: undefined, renew: true };
  const { owner, renew } = readOptions(
    options,
    'tryLockRow options',
    TRY_LOCK_SPEC,
    'tryLockRow option ',
  );
  return { owner, renew: renew ?? true };
}
