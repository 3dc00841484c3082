import { InternalError, InvalidArgumentError, NotServingRegionError } from '../core/errors.js';
import { toStringBinary } from '../rows/bytes.js';
import { Delete, type Increment, Put, type RowMutations } from '../rows/mutation.js';
import { cellCount } from '../rows/mutation-checks.js';
import { type Get, type Scan, scanBetween } from '../rows/query.js';
import {
  type CallOptions,
  type LockRowOptions,
  Region,
  type TryLockOptions,
} from '../rows/region.js';
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
  /** The region, when this server serves it (in a fleet, another server may). */
  readonly region: Region | undefined;
  /** In a fleet: the `host:port` of the server that serves it, `null` while nobody does. */
  readonly server?: string | null | undefined;
}

/** A region of the table that another server of the fleet serves (or nobody, for now). */
export class RegionElsewhere {
  constructor(
    readonly table: string,
    readonly startKey: string,
    readonly endKey: string,
    public server: string | null,
  ) {}

  refusal(): NotServingRegionError {
    const range = `[${toStringBinary(this.startKey)}, ${this.endKey === '' ? 'end' : toStringBinary(this.endKey)})`;
    return new NotServingRegionError(
      this.server === null
        ? `Region ${range} of table ${this.table} is not served by this server, and by no server of the fleet just now: try again shortly`
        : `Region ${range} of table ${this.table} is served by ${this.server}, not this server`,
    );
  }
}

type Slot = Region | RegionElsewhere;

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
 *
 * A live split ({@link split}, driven by the catalog) pauses the region it cuts: calls for its
 * rows that would write or lock wait until the split is done (gets and scans go on), and a call the
 * region refused with `NOT_SERVING_REGION` because the split came first (a wait for a row
 * lock there is failed so) is sent again to the row's region, with what is left of its wait.
 */
export class TableRegions {
  #starts: string[];
  #regions: Slot[];
  /** Throws while this server may not serve its regions (a fleet member unsure of its lease). */
  readonly #serving: () => void;
  /** The region a split is cutting, and the end of that split. */
  #paused: { region: Region; done: Promise<void> } | undefined;
  /** Counts the splits: a `NOT_SERVING_REGION` from before the last one is sent again. */
  #generation = 0;

  /**
   * `starts[0]` is `''`; the others ascend (a descriptor's `splits`). In a fleet, a region
   * another server serves is a {@link RegionElsewhere}, and `serving` is run before every call
   * to a region served here.
   */
  constructor(
    starts: readonly string[],
    regions: readonly Slot[],
    serving: () => void = () => undefined,
  ) {
    this.#starts = [...starts];
    this.#regions = [...regions];
    this.#serving = serving;
  }

  /** The region starting at `startKey`, served here from now on (a fleet member claimed it). */
  serve(startKey: string, region: Region): void {
    const i = this.#starts.indexOf(startKey);
    if (i < 0 || this.#regions[i] instanceof Region)
      throw new InternalError(`No region elsewhere starts at ${toStringBinary(startKey)}`);
    this.#regions[i] = region;
  }

  /**
   * The region starting at `startKey` is served elsewhere from now on (by `server`, or nobody
   * yet): calls for its rows are refused with `NOT_SERVING_REGION` at once. Returns the region
   * that was served here, for the caller to close.
   */
  serveElsewhere(table: string, startKey: string, server: string | null): Region | undefined {
    const i = this.#starts.indexOf(startKey);
    if (i < 0) throw new InternalError(`No region starts at ${toStringBinary(startKey)}`);
    const slot = this.#regions[i] as Slot;
    if (slot instanceof RegionElsewhere) {
      slot.server = server;
      return undefined;
    }
    this.#regions[i] = new RegionElsewhere(table, startKey, this.#starts[i + 1] ?? '', server);
    return slot;
  }

  /**
   * Another server of the fleet split the region holding `key` there: both parts are served
   * elsewhere from now on (the part's server is learnt at the next look). Returns the region
   * that was served here, for the caller to close (never, while the fleet's claims hold: only
   * a region's server splits it).
   */
  splitElsewhere(table: string, key: string): Region | undefined {
    const i = this.#indexOf(key);
    const starts = this.#starts;
    if (starts[i] === key) return undefined;
    const slot = this.#regions[i] as Slot;
    const server = slot instanceof RegionElsewhere ? slot.server : null;
    this.#starts = [...starts.slice(0, i + 1), key, ...starts.slice(i + 1)];
    this.#regions = [
      ...this.#regions.slice(0, i),
      new RegionElsewhere(table, starts[i] as string, key, server),
      new RegionElsewhere(table, key, starts[i + 1] ?? '', null),
      ...this.#regions.slice(i + 1),
    ];
    this.#generation++;
    return slot instanceof Region ? slot : undefined;
  }

