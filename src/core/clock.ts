/**
 * Injected time. Deadlines and timeouts use {@link Clock.monotonic} (never goes back, unaffected
 * by wall-clock changes); {@link Clock.wall} is only for values that leave the process (file
 * contents, fencing-token floors). `sleep` is the single place a wait starts a timer, so a
 * fake clock can drive every timeout in tests.
 */
export interface Clock {
  /** Milliseconds on a monotonic clock; only differences are meaningful. */
  monotonic(): number;
  /** Milliseconds since the Unix epoch. */
  wall(): number;
  /** Resolves after `ms`, or rejects with the signal's reason when aborted first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /**
   * Calls `callback` once after `ms` unless the returned function is called first. Cheaper than
   * `sleep` (no promise, no signal) for structures that keep one timer for many deadlines. The
   * timer does not keep the process alive unless `keepAlive` is true. Optional: without it,
   * callers fall back on {@link setClockTimer}'s use of `sleep`.
   */
  setTimer?(ms: number, callback: () => void, keepAlive?: boolean): () => void;
}

/** {@link Clock.setTimer} when the clock has it, else the same contract built on `sleep`. */
export function setClockTimer(
  clock: Clock,
  ms: number,
  callback: () => void,
  keepAlive = false,
): () => void {
  if (clock.setTimer !== undefined) return clock.setTimer(ms, callback, keepAlive);
  const controller = new AbortController();
  clock.sleep(ms, controller.signal).then(callback, () => {});
  return () => controller.abort();
}

/** Node's longest single timer; a longer `setTimeout` fires at once (with a warning). */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * `setTimeout` for any delay: one longer than Node's limit is a chain of timers, so it fires
 * late never early. Returns the cancel function.
 */
function longTimeout(ms: number, callback: () => void, keepAlive: boolean): () => void {
  const due = performance.now() + ms;
  let timer: NodeJS.Timeout;
  const arm = (delay: number) => {
    timer = setTimeout(
      () => {
        const left = due - performance.now();
        if (left > 1) arm(left);
        else callback();
      },
      Math.min(Math.max(delay, 0), MAX_TIMER_MS),
    );
    if (!keepAlive) timer.unref();
  };
  arm(Number.isNaN(ms) ? 0 : ms);
  return () => clearTimeout(timer);
}

export const systemClock: Clock = {
  monotonic: () => performance.now(),
  wall: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const onAbort = () => {
        cancel();
        reject(signal?.reason);
      };
      const cancel = longTimeout(
        ms,
        () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        true,
      );
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
  setTimer: (ms, callback, keepAlive = false) => longTimeout(ms, callback, keepAlive),
};

/**
 * A clock that only moves when told to. `advance(ms)` fires every sleep whose deadline has
 * been reached, in deadline order.
 */
export class FakeClock implements Clock {
  #now: number;
  #wallOffset: number;
  #sleepers: { at: number; resolve: () => void }[] = [];

  constructor(start = 0, wallStart = 1_700_000_000_000) {
    this.#now = start;
    this.#wallOffset = wallStart - start;
  }

  monotonic(): number {
    return this.#now;
  }

  wall(): number {
    return this.#now + this.#wallOffset;
  }

  /** Number of sleeps not yet fired. */
  get pending(): number {
    return this.#sleepers.length;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const entry = {
        at: this.#now + Math.max(0, ms),
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        this.#sleepers = this.#sleepers.filter((s) => s !== entry);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#sleepers.push(entry);
    });
  }

  /** A timer fired by {@link advance} like a sleep (and counted in {@link pending}). */
  setTimer(ms: number, callback: () => void): () => void {
    const entry = { at: this.#now + Math.max(0, ms), resolve: callback };
    this.#sleepers.push(entry);
    return () => {
      this.#sleepers = this.#sleepers.filter((s) => s !== entry);
    };
  }

  /** Moves time forward and wakes the sleepers that are due, letting each settle in turn. */
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    for (;;) {
      this.#sleepers.sort((a, b) => a.at - b.at);
      const next = this.#sleepers[0];
      if (next === undefined || next.at > target) break;
      this.#sleepers.shift();
      this.#now = Math.max(this.#now, next.at);
      next.resolve();
      // Let the woken task run up to its next sleep before firing the next deadline.
      await new Promise<void>((r) => setImmediate(r));
    }
    this.#now = target;
  }
}
