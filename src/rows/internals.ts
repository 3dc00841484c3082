import type { InsertPace } from './write-path.js';

/**
 * Hooks for tests, reachable only through this symbol (not part of the public API):
 * `region[rowsInternals]` is a {@link RegionTestHooks}.
 */
export const rowsInternals: unique symbol = Symbol('locksmith.rows.internals');

/** The places a Region lets a test bend it; `undefined` restores production behaviour. */
export interface RegionSeams {
  /** Replaces the write path's insert pacing. */
  setInsertPace(pace: InsertPace | undefined): void;
  /** Replaces the read point new reads take (the MVCC read point). */
  setReadPoint(readPoint: (() => number) | undefined): void;
  /** The storage's counters (a copy), if it keeps any. */
  storageStats(): object | undefined;
}

/**
 * Test hooks, kept out of the read and write paths: setting one swaps a strategy the region
 * uses anyway, so production code carries no test branch.
 *
 * - `insertYield` runs between the cell inserts of a mutation (awaited, even when it returns
 *   undefined), so tests can interleave readers with a half-inserted write.
 * - `readAll` makes reads opened from now on take "everything" as their read point, which
 *   breaks MVCC on purpose so a test can show its checks fail.
 */
export class RegionTestHooks {
  readonly #seams: RegionSeams;

  constructor(seams: RegionSeams) {
    this.#seams = seams;
  }

  set insertYield(hook: ((cellIndex: number) => Promise<void> | undefined) | undefined) {
    this.#seams.setInsertPace(hook === undefined ? undefined : (i) => Promise.resolve(hook(i)));
  }

  set readAll(on: boolean) {
    this.#seams.setReadPoint(on ? () => Number.MAX_SAFE_INTEGER : undefined);
  }

  /** The storage's counters (log records, batches, syncs, ...), read-only; none without one. */
  get storageStats(): object | undefined {
    return this.#seams.storageStats();
  }
}
