import { InvalidArgumentError } from '../core/errors.js';
import { toStringBinary } from '../rows/bytes.js';
import { Delete, type Increment, Put, type RowMutations } from '../rows/mutation.js';
import { cellCount } from '../rows/mutation-checks.js';
import type { Get, Scan } from '../rows/query.js';
import type { CallOptions, LockRowOptions, Region, TryLockOptions } from '../rows/region.js';
import type { Result } from '../rows/result.js';
import { type BytesInput, checkCellCount, checkRow } from '../rows/row-input.js';
import type { RowLock } from '../rows/row-lock.js';
import type { RowLockActivity, RowLockOwner } from '../rows/row-lock-manager.js';
import type { BatchStatus } from '../rows/table.js';

/** One region of a table and the rows it holds: `[startKey, endKey)`, latin1 keys. */
export interface RegionRange {
  /** The region's first row; `''` for the table's first region. */
  readonly startKey: string;
  /** The next region's first row; `''` for the table's last region (no end). */
  readonly endKey: string;
  readonly region: Region;
}

/**
 * A table as the server serves it: its regions by key range (HBase's region boundaries,
 * `splits` of its descriptor), each a {@link Region} with its own storage, row locks and
 * tokens. Every call goes to the region of its row; what spans rows is split (`batch`, `scan`,
 * which runs the regions in key order) or refused where it would lose its atomicity
 * (`mutateRows` across regions, as HBase refuses it). With one region every call goes straight
 * to it.
 *
 * What a region does not share with the others: its wait-for graph (a deadlock whose cycle
 * crosses regions, or tables, is not detected: its waits end at their timeout) and its
 * fencing tokens (they increase per region, so per row, as the lock contract asks).
 */
export class TableRegions {
  readonly #starts: string[];
  readonly #regions: Region[];

  /** `starts[0]` is `''`; the others ascend (a descriptor's `splits`). */
  constructor(starts: readonly string[], regions: readonly Region[]) {
    this.#starts = [...starts];
    this.#regions = [...regions];
  }

  get size(): number {
    return this.#regions.length;
  }