  /** Whether the region starting at `startKey` is served here. */
  serves(startKey: string): boolean {
    return this.#regions[this.#starts.indexOf(startKey)] instanceof Region;
  }

  /** The refusal of a call for row `key` (latin1), whose region is served elsewhere. */
  refusalFor(key: string): NotServingRegionError | InternalError {
    const slot = this.#regions[this.#indexOf(key)];
    return slot instanceof RegionElsewhere
      ? slot.refusal()
      : new InternalError('The region of this row is served here');
  }

  /**
   * Cuts the region holding `key` in two (see `TableCatalog.split`), in two steps:
   *
   * 1. While the region serves on, `open` makes the new region (rows `[key, end)`) from the
   *    cells written up to a read point the region keeps pinned (nothing it could see is
   *    pruned meanwhile).
   * 2. The region pauses: its lock waits fail (their calls are sent again after the split),
   *    its writes settle, and the new region absorbs what was written after that read point;
   *    `commit` records the split. Then the old region gives up those rows and their locks to
   *    the new one, and routing changes, at once; the paused calls go on.
   *
   * If anything throws, nothing changes here (the caller closes the new region).
   */
  async split(
    key: string,
    open: (parent: Region, readPoint: number) => Promise<Region>,
    commit: (daughter: Region) => Promise<void>,
  ): Promise<{ parent: Region; daughter: Region }> {
    if (this.#paused !== undefined) {
      throw new InternalError('One split at a time (the catalog runs them one after the other)');
    }
    const index = this.#indexOf(key);
    const parent = this.#regions[index];
    if (!(parent instanceof Region)) throw parent?.refusal() ?? new InternalError('No region');
    const pin = parent.pinReadPoint();
    let resume = () => {};
    try {
      const daughter = await open(parent, pin.readPoint);
      const done = new Promise<void>((resolve) => {
        resume = resolve;
      });
      this.#paused = { region: parent, done };
      await parent.quiesce();
      await daughter.absorb(parent.cellsFrom(key, pin.readPoint));
      // The old region may have granted locks on these rows since the new one opened.
      daughter.raiseTokens(parent.tokenCeiling);
      await commit(daughter);
      // From here on nothing awaits: the rows, their locks and the routing change at once.
      for (const { lock, owner, renew } of parent.splitAt(key)) {
        daughter.adoptRowLock(lock, owner, renew);
      }
      this.#starts = [...this.#starts.slice(0, index + 1), key, ...this.#starts.slice(index + 1)];
      this.#regions = [
        ...this.#regions.slice(0, index + 1),
        daughter,
        ...this.#regions.slice(index + 1),
      ];
      this.#generation++;
      return { parent, daughter };
    } finally {
      this.#paused = undefined;
      resume();
      pin.release();
    }
  }

  get size(): number {
    return this.#regions.length;
  }

  /** The regions in key order with their ranges. */
  ranges(): RegionRange[] {
    return this.#regions.map((slot, i) => ({
      startKey: this.#starts[i] as string,
      endKey: this.#starts[i + 1] ?? '',
      region: slot instanceof Region ? slot : undefined,
      ...(slot instanceof Region ? {} : { server: slot.server }),
    }));
  }

  /** The regions served here. */
  #local(): Region[] {
    return this.#regions.filter((slot): slot is Region => slot instanceof Region);
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

  /**
   * The region of a row key in its latin1 form (the first region for anything else, which
   * refuses it); `NOT_SERVING_REGION` where another server serves it.
   */
  #of(key: unknown): Region {
    const regions = this.#regions;
    const slot =
      regions.length === 1 || typeof key !== 'string'
        ? (regions[0] as Slot)
        : (regions[this.#indexOf(key)] as Slot);
    if (!(slot instanceof Region)) throw slot.refusal();
    this.#serving();
    return slot;
  }

  /**
   * Runs `call` on the region of `key` (a row as the region keys it), after a split of that
   * region if one is under way; sends it again where a split made the region refuse it
   * (`NOT_SERVING_REGION`), with `options` whose `waitMs` is what is left of the first's.
   */
  #route<O extends { waitMs?: number | undefined } | undefined, T>(
    key: unknown,
    options: O,
    call: (region: Region, options: O) => Promise<T>,
    began = -1,
    retry: (since: number) => Promise<T> = (since) => this.#route(key, options, call, since),
  ): Promise<T> {
    let region: Region;
    try {
      region = this.#of(key);
    } catch (err) {
      return Promise.reject(err);
    }
    // When the call began: a call sent again waits only for what is left of its wait.
    const since = began < 0 ? performance.now() : began;
    const paused = this.#paused;
    if (paused !== undefined && paused.region === region) {
      return paused.done.then(() => retry(since));
    }
    const generation = this.#generation;
    const sent = began < 0 ? options : this.#rest(region, options, began);
    return call(region, sent).catch((err: unknown) => {
      if (!(err instanceof NotServingRegionError)) throw err;
      const again = this.#paused;
      if (again !== undefined) return again.done.then(() => retry(since));
      if (generation !== this.#generation) return retry(since);
      throw err;
    });
  }

  /** `options` with what is left of their wait since `began` (performance.now()). */
  #rest<O extends { waitMs?: number | undefined } | undefined>(
    region: Region,
    options: O,
    began: number,
  ): O {
    const waitMs = options?.waitMs ?? region.rowLockWaitMs;
    if (waitMs === Number.POSITIVE_INFINITY) return options;
    const left = Math.max(0, waitMs - (performance.now() - began));
    return { ...options, waitMs: left } as O;
  }

  // ---- locks ---------------------------------------------------------------------------

  lockRow(row: BytesInput, options?: LockRowOptions): Promise<RowLock> {
    try {
      return this.#route(checkRow(row), options, (region, o) => region.lockRow(row, o));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  tryLockRow(row: BytesInput, options?: TryLockOptions): Promise<RowLock | null> {
    try {
      const key = checkRow(row);
      // No wait to shorten: the options go as they are.
      return this.#route(key, undefined, (region) => region.tryLockRow(row, options));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  restoreRowLock(
    row: Buffer,
    recorded: { lockId: string; token: number; owner?: RowLockOwner | undefined; renew: boolean },
  ): RowLock {
    return this.#of(checkRow(row)).restoreRowLock(row, recorded);
  }

  /** Throws `NOT_SERVING_REGION` unless the region of `row` is served here. */
  checkServed(row: BytesInput): void {
    this.#of(checkRow(row));
  }

  /** See `Region.transferRowLock`; `NOT_SERVING_REGION` where its row's region is not served here. */
  transferRowLock(lock: RowLock, owner: RowLockOwner | undefined, renew: boolean): void {
    this.#of(lock.rowKey).transferRowLock(lock, owner, renew);
  }

  /** Releases a lock this table granted (its row names its region). */
  unlockRow(lock: RowLock): Promise<void> {
    try {
      return this.#of(lock.rowKey).unlockRow(lock);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  renewLease(lock: RowLock): Promise<void> {
    try {
      return this.#of(lock.rowKey).renewLease(lock);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Every region's waits (at most `limit` listed) and deadlocks, summed. */
  rowLockActivity(limit = 100): RowLockActivity {
    const local = this.#local();
    if (local.length === 1) return (local[0] as Region).rowLockActivity(limit);
    const waits: RowLockActivity['waits'][number][] = [];
    let waiting = 0;
    let deadlocks = 0;
    let lastDeadlock: RowLockActivity['lastDeadlock'];
    for (const region of local) {
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
    for (const region of this.#local()) n += region.rowLockWaiting(owner);
    return n;
  }

  get rowCount(): number {
    let n = 0;
    for (const region of this.#local()) n += region.rowCount;
    return n;
  }

  get cellCount(): number {
    let n = 0;
    for (const region of this.#local()) n += region.cellCount;
    return n;
  }

  // ---- reads ---------------------------------------------------------------------------

  /** Reads go on during a split: the region being split holds all its rows until it ends. */
  get(get: Get, options?: CallOptions): Promise<Result> {
    const generation = this.#generation;
    let region: Region;
    try {
      region = this.#of(rowOf(get));
    } catch (err) {
      return Promise.reject(err);
    }
    return region.get(get, options).catch((err: unknown) => {
      if (err instanceof NotServingRegionError && generation !== this.#generation)
        return this.get(get, options);
      throw err;
    });
  }

  /**
   * The scan's rows in key order, region after region (each at its own read point, as HBase's
   * scanners move from region to region). A region split while it is scanned hands over its
   * rows: the scan goes on in the new region from the first row it has not returned, so no row
   * is returned twice or skipped.
   */
  async *scan(scan: Scan): AsyncGenerator<Result, void, undefined> {
    const start = (scan as { startRow?: unknown } | null)?.startRow;
    if (typeof start !== 'string') {
      // Not a Scan: the region refuses it.
      yield* this.#of(undefined).scan(scan);
      return;
    }
    let from: string = start;
    const stop = scan.stopRow;
    for (;;) {
      const region = this.#of(from);
      let last: string | undefined;
      for await (const result of region.scan(
        from === scan.startRow ? scan : scanBetween(scan, from, stop),
      )) {
        last = result.row.toString('latin1');
        yield result;
      }
      // Its end now: earlier than when it began if a split cut it meanwhile.
      const end = region.range.endKey;
      if (end === '') return;
      const next = last !== undefined && last >= end ? `${last}\0` : end;
      if (stop !== undefined && next >= stop) return;
      from = next;
    }
  }

  // ---- writes --------------------------------------------------------------------------

  put(put: Put, options?: CallOptions): Promise<void> {
    return this.#route(rowOf(put), options, (region, o) => region.put(put, o));
  }

  delete(del: Delete, options?: CallOptions): Promise<void> {
    return this.#route(rowOf(del), options, (region, o) => region.delete(del, o));
  }

  checkAndPut(
    row: BytesInput,
    family: string,
    qualifier: BytesInput,
    expected: BytesInput | null,
    put: Put,
    options?: CallOptions,
  ): Promise<boolean> {
    try {
      return this.#route(checkRow(row), options, (region, o) =>
        region.checkAndPut(row, family, qualifier, expected, put, o),
      );
    } catch (err) {
      return Promise.reject(err);
    }
  }

  checkAndDelete(
    row: BytesInput,
    family: string,
    qualifier: BytesInput,
    expected: BytesInput | null,
    del: Delete,
    options?: CallOptions,
  ): Promise<boolean> {
    try {
      return this.#route(checkRow(row), options, (region, o) =>
        region.checkAndDelete(row, family, qualifier, expected, del, o),
      );
    } catch (err) {
      return Promise.reject(err);
    }
  }

  increment(inc: Increment, options?: CallOptions): Promise<Result> {
    return this.#route(rowOf(inc), options, (region, o) => region.increment(inc, o));
  }

  mutateRow(mutations: RowMutations, options?: CallOptions): Promise<void> {
    return this.#route(rowOf(mutations), options, (region, o) => region.mutateRow(mutations, o));
  }

  /**
   * Atomic within one region only: rows in two regions are refused (`INVALID_ARGUMENT`), as
   * HBase refuses them, since no single log record could commit both.
   */
  mutateRows(mutations: readonly (Put | Delete)[], options?: CallOptions): Promise<void> {
    try {
      return this.#mutateRows(mutations, options, -1);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  #mutateRows(
    mutations: readonly (Put | Delete)[],
    options: CallOptions | undefined,
    began: number,
  ): Promise<void> {
    // What is not a Put or Delete goes with the rest, for the region's own check to refuse.
    const rows = Array.isArray(mutations)
      ? mutations.filter((m) => m instanceof Put || m instanceof Delete).map((m) => m.row)
      : [];
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
    // Sent again as a whole: a split may have put its rows in two regions meanwhile.
    return this.#route(
      first,
      options,
      (region, o) => region.mutateRows(mutations, o),
      began,
      (since) => this.#mutateRows(mutations, options, since),
    );
  }

  /**
   * Each entry in its row's region; the statuses come back in the entries' order. An entry a
   * split made its region refuse is sent again to its row's region.
   */
  async batch(mutations: readonly (Put | Delete)[], options?: CallOptions): Promise<BatchStatus[]> {
    const regions = this.#regions;
    if (!Array.isArray(mutations)) return this.#of(undefined).batch(mutations, options);
    checkCellCount(cellCount(mutations), 'A batch');
    const began = performance.now();
    const rest = () => this.#rest(this.#of(undefined), options, began);
    const generation = this.#generation;
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
        const slot = regions[i] as Slot;
        if (!(slot instanceof Region)) {
          // Another server's rows: each entry refused, for the client to send there.
          part.at.forEach((at) => {
            out[at] = { ok: false, error: slot.refusal() };
          });
          return;
        }
        this.#serving();
        const region = slot;
        const paused = this.#paused;
        const statuses =
          paused !== undefined && paused.region === region
            ? await paused.done.then(() => this.batch(part.mutations, rest()))
            : await region.batch(part.mutations, options);
        statuses.forEach((s, k) => {
          out[part.at[k] as number] = s;
        });
      }),
    );
    const refused = out.flatMap((s, at) =>
      !s.ok && s.error instanceof NotServingRegionError ? [at] : [],
    );
    if (refused.length === 0 || (generation === this.#generation && this.#paused === undefined))
      return out;
    await this.#paused?.done;
    const again = await this.batch(
      refused.map((at) => mutations[at] as Put | Delete),
      rest(),
    );
    again.forEach((s, k) => {
      out[refused[k] as number] = s;
    });
    return out;
  }

  // ---- lifecycle -----------------------------------------------------------------------

  flush(): Promise<void> {
    return Promise.all(this.#local().map((r) => r.flush())).then(() => undefined);
  }

  /** Closes every region served here (their locks are lost with `LOCK_LOST`). */
  async close(): Promise<void> {
    await Promise.allSettled(this.#local().map((r) => r.close()));
  }
}

/** The row of a mutation or query (checked when it was made); anything else goes to the first region, which refuses it. */
function rowOf(object: unknown): unknown {
  return (object as { row?: unknown } | null)?.row;
}
