/** Calls and errors of one interval of {@link CallStats.rates}. */
export interface RateBucket {
  /** Start of the interval (wall clock, ms since the epoch). */
  at: number;
  calls: number;
  errors: number;
}

/** Call counts per interval over the last minutes, oldest first; the last bucket is current. */
export interface RateHistory {
  intervalMs: number;
  /** When this was read (wall clock): the current bucket covers `at` to `now`. */
  now: number;
  buckets: RateBucket[];
}

/** Interval and length of the rate history: 5 s buckets over 10 minutes (120 buckets). */
export const RATE_INTERVAL_MS = 5_000;
export const RATE_BUCKETS = 120;

/**
 * Calls served, by method and outcome, since the server started; per second over the last
 * minute (a ring of 60 one-second buckets); and calls and errors per 5 s over the last 10
 * minutes (a ring of 120 buckets). Both rings are advanced lazily (no timer) and bounded: the
 * memory is the same after a minute or a year. What status pages chart and `/metrics` exports.
 */
export class CallStats {
  readonly ok = new Map<string, number>();
  readonly failed = new Map<string, number>();
  readonly #ring = new Float64Array(60);
  #second = Math.floor(Date.now() / 1000);
  readonly #calls = new Float64Array(RATE_BUCKETS);
  readonly #errors = new Float64Array(RATE_BUCKETS);
  /** Index (time / interval) of the current bucket, and of the first one ever counted. */
  #interval = Math.floor(Date.now() / RATE_INTERVAL_MS);
  readonly #firstInterval = this.#interval;

  record(method: string, ok: boolean): void {
    const map = ok ? this.ok : this.failed;
    map.set(method, (map.get(method) ?? 0) + 1);
    const now = Date.now();
    this.#advance(now);
    const slot = this.#second % 60;
    this.#ring[slot] = (this.#ring[slot] ?? 0) + 1;
    const bucket = this.#interval % RATE_BUCKETS;
    this.#calls[bucket] = (this.#calls[bucket] ?? 0) + 1;
    if (!ok) this.#errors[bucket] = (this.#errors[bucket] ?? 0) + 1;
  }

  /** Calls per second for each of the last `seconds` whole seconds, oldest first. */
  perSecond(seconds = 60): number[] {
    this.#advance(Date.now());
    const n = Math.min(60, Math.max(1, seconds));
    const out: number[] = [];
    for (let s = this.#second - n; s < this.#second; s++)
      out.push(this.#ring[((s % 60) + 60) % 60] ?? 0);
    return out;
  }

  /**
   * Calls and errors per {@link RATE_INTERVAL_MS} over the last 10 minutes, oldest first,
   * ending with the current (partial) interval; none from before this object existed.
   */
  rates(): RateHistory {
    const now = Date.now();
    this.#advance(now);
    const first = Math.max(this.#firstInterval, this.#interval - RATE_BUCKETS + 1);
    const buckets: RateBucket[] = [];
    for (let i = first; i <= this.#interval; i++) {
      const slot = i % RATE_BUCKETS;
      buckets.push({
        at: i * RATE_INTERVAL_MS,
        calls: this.#calls[slot] ?? 0,
        errors: this.#errors[slot] ?? 0,
      });
    }
    return { intervalMs: RATE_INTERVAL_MS, now, buckets };
  }

  #advance(nowMs: number): void {
    const now = Math.floor(nowMs / 1000);
    if (now !== this.#second) {
      for (let s = this.#second + 1; s <= Math.min(now, this.#second + 60); s++)
        this.#ring[s % 60] = 0;
      this.#second = now;
    }
    const interval = Math.floor(nowMs / RATE_INTERVAL_MS);
    if (interval > this.#interval) {
      for (
        let i = this.#interval + 1;
        i <= Math.min(interval, this.#interval + RATE_BUCKETS);
        i++
      ) {
        this.#calls[i % RATE_BUCKETS] = 0;
        this.#errors[i % RATE_BUCKETS] = 0;
      }
      this.#interval = interval;
    }
  }
}
