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
  /** Turns the storage's epoch checks off or back on (see {@link StorageSeams}). */
  setFenceChecks(on: boolean): void;
  /** The storage's counters (a copy), if it keeps any. */
  storageStats(): Readonly<Record<string, number>> | undefined;
}

/**
 * What a storage lets a test bend, through `storage[rowsInternals]` (RowStorage has it):
 * `setFenceChecks(false)` stops the epoch checks of a storage opened with an epoch (per
 * batch, segment creation, snapshot publish, deletion), so a deposed writer acknowledges what
 * no one will read back: a broken fence on purpose, for checkers that must notice it.
 */
export interface StorageSeams {
  setFenceChecks(on: boolean): void;
}

/**
 * Test hooks, kept out of the read and write paths: setting one swaps a strategy the region
 * uses anyway, so production code carries no test branch.
 *
 * - `insertYield` runs between the cell inserts of a mutation (awaited, even when it returns
 *   undefined), so tests can interleave readers with a half-inserted write.
 * - `readAll` makes reads opened from now on take "everything" as their read point, which
 *   breaks MVCC on purpose so a test can show its checks fail.
 * - `fenceChecks = false` turns off the epoch checks of the region's storage (opened with
 *   `epoch`), which breaks fencing on purpose (a deposed master's writes are acknowledged and
 *   then lost), so a test or a checker can show it notices.
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

  set fenceChecks(on: boolean) {
    this.#seams.setFenceChecks(on);
  }

  /** The storage's counters (log records, batches, syncs, ...), read-only; none without one. */
  get storageStats(): Readonly<Record<string, number>> | undefined {
    return this.#seams.storageStats();
  }
}
