import type { Clock } from '../core/clock.js';
import { checkWaitDuration } from '../core/duration.js';
import { DeadlockError, InvalidArgumentError, LockObtainFailedError } from '../core/errors.js';
import { type HeldLock, heldByCaller } from '../core/held-by-caller.js';
import { validateLockName } from '../core/lock-name.js';
import { checkClock, checkOptionsObject, checkSignal, describeValue } from '../core/options.js';
import { type WaitOptions, waitFor } from '../core/wait.js';
import { Directory } from './directory.js';
import { FilterDirectory } from './filter-directory.js';
import type { Lock } from './lock.js';

/** The lock name Lucene's IndexWriter uses; the default here too. */
export const WRITE_LOCK_NAME = 'write.lock';

export interface AcquireLockOptions extends WaitOptions {
  /** Lock name within the directory (default `write.lock`). */
  name?: string;
}

/**
 * Obtains a lock in `directory`, waiting while it is held elsewhere, and wakes the moment it is
 * released or its holder dies: the factory's kernel hints (inotify on Linux) and in-process
 * release events trigger an immediate retry, and a slow jittered poll covers what hints miss
 * (network file systems, other platforms). A waiter costs no CPU between hints and never
 * occupies libuv's thread pool. Rejects with {@link LockTimeoutError} after `timeoutMs`
 * (cause: the last failure) or {@link AbortedError} when `signal` aborts.
 */
export function acquireLock(directory: Directory, options?: AcquireLockOptions): Promise<Lock> {
  let checked: CheckedAcquire;
  try {
    checked = checkAcquire('acquireLock', directory, options);
  } catch (err) {
    return Promise.reject(err);
  }
  return acquireChecked(directory, checked);
}

/** Options of {@link acquireLock} once validated. */
export interface CheckedAcquire {
  name: string;
  signal: AbortSignal | undefined;
  timeoutMs: number | undefined;
  clock: Clock;
}

/**
 * Validates `acquireLock`'s arguments (for `acquireLock` and `withLock`, named `what` in the
 * messages) before anything is touched: an {@link InvalidArgumentError} naming the option.
 * `timeoutMs` is a duration up to `MAX_DURATION_MS`, or `Infinity` (the default: forever).
 */
export function checkAcquire(
  what: string,
  directory: unknown,
  options: AcquireLockOptions | undefined,
): CheckedAcquire {
  if (!(directory instanceof Directory)) {
    throw new InvalidArgumentError(`${what} needs a Directory, got ${describeValue(directory)}`);
  }
  const opts = checkOptionsObject(options, `${what} options`);
  const name = opts.name === undefined ? WRITE_LOCK_NAME : validateLockName(opts.name);
  const signal = checkSignal(opts.signal, `${what} option signal`);
  const wait =
    opts.timeoutMs === undefined
      ? Number.POSITIVE_INFINITY
      : checkWaitDuration(opts.timeoutMs, `${what} option timeoutMs`);
  const timeoutMs = wait === Number.POSITIVE_INFINITY ? undefined : wait;
  const clock = checkClock(opts.clock, `${what} option clock`);
  return { name, signal, timeoutMs, clock };
}

/** The namespace of directory locks held by a caller (see `held-by-caller.ts`). */
const DIRECTORY_LOCKS = {};

/**
 * Which lock `name` of `directory` is, for telling whether the caller already holds it: the
 * innermost directory under any wrappers (its `toString` names its path or its instance and
 * its lock factory), and the name.
 */
export function heldLockOf(directory: Directory, name: string): HeldLock {
  let inner = directory;
  while (inner instanceof FilterDirectory) inner = inner.in;
  return { target: DIRECTORY_LOCKS, key: `${inner}/${name}` };
}

/**
 * {@link acquireLock} after {@link checkAcquire}. Fails at once with `DEADLOCK` when the caller
 * runs inside `withLock` of this very lock: that wait would never end.
 */
export async function acquireChecked(directory: Directory, options: CheckedAcquire): Promise<Lock> {
  const { name } = options;
  const held = heldLockOf(directory, name);
  if (heldByCaller(held.target, held.key)) {
    throw new DeadlockError(
      `Lock ${held.key} is held by this call's own withLock: waiting for it would never end (locks are not re-entrant; use the lock you hold)`,
    );
  }
  const factory = directory.lockFactory;
  const wake = factory.wakeSource(directory, name);
  return waitFor(
    async (last) => {
      if (factory.isHeldElsewhere(directory, name)) {
        last.error ??= new LockObtainFailedError(`Lock held elsewhere: ${directory}/${name}`);
        return undefined;
      }
      try {
        return await directory.obtainLock(name, { signal: options.signal });
      } catch (err) {
        if (!(err instanceof LockObtainFailedError)) throw err;
        last.error = err;
        return undefined;
      }
    },
    {
      resource: `${directory}/${name}`,
      wake,
      signal: options.signal,
      timeoutMs: options.timeoutMs,
      clock: options.clock,
      // With release hints the poll is only a safety net (hints can be missed on network file
      // systems), so it backs off to 1 s; without hints it stays at most 250 ms apart.
      minPollMs: 2,
      maxPollMs: wake === undefined ? 250 : 1000,
    },
  );
}
