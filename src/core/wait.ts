import { type Clock, setClockTimer, systemClock } from './clock.js';
import { AbortedError, InvalidArgumentError, LockTimeoutError } from './errors.js';
import { describeValue } from './options.js';

const noop = (): void => {};

/** Subscribes `wake` to "the resource may have become free" hints; returns the unsubscribe. */
export type WakeSource = (wake: () => void) => () => void;

export interface WaitOptions {
  /** Cancels the wait; the promise rejects with an {@link AbortedError} whose cause is the reason. */
  signal?: AbortSignal | undefined;
  /** Give up after this many milliseconds (default: wait forever). */
  timeoutMs?: number | undefined;
  clock?: Clock | undefined;
}

export interface WaitForOptions extends WaitOptions {
  /** Names the resource in timeout and abort messages. */
  resource: string;
  /** Hints that the resource may be free; each one triggers an immediate retry. */
  wake?: WakeSource | undefined;
  /**
   * Fallback polling: first delay, doubling (with jitter) up to `maxPollMs`. Every wake-up costs
   * CPU, so with a good `wake` source the cap should be high.
   */
  minPollMs?: number;
  maxPollMs?: number;
}

/**
 * Retries `attempt` until it returns something other than `undefined`.
 *
 * Between attempts it sleeps on a timer (exponential backoff with equal jitter, so waiters do
 * not synchronise into herds) but wakes at once on any `wake` hint, so a waiter with a good
 * hint source sees a release within microseconds while costing almost nothing. A hint that
 * arrives while an attempt is running is not lost: the next attempt follows immediately.
 * Hints are subscribed to only after a first attempt failed (a free resource starts no
 * watcher), followed by one more immediate attempt. Errors thrown by `attempt` end the wait;
 * the caller decides which failures are retryable by returning `undefined` for them. The last
 * retryable failure can be reported through `lastFailure` and becomes the cause of the timeout
 * error.
 */
export async function waitFor<T>(
  attempt: (lastFailure: { error?: unknown }) => T | undefined | Promise<T | undefined>,
  options: WaitForOptions,
): Promise<T> {
  const clock = options.clock ?? systemClock;
  const { signal, resource } = options;
  const timeoutMs = options.timeoutMs ?? Number.POSITIVE_INFINITY;
  if (typeof timeoutMs !== 'number' || Number.isNaN(timeoutMs) || timeoutMs < 0) {
    throw new InvalidArgumentError(
      `Invalid wait timeout ${describeValue(timeoutMs)} for ${resource}: must be >= 0`,
    );
  }
  const minPoll = options.minPollMs ?? 1;
  const maxPoll = Math.max(minPoll, options.maxPollMs ?? 100);
  const deadline = clock.monotonic() + timeoutMs;
  const failure: { error?: unknown } = {};

  let hinted = false;
  let wakeCurrent: (() => void) | undefined;
  let unsubscribe: (() => void) | undefined;
  const aborted = () => new AbortedError(`Wait for ${resource} aborted`, { cause: signal?.reason });
  try {
    let delay = minPoll;
    for (;;) {
      if (signal?.aborted) throw aborted();
      hinted = false;
      const result = await attempt(failure);
      if (result !== undefined) return result;
      const remaining = deadline - clock.monotonic();
      if (remaining <= 0) {
        throw new LockTimeoutError(`Lock obtain timed out after ${timeoutMs} ms: ${resource}`, {
          cause: failure.error,
        });
      }
      if (hinted) continue;
      if (options.wake !== undefined && unsubscribe === undefined) {
        // Subscribed only once the resource proved busy, so a free one costs no watcher; then
        // one more attempt at once, as a release just before the subscription sent no hint.
        unsubscribe = options.wake(() => {
          hinted = true;
          wakeCurrent?.();
        });
        continue;
      }
      // "Equal jitter": half the delay fixed, half random, so waiters spread out without
      // polling twice as often as the delay says.
      const sleepMs = Math.min(
        remaining,
        Math.max(minPoll, delay / 2 + (Math.random() * delay) / 2),
      );
      delay = Math.min(maxPoll, delay * 2);
      // A bare timer and a resolver, not an AbortController: building the controller's abort
      // reason (an Error with a stack) on every hint was a measurable part of a handoff.
      let wakeUp = noop;
      let cancel = noop;
      await new Promise<void>((resolve) => {
        wakeUp = () => resolve();
        wakeCurrent = wakeUp;
        signal?.addEventListener('abort', wakeUp, { once: true });
        cancel = setClockTimer(clock, sleepMs, wakeUp, true);
      });
      // Woken by the timer, a hint or the caller's signal; the loop head tells which.
      cancel();
      wakeCurrent = undefined;
      signal?.removeEventListener('abort', wakeUp);
      if (hinted) delay = minPoll;
    }
  } finally {
    unsubscribe?.();
  }
}

/** Sleeps `ms`, rejecting with an {@link AbortedError} if `signal` aborts first. */
export async function abortableSleep(
  ms: number,
  signal?: AbortSignal,
  clock: Clock = systemClock,
  what = 'sleep',
): Promise<void> {
  if (signal?.aborted) throw new AbortedError(`${what} aborted`, { cause: signal.reason });
  try {
    await clock.sleep(ms, signal);
  } catch (err) {
    if (signal?.aborted) throw new AbortedError(`${what} aborted`, { cause: signal.reason });
    throw err;
  }
}
