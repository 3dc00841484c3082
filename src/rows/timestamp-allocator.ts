import type { Clock } from '../core/clock.js';

/**
 * The fewest rows remembered before a prune. A prune runs when the rows remembered reach
 * twice what the previous prune left (and at least this), so its cost, linear in the rows
 * remembered, is paid at most once per as many new rows: amortized O(1) a mutation, and the
 * map stays near the rows mutated within the current millisecond (each held row lock's
 * journal row stayed here until 65,536 rows had built up: ~100 B a lock).
 */
const MIN_PRUNE_AT = 1024;

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
  #pruneAt = MIN_PRUNE_AT;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** The server time for a mutation of `row`. */
  timeFor(row: string): number {
    const now = Math.floor(this.#clock.wall());
    const last = this.#last.get(row);
    const ts = last === undefined || now > last ? now : last + 1;
    this.#last.set(row, ts);
    if (this.#last.size >= this.#pruneAt) {
      for (const [key, value] of this.#last) if (value < now) this.#last.delete(key);
      this.#pruneAt = Math.max(MIN_PRUNE_AT, 2 * this.#last.size);
    }
    return ts;
  }

  /** Rows remembered (whose last time the clock may not have passed yet). */
  get size(): number {
    return this.#last.size;
  }
}
