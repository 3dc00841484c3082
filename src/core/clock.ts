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
        clearTimeout(timer);
        reject(signal?.reason);
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
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