  /** The regions in key order with their ranges. */
  ranges(): RegionRange[] {
    return this.#regions.map((region, i) => ({
      startKey: this.#starts[i] as string,
      endKey: this.#starts[i + 1] ?? '',
      region,
    }));
  }

  /** The index of the region that holds `key` (a checked latin1 row key). */
  #indexOf(key: string): number {
    const starts = this.#starts;
    // The last region whose start is <= key (starts[0] = '' is <= every key).
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((starts[mid] as string) <= key) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** The region of a row key in its latin1 form; the first region for anything else. */
  #of(key: unknown): Region {
    const regions = this.#regions;
    if (regions.length === 1 || typeof key !== 'string') return regions[0] as Region;
    return regions[this.#indexOf(key)] as Region;
  }

  /** The region of a row as callers give it (checked as every region checks it). */
  #ofRow(row: BytesInput): Region {
    return this.#regions.length === 1 ? (this.#regions[0] as Region) : this.#of(checkRow(row));
  }

  /** The region of a mutation or query: by its row, the first one if it has none. */
  #ofObject(object: unknown): Region {
    return this.#of((object as { row?: unknown } | null)?.row);
  }

  // ---- locks ---------------------------------------------------------------------------

  lockRow(row: BytesInput, options?: LockRowOptions): Promise<RowLock> {
    return this.#ofRow(row).lockRow(row, options);
  }

  tryLockRow(row: BytesInput, options?: TryLockOptions): Promise<RowLock | null> {
    return this.#ofRow(row).tryLockRow(row, options);
  }

  restoreRowLock(
    row: Buffer,
    recorded: { lockId: string; token: number; owner?: RowLockOwner | undefined; renew: boolean },
  ): RowLock {
    return this.#ofRow(row).restoreRowLock(row, recorded);
  }

  /** Releases a lock this table granted (its row names its region). */
  unlockRow(lock: RowLock): Promise<void> {
    return this.#of(lock.row.toString('latin1')).unlockRow(lock);
  }

  renewLease(lock: RowLock): Promise<void> {
    return this.#of(lock.row.toString('latin1')).renewLease(lock);
  }

  /** Every region's waits (at most `limit` listed) and deadlocks, summed. */
  rowLockActivity(limit = 100): RowLockActivity {
    if (this.#regions.length === 1) return (this.#regions[0] as Region).rowLockActivity(limit);
    const waits: RowLockActivity['waits'][number][] = [];
    let waiting = 0;
    let deadlocks = 0;
    let lastDeadlock: RowLockActivity['lastDeadlock'];
    for (const region of this.#regions) {
      const a = region.rowLockActivity(Math.max(0, limit - waits.length));
      waits.push(...a.waits);
      waiting += a.waiting;
      deadlocks += a.deadlocks;
      if (
        a.lastDeadlock !== undefined &&
        (lastDeadlock === undefined || a.lastDeadlock.at >= lastDeadlock.at)
      )
        lastDeadlock = a.lastDeadlock;
    }
    return { waits, waiting, deadlocks, lastDeadlock };
  }

  rowLockWaiting(owner?: RowLockOwner): number {
    let n = 0;
    for (const region of this.#regions) n += region.rowLockWaiting(owner);
    return n;
  }

  get rowCount(): number {
    let n = 0;
    for (const region of this.#regions) n += region.rowCount;
    return n;
  }

  get cellCount(): number {
    let n = 0;
    for (const region of this.#regions) n += region.cellCount;
    return n;
  }

  // ---- reads ---------------------------------------------------------------------------

  get(get: Get, options?: CallOptions): Promise<Result> {
    return this.#ofObject(get).get(get, options);
  }

  /**
   * The scan's rows in key order: each region from the one holding `startRow` up to the one
   * before `stopRow`, one after the other (each at its own read point, as HBase's scanners
   * move from region to region).
   */
  async *scan(scan: Scan): AsyncGenerator<Result, void, undefined> {
    const regions = this.#regions;
    const start = (scan as { startRow?: unknown } | null)?.startRow;
    if (regions.length === 1 || typeof start !== 'string') {
      yield* (regions[0] as Region).scan(scan);
      return;
    }
    const stop = scan.stopRow;
    for (let i = start === '' ? 0 : this.#indexOf(start); i < regions.length; i++) {
      if (i > 0 && stop !== undefined && (this.#starts[i] as string) >= stop) return;
      yield* (regions[i] as Region).scan(scan);
    }
  }

  // ---- writes --------------------------------------------------------------------------

  put(put: Put, options?: CallOptions): Promise<void> {
    return this.#ofObject(put).put(put, options);
  }

  delete(del: Delete, options?: CallOptions): Promise<void> {
    return this.#ofObject(del).delete(del, options);
  }

  checkAndPut(
    row: BytesInput,
    family: string,
    qualifier: BytesInput,
    expected: BytesInput | null,
    put: Put,
    options?: CallOptions,
  ): Promise<boolean> {
    return this.#ofRow(row).checkAndPut(row, family, qualifier, expected, put, options);
  }

  checkAndDelete(
    row: BytesInput,
    family: string,
    qualifier: BytesInput,
    expected: BytesInput | null,
    del: Delete,
    options?: CallOptions,
  ): Promise<boolean> {
    return this.#ofRow(row).checkAndDelete(row, family, qualifier, expected, del, options);
  }

  increment(inc: Increment, options?: CallOptions): Promise<Result> {
    return this.#ofObject(inc).increment(inc, options);
  }

  mutateRow(mutations: RowMutations, options?: CallOptions): Promise<void> {
    return this.#ofObject(mutations).mutateRow(mutations, options);
  }

  /**
   * Atomic within one region only: rows in two regions are refused (`INVALID_ARGUMENT`), as
   * HBase refuses them, since no single log record could commit both.
   */
  async mutateRows(mutations: readonly (Put | Delete)[], options?: CallOptions): Promise<void> {
    const regions = this.#regions;
    if (regions.length === 1 || !Array.isArray(mutations) || mutations.length === 0)
      return (regions[0] as Region).mutateRows(mutations, options);
    // What is not a Put or Delete goes with the rest, for the region's own check to refuse.
    const rows = mutations.filter((m) => m instanceof Put || m instanceof Delete).map((m) => m.row);
    const first = rows[0] ?? '';
    const index = this.#indexOf(first);
    for (const key of rows) {
      if (this.#indexOf(key) !== index) {
        const [a, b] = [first, key].map((k) => toStringBinary(k));
        throw new InvalidArgumentError(
          `mutateRows is atomic within one region only: rows ${a} and ${b} are in different regions of this table`,
        );
      }
    }
    return (regions[index] as Region).mutateRows(mutations, options);
  }

  /** Each entry in its row's region; the statuses come back in the entries' order. */
  async batch(mutations: readonly (Put | Delete)[], options?: CallOptions): Promise<BatchStatus[]> {
    const regions = this.#regions;
    if (regions.length === 1 || !Array.isArray(mutations))
      return (regions[0] as Region).batch(mutations, options);
    checkCellCount(cellCount(mutations), 'A batch');
    const parts = new Map<number, { at: number[]; mutations: (Put | Delete)[] }>();
    mutations.forEach((m, at) => {
      const i = m instanceof Put || m instanceof Delete ? this.#indexOf(m.row) : 0;
      let part = parts.get(i);
      if (part === undefined) {
        part = { at: [], mutations: [] };
        parts.set(i, part);
      }
      part.at.push(at);
      part.mutations.push(m);
    });
    const out: BatchStatus[] = new Array(mutations.length);
    await Promise.all(
      [...parts].map(async ([i, part]) => {
        const statuses = await (regions[i] as Region).batch(part.mutations, options);
        statuses.forEach((s, k) => {
          out[part.at[k] as number] = s;
        });
      }),
    );
    return out;
  }

  // ---- lifecycle -----------------------------------------------------------------------

  flush(): Promise<void> {
    return Promise.all(this.#regions.map((r) => r.flush())).then(() => undefined);
  }

  /** Closes every region (their locks are lost with `LOCK_LOST`). */
  async close(): Promise<void> {
    await Promise.allSettled(this.#regions.map((r) => r.close()));
  }
}
