import type { Clock } from '../core/clock.js';

/** Past this many rows, the rows whose last time the clock has passed are forgotten. */
const PRUNE_AT = 65536;

/**
 * Server timestamps of mutations (HBase's "now" for cells without a timestamp).
 *
 * Contract: {@link timeFor} gives the wall clock in whole milliseconds, but never a time at or
 * before the previous one it gave the same row, so two mutations of one row never share a
 * timestamp even within a millisecond or across a clock step back. Memory is bounded by
 * forgetting rows the clock has passed: they no longer constrain anything.
 */
export class TimestampAllocator {
  readonly #clock: Clock;
  /** Newest time given to each row. */
  readonly #last = new Map<string, number>();

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** The server time for a mutation of `row`. */
  timeFor(row: string): number {
    const now = Math.floor(this.#clock.wall());
    const last = this.#last.get(row);
    const ts = last === undefined || now > last ? now : last + 1;
    this.#last.set(row, ts);
    if (this.#last.size > PRUNE_AT) {
      for (const [key, value] of this.#last) if (value < now) this.#last.delete(key);
    }
    return ts;
  }
}
