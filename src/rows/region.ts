import { EventEmitter } from 'node:events';
import type { Clock } from '../core/clock.js';
import {
  AlreadyClosedError,
  InvalidArgumentError,
  LockLostError,
  LocksmithError,
} from '../core/errors.js';
import { StaleTokenError } from '../core/fencing.js';
import { checkCallback, checkOptionsObject } from '../core/options.js';
import { withHandle } from '../core/with-lock.js';
import { toStringBinary } from './bytes.js';
import {
  type CallOptions,
  type CheckedCallOptions,
  checkCallOptions,
  checkOwner,
} from './call-options.js';
import type { Cell, CellType } from './cell.js';
import { decodeCells, type EncodableCell, encodeCells, forEachFamily } from './cell-codec.js';
import type { ColumnFamily } from './column-family.js';
import { type RegionTestHooks, rowsInternals } from './internals.js';
import { Memstore } from './memstore.js';
import { Delete, Increment, type Mutation, Put, RowMutations } from './mutation.js';
import { Mvcc } from './mvcc.js';
import { Get, type Query, Scan } from './query.js';
import {
  type CheckedRegionOptions,
  checkRegionOptions,
  type RegionOptions,
} from './region-options.js';
import { Result } from './result.js';
import {
  type BytesInput,
  checkFamilyName,
  checkQualifier,
  checkRow,
  checkValue,
} from './row-input.js';
import { markRowLockLost, markRowLockReleased, RowLock, type RowLockControl } from './row-lock.js';
import { type RowLockGrant, RowLockManager, type RowLockOwner } from './row-lock-manager.js';
import { TokenReservation } from './row-lock-tokens.js';
import { type Recovered, RowStorage } from './row-storage.js';

export type { CallOptions } from './call-options.js';
export type { RegionOptions } from './region-options.js';

type Draft = EncodableCell;
/** The outcome of one operation of {@link Region.batch}. */
export type BatchStatus = { ok: true } | { ok: false; error: unknown };

const EMPTY = Buffer.alloc(0);
const SNAPSHOT_RECORD_BYTES = 1 << 20;
const INSERT_CHUNK = 1024;
const GRANT_MEMORY = 100_000;

/**
 * One region of a table, as HBase's `HRegion`: rows of versioned cells in column families,
 * with implicit row locks around every mutation, explicit leased row locks, MVCC so reads
 * never wait and never see half a mutation, and a write-ahead log so an acknowledged write
 * survives `kill -9`.
 *
 * A mutation: row lock (the caller's explicit one, or an implicit one for its duration) →
 * timestamp → MVCC write number → cells into the memstore (invisible) → one log record,
 * group-committed → MVCC complete → wait until visible → release. The lock is held until the
 * write is visible, so a check-and-set on the row always reads the previous write.
 */
export interface RegionEvents {
  /** An explicit lock's lease ran out: the lock is gone and its id now fails. */
  'lock-expired': [RowLock];
}

export class Region extends EventEmitter<RegionEvents> implements AsyncDisposable {
  readonly #families: Map<string, ColumnFamily>;
  readonly #familyOrder: string[];
  readonly #memstore = new Memstore();
  readonly #mvcc: Mvcc;
  readonly #locks: RowLockManager;
  readonly #storage: RowStorage | undefined;
  readonly #tokens: TokenReservation | undefined;
  readonly #clock: Clock;
  readonly #onArrival: boolean;
  readonly #checkpointBytes: number;
  /** Newest server time given to each row (pruned once the clock has passed it). */
  readonly #lastTs = new Map<string, number>();
  /** Write numbers whose cells are in the memstore but whose log record is not yet queued. */
  readonly #inserting = new Set<number>();
  /** Read points of open scanners: pruning keeps what they can still see. */
  readonly #scanners = new Map<number, number>();
  readonly #inflight = new Set<Promise<unknown>>();
  /** Newest explicit grant per row, least recently granted first; bounded by GRANT_MEMORY. */
  readonly #grants = new Map<string, number>();
  #grantFloor = -1;
  #checkpoint: Promise<void> | undefined;
  #failure: unknown;
  #closing: Promise<void> | undefined;

  readonly [rowsInternals]: RegionTestHooks = { insertYield: undefined, readAll: false };

  /** What every RowLock handle of this region calls back into. */
  readonly #control: RowLockControl = {
    check: (lockId) => {
      this.#locks.checkLock(lockId);
    },
    releaseIfHeld: (lock) => {
      const locks = this.#locks;
      if (this.#closing === undefined && locks.isHeldId(lock.lockId)) locks.unlockRow(lock.lockId);
    },
  };

  private constructor(
    options: CheckedRegionOptions,
    storage: RowStorage | undefined,
    tokens: TokenReservation | undefined,
    mvcc: Mvcc,
    memstore: Memstore,
  ) {
    super();
    const { families, clock } = options;
    this.#families = families;
    this.#familyOrder = [...families.keys()].sort();
    this.#storage = storage;
    this.#tokens = tokens;
    this.#mvcc = mvcc;
    this.#clock = clock;
    this.#memstore = memstore;
    this.#onArrival = options.timestampOnArrival;
    this.#checkpointBytes = options.checkpointBytes;
    this.#locks = new RowLockManager({
      clock,
      leasePeriodMs: options.leasePeriodMs,
      rowLockWaitMs: options.rowLockWaitMs,
      ...(tokens === undefined
        ? {}
        : {
            firstToken: tokens.firstToken,
            tokenCeiling: tokens.ceiling,
            reserveTokens: (from: number) => tokens.reserve(from),
          }),
    });
    this.#locks.on('expired', (grant) => {
      const lock = grant.handle as RowLock;
      lock[markRowLockLost](
        new LockLostError(
          `Row lock lease expired: ${lock.resource} (lock ${lock.lockId}, not used or renewed for ${options.leasePeriodMs} ms)`,
          { code: 'LEASE_EXPIRED' },
        ),
      );
      this.emit('lock-expired', lock);
    });
  }

  /**
   * Opens (and recovers) or creates a region. Every option is checked first (unknown names
   * included), and the data in `dir` is checked against `families` before anything on disk
   * changes: a refused open (`INVALID_ARGUMENT`, or `LOCK_OBTAIN_FAILED` when the directory
   * is open elsewhere) leaves the directory byte for byte as it was.
   */
  static async open(options: RegionOptions): Promise<Region> {
    const checked = checkRegionOptions(options);
    const { families, dir, durability } = checked;
    const memstore = new Memstore();
    let seq = 0;
    let storage: RowStorage | undefined;
    let tokens: TokenReservation | undefined;
    if (dir !== undefined) {
      // Refuses a directory holding cells of a family this region does not declare.
      const accept = (recovered: Recovered) => {
        for (const record of recovered.snapshot) checkFamilies(record, families, dir);
        for (const record of recovered.log) checkFamilies(record, families, dir);
      };
      const opened = await RowStorage.open(dir, { durability }, accept);
      storage = opened.storage;
      try {
        const replay = (record: Uint8Array, each: boolean) => {
          const { cells } = decodeCells(record);
          if (!each) seq++;
          for (const cell of cells) {
            if (each) seq++;
            memstore.insert({ ...cell, seq });
          }
        };
        for (const record of opened.recovered.snapshot) replay(record, true);
        for (const record of opened.recovered.log) replay(record, false);
        memstore.compact((f) => families.get(f)?.maxVersions ?? 1, seq);
        tokens = await TokenReservation.open(storage.directory, checked.clock.wall());
      } catch (err) {
        await storage.close();
        throw err;
      }
    }
    return new Region(checked, storage, tokens, new Mvcc(seq), memstore);
  }

  /** Families in byte order. */
  get families(): readonly ColumnFamily[] {
    return this.#familyOrder.map((f) => this.#families.get(f) as ColumnFamily);
  }

  /** The MVCC read point: every write numbered at or below it is visible. */
  get readPoint(): number {
    return this.#mvcc.readPoint;
  }

  /** Cells and delete markers held in memory (what a checkpoint would write). */
  get cellCount(): number {
    return this.#memstore.cellCount;
  }

  /** How many rows hold at least one cell or delete marker. */
  get rowCount(): number {
    return this.#memstore.rowCount;
  }

  // ---- explicit row locks -------------------------------------------------------------

  /**
   * Locks `row` until `unlockRow`, the handle's `close()`, or lease expiry; waits for other
   * holders (FIFO). The {@link RowLock} is a lock handle: its `signal` aborts by itself when
   * the lease runs out (`LEASE_EXPIRED`).
   */
  async lockRow(row: BytesInput, options?: CallOptions): Promise<RowLock> {
    const key = checkRow(row);
    const checked = checkCallOptions(options, 'lockRow');
    this.#checkOpen();
    return this.#granted(await this.#locks.lockRow(key, checked));
  }

  /** Locks `row` if nobody holds it or waits for it; null otherwise. Never waits. */
  tryLockRow(row: BytesInput, owner?: RowLockOwner): RowLock | null {
    const key = checkRow(row);
    if (owner !== undefined) checkOwner(owner, 'tryLockRow owner');
    this.#checkOpen();
    const grant = this.#locks.tryLockRow(key, owner);
    return grant === null ? null : this.#granted(grant);
  }

  /**
   * Locks `row`, runs `fn` with the lock, and unlocks on every exit path (core's
   * `withHandle`): resolves with `fn`'s result only if the lock was not lost meanwhile;
   * otherwise rejects with the `LockLostError` (`LEASE_EXPIRED`), since the work may have
   * overlapped another holder. Pass `lock.signal` to the work and `lock` (or `lock.token`) to
   * the mutations; a use renews the lease.
   */
  async withRowLock<T>(
    row: BytesInput,
    fn: (lock: RowLock) => T | PromiseLike<T>,
    options?: CallOptions,
  ): Promise<T> {
    const key = checkRow(row);
    checkCallback(fn, 'withRowLock fn');
    if (fn === undefined) throw new InvalidArgumentError('withRowLock needs a function');
    const checked = checkCallOptions(options, 'withRowLock');
    this.#checkOpen();
    return withHandle(this.#granted(await this.#locks.lockRow(key, checked)), fn);
  }

  /** Releases an explicit lock; `UNKNOWN_ROW_LOCK` if it is not held (released, expired). */
  unlockRow(lock: RowLock | { readonly lockId: string } | string): void {
    const id = lockIdOf(lock);
    const grant = this.#locks.unlockRow(id);
    (grant.handle as RowLock | undefined)?.[markRowLockReleased]();
  }

  /** Renews a lock's lease without an operation. */
  renewLease(lock: RowLock | { readonly lockId: string } | string): void {
    this.#locks.renewLease(lockIdOf(lock));
  }

  // ---- reads -----------------------------------------------------------------------------

  /** Reads one row. Never waits for row locks; a lock id on the Get is checked and renewed. */
  async get(get: Get): Promise<Result> {
    this.#checkOpen(true);
    if (!(get instanceof Get)) throw new InvalidArgumentError('get() takes a Get');
    this.#checkQuery(get);
    if (get.rowLock !== undefined) this.#locks.useLock(lockIdOf(get.rowLock), get.row);
    return new Result(
      get.row,
      this.#memstore.read(get.row, get, this.#readPointNow(), this.#familyOrder),
    );
  }

  /**
   * Rows of `[startRow, stopRow)` in byte order. The scan reads as of the moment it opens
   * (plus nothing later: each row is one consistent state). Close it early by breaking out of
   * the loop.
   */
  async *scan(scan: Scan): AsyncGenerator<Result, void, undefined> {
    this.#checkOpen(true);
    if (!(scan instanceof Scan)) throw new InvalidArgumentError('scan() takes a Scan');
    this.#checkQuery(scan);
    const readPoint = this.#readPointNow();
    this.#scanners.set(readPoint, (this.#scanners.get(readPoint) ?? 0) + 1);
    try {
      let key: string | undefined;
      for (;;) {
        key = this.#memstore.nextRow(scan.startRow, key, scan.stopRow);
        if (key === undefined) return;
        const cells = this.#memstore.read(
          key,
          scan,
          this[rowsInternals].readAll ? Number.MAX_SAFE_INTEGER : readPoint,
          this.#familyOrder,
        );
        if (cells.length > 0) yield new Result(key, cells);
      }
    } finally {
      const left = (this.#scanners.get(readPoint) ?? 1) - 1;
      if (left === 0) this.#scanners.delete(readPoint);
      else this.#scanners.set(readPoint, left);
    }
  }

  // ---- mutations -------------------------------------------------------------------------

  async put(put: Put, options?: CallOptions): Promise<void> {
    if (!(put instanceof Put)) throw new InvalidArgumentError('put() takes a Put');
    const checked = checkCallOptions(options, 'put');
    this.#checkPut(put);
    await this.#mutate(put.row, put.rowLock, put.token, checked, (now) => ({
      cells: this.#putCells(put, now),
      result: undefined,
    }));
  }

  async delete(del: Delete, options?: CallOptions): Promise<void> {
    if (!(del instanceof Delete)) throw new InvalidArgumentError('delete() takes a Delete');
    const checked = checkCallOptions(options, 'delete');
    this.#checkDelete(del);
    await this.#mutate(del.row, del.rowLock, del.token, checked, (now) => ({
      cells: this.#deleteCells(del, now),
      result: undefined,
    }));
  }

  /**
   * Applies `put` if `family:qualifier` of `row` currently holds `expected`; null or empty
   * `expected` means the cell must be absent. Atomic: both happen under the row lock.
   */
  checkAndPut(
    row: BytesInput,
    family: string,
    qualifier: BytesInput,
    expected: BytesInput | null,
    put: Put,
    options?: CallOptions,
  ): Promise<boolean> {
    if (!(put instanceof Put)) throw new InvalidArgumentError('checkAndPut() takes a Put');
    const checked = checkCallOptions(options, 'checkAndPut');
    this.#checkPut(put);
    return this.#checkAndMutate(row, family, qualifier, expected, put, checked, (now) =>
      this.#putCells(put, now),
    );
  }

  /** Applies `del` if `family:qualifier` currently holds `expected` (null: absent). */
  checkAndDelete(
    row: BytesInput,
    family: string,
    qualifier: BytesInput,
    expected: BytesInput | null,
    del: Delete,
    options?: CallOptions,
  ): Promise<boolean> {
    if (!(del instanceof Delete)) throw new InvalidArgumentError('checkAndDelete() takes a Delete');
    const checked = checkCallOptions(options, 'checkAndDelete');
    this.#checkDelete(del);
    return this.#checkAndMutate(row, family, qualifier, expected, del, checked, (now) =>
      this.#deleteCells(del, now),
    );
  }

  /**
   * Adds to 64-bit counters of one row atomically; returns their new values. On a row the
   * caller has locked, pass the lock in the Increment: it runs under it instead of waiting for
   * it (HBase 0.90 deadlocked itself here until the lease ran out).
   */
  async increment(inc: Increment, options?: CallOptions): Promise<Result> {
    if (!(inc instanceof Increment))
      throw new InvalidArgumentError('increment() takes an Increment');
    const checked = checkCallOptions(options, 'increment');
    if (inc.columns.length === 0)
      throw new InvalidArgumentError('An Increment needs at least one column');
    for (const c of inc.columns) this.#checkFamily(c.family);
    return this.#mutate(inc.row, inc.rowLock, inc.token, checked, (now) => {
      const cells: Draft[] = [];
      const readPoint = this.#mvcc.readPoint;
      for (const { family, qualifier, amount } of inc.columns) {
        const current =
          cells.find((c) => c.family === family && c.qualifier === qualifier)?.value ??
          this.#memstore.latest(inc.row, family, qualifier, readPoint)?.value;
        let value = 0n;
        if (current !== undefined) {
          if (current.length !== 8) {
            throw new InvalidArgumentError(
              `Attempted to increment field ${family}:${toStringBinary(qualifier)} that isn't 64 bits wide (${current.length} bytes)`,
            );
          }
          value = current.readBigInt64BE(0);
        }
        const next = Buffer.allocUnsafe(8);
        next.writeBigInt64BE(BigInt.asIntN(64, value + amount));
        const draft: Draft = {
          row: inc.row,
          family,
          qualifier,
          timestamp: now,
          type: 'Put',
          value: next,
        };
        const at = cells.findIndex((c) => c.family === family && c.qualifier === qualifier);
        if (at >= 0) cells[at] = draft;
        else cells.push(draft);
      }
      // The write number is internal; a result's cells carry 0.
      return {
        cells,
        result: new Result(
          inc.row,
          cells.map((c) => ({ ...c, seq: 0 })),
        ),
      };
    });
  }

  /** Adds `amount` to one counter; returns its new value. */
  async incrementColumnValue(
    row: BytesInput,
    family: string,
    qualifier: BytesInput,
    amount: bigint | number,
    options?: CallOptions & { rowLock?: RowLock | undefined },
  ): Promise<bigint> {
    const { rowLock, ...rest } = checkOptionsObject(options, 'incrementColumnValue options');
    const inc = new Increment(row, rowLock === undefined ? {} : { rowLock });
    inc.addColumn(family, qualifier, amount);
    const result = await this.increment(inc, rest);
    return (result.cells[0] as Cell).value.readBigInt64BE(0);
  }

  /** Puts and deletes on one row, applied atomically and in order. */
  async mutateRow(mutations: RowMutations, options?: CallOptions): Promise<void> {
    if (!(mutations instanceof RowMutations))
      throw new InvalidArgumentError('mutateRow() takes RowMutations');
    const checked = checkCallOptions(options, 'mutateRow');
    if (mutations.mutations.length === 0) throw new InvalidArgumentError('RowMutations is empty');
    let rowLock: RowLock | undefined;
    let token: number | undefined;
    for (const m of mutations.mutations) {
      if (m instanceof Put) this.#checkPut(m);
      else this.#checkDelete(m);
      if (m.rowLock !== undefined) {
        if (rowLock !== undefined && rowLock.lockId !== m.rowLock.lockId) {
          throw new InvalidArgumentError(
            'The mutations of one RowMutations carry different row locks',
          );
        }
        rowLock = m.rowLock;
      }
      if (m.token !== undefined) token = Math.max(token ?? m.token, m.token);
    }
    await this.#mutate(mutations.row, rowLock, token, checked, (now) => ({
      cells: mutations.mutations.flatMap((m) =>
        m instanceof Put ? this.#putCells(m, now) : this.#deleteCells(m, now),
      ),
      result: undefined,
    }));
  }

  /**
   * Puts and deletes on several rows, applied atomically as one write (HBase's
   * `mutateRowsWithLocks`): the rows' locks are taken in byte order, so two such calls can never
   * deadlock each other, then every cell gets one MVCC write number and one log record. Explicit
   * row locks are not accepted here (their rows would be taken out of order).
   */
  async mutateRows(mutations: readonly (Put | Delete)[], options?: CallOptions): Promise<void> {
    const checked = checkCallOptions(options, 'mutateRows');
    this.#checkOpen();
    if (!Array.isArray(mutations) || mutations.length === 0) {
      throw new InvalidArgumentError('mutateRows() takes a non-empty array of Put and Delete');
    }
    for (const m of mutations) {
      if (m instanceof Put) this.#checkPut(m);
      else if (m instanceof Delete) this.#checkDelete(m);
      else throw new InvalidArgumentError('mutateRows() takes Put and Delete objects');
      if (m.rowLock !== undefined) {
        throw new InvalidArgumentError('mutateRows() takes its own locks; drop the rowLock');
      }
    }
    const rows = [...new Set(mutations.map((m) => m.row))];
    for (const m of mutations) this.#checkToken(m.row, m.token);
    const grants = await this.#locks.acquireImplicitMany(rows, checked);
    return this.#track(async () => {
      try {
        // An explicit grant may have come while we waited.
        for (const m of mutations) this.#checkToken(m.row, m.token);
        const cells = mutations.flatMap((m) => {
          const now = this.#timeFor(m.row);
          return m instanceof Put ? this.#putCells(m, now) : this.#deleteCells(m, now);
        });
        if (cells.length > 0) await this.#apply(cells);
      } finally {
        for (const grant of grants) this.#locks.releaseImplicit(grant);
      }
    });
  }

  /**
   * Runs independent puts and deletes and reports each one's outcome instead of failing the
   * lot (HBase's batch with a status per operation): a bad family fails only its own entry.
   * They run concurrently; group commit gives them shared log syncs. Not atomic as a whole.
   */
  async batch(mutations: readonly (Put | Delete)[], options?: CallOptions): Promise<BatchStatus[]> {
    // Checked once for the whole batch: a bad option refuses the call, not each entry.
    const checked = checkCallOptions(options, 'batch');
    this.#checkOpen();
    if (!Array.isArray(mutations))
      throw new InvalidArgumentError('batch() takes an array of Put and Delete');
    const settled = await Promise.allSettled(
      mutations.map((m) => {
        if (m instanceof Put) return this.put(m, checked);
        if (m instanceof Delete) return this.delete(m, checked);
        return Promise.reject(new InvalidArgumentError('batch() takes Put and Delete objects'));
      }),
    );
    return settled.map((s) =>
      s.status === 'fulfilled' ? { ok: true } : { ok: false, error: s.reason },
    );
  }

  // ---- lifecycle -------------------------------------------------------------------------

  /**
   * Checkpoint: writes a snapshot of the live cells and drops the log before it, compacting
   * as HBase's major compaction does (hidden versions and delete markers go).
   */
  flush(): Promise<void> {
    this.#checkOpen();
    return this.#runCheckpoint();
  }

  /** Waits for writes in flight, fails lock waiters, and closes the storage. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      await Promise.allSettled([...this.#inflight]);
      if (this.#checkpoint !== undefined) await this.#checkpoint.catch(() => undefined);
      // Locks still held end with the region: their holders learn it from their signal.
      for (const grant of this.#locks.close()) {
        const lock = grant.handle as RowLock | undefined;
        lock?.[markRowLockLost](
          new LockLostError(
            `Row lock lost: the region closed while it was held (${lock.resource})`,
            {
              code: 'LOCK_LOST',
            },
          ),
        );
      }
      this.#tokens?.close();
      await this.#storage?.close();
    })();
    return this.#closing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  // ---- internals -------------------------------------------------------------------------

  /** Reads go on after a storage failure (what they see is durable); writes stop. */
  #checkOpen(reading = false): void {
    if (this.#closing !== undefined) throw new AlreadyClosedError('This region is closed');
    if (!reading && this.#failure !== undefined) {
      throw new LocksmithError('IO_ERROR', 'This region stopped writing after a storage failure', {
        cause: this.#failure,
      });
    }
  }

  #checkFamily(family: string): void {
    if (!this.#families.has(family)) {
      throw new InvalidArgumentError(
        `Column family ${family} does not exist in this region (it has ${this.#familyOrder.join(', ')})`,
      );
    }
  }

  #checkQuery(query: Query): void {
    for (const family of query.columns.keys()) this.#checkFamily(family);
  }

  #checkPut(put: Put): void {
    if (put.cells.length === 0) throw new InvalidArgumentError('A Put needs at least one cell');
    for (const cell of put.cells) this.#checkFamily(cell.family);
  }

  #checkDelete(del: Delete): void {
    for (const entry of del.entries) this.#checkFamily(entry.family);
  }

  #readPointNow(): number {
    return this[rowsInternals].readAll ? Number.MAX_SAFE_INTEGER : this.#mvcc.readPoint;
  }

  #oldestReadPoint(): number {
    let oldest = this.#mvcc.readPoint;
    for (const readPoint of this.#scanners.keys()) if (readPoint < oldest) oldest = readPoint;
    return oldest;
  }

  /** The server time for a mutation of `row`: never behind the previous one given to it. */
  #timeFor(row: string): number {
    const now = Math.floor(this.#clock.wall());
    const last = this.#lastTs.get(row);
    const ts = last === undefined || now > last ? now : last + 1;
    this.#lastTs.set(row, ts);
    if (this.#lastTs.size > 65536) {
      // Entries the clock has passed no longer constrain anything.
      for (const [key, value] of this.#lastTs) if (value < now) this.#lastTs.delete(key);
    }
    return ts;
  }

  #putCells(put: Put, now: number): Draft[] {
    return put.cells.map((c) => ({
      row: put.row,
      family: c.family,
      qualifier: c.qualifier,
      timestamp: c.timestamp ?? now,
      type: 'Put' as const,
      value: c.value,
    }));
  }

  #deleteCells(del: Delete, now: number): Draft[] {
    const marker = (
      type: CellType,
      family: string,
      qualifier: string,
      timestamp: number,
    ): Draft => ({
      row: del.row,
      family,
      qualifier,
      timestamp,
      type,
      value: EMPTY,
    });
    if (del.entries.length === 0) {
      return this.#familyOrder.map((f) => marker('DeleteFamily', f, '', del.timestamp ?? now));
    }
    return del.entries.map((e) => {
      if (e.type !== 'Delete' || e.timestamp !== undefined) {
        return marker(e.type, e.family, e.qualifier, e.timestamp ?? now);
      }
      // HBase: a version delete without a timestamp hides the newest version (or "now").
      const latest = this.#memstore.latest(del.row, e.family, e.qualifier, this.#mvcc.readPoint);
      return marker('Delete', e.family, e.qualifier, latest?.timestamp ?? now);
    });
  }

  async #checkAndMutate(
    row: BytesInput,
    family: string,
    qualifier: BytesInput,
    expected: BytesInput | null,
    mutation: Mutation,
    options: CheckedCallOptions,
    cells: (now: number) => Draft[],
  ): Promise<boolean> {
    const key = checkRow(row);
    this.#checkFamily(checkFamilyName(family));
    const q = checkQualifier(qualifier);
    const want = expected === null || expected === undefined ? EMPTY : checkValue(expected);
    if (mutation.row !== key) {
      throw new InvalidArgumentError("Action's row must match the passed row");
    }
    return this.#mutate(key, mutation.rowLock, mutation.token, options, (now) => {
      const current = this.#memstore.latest(key, family, q, this.#mvcc.readPoint);
      // HBase: an empty expectation matches only a missing cell; otherwise bytes must be equal.
      const matches =
        want.length === 0 ? current === undefined : current?.value.equals(want) === true;
      return { cells: matches ? cells(now) : [], result: matches };
    });
  }

  /**
   * Runs one mutation of `row`: takes the lock (or checks the caller's), lets `build` turn it
   * into cells under the lock, and applies them. `build` may throw to refuse (nothing is
   * written then) and returns what the caller gets back.
   */
  async #mutate<T>(
    row: string,
    rowLock: RowLock | undefined,
    token: number | undefined,
    options: CheckedCallOptions,
    build: (now: number) => { cells: Draft[]; result: T },
  ): Promise<T> {
    this.#checkOpen();
    const arrival = this.#onArrival ? this.#timeFor(row) : undefined;
    // Checked before any wait, so a stale writer fails at once...
    this.#checkToken(row, token);
    let implicit: RowLockGrant | undefined;
    if (rowLock !== undefined) {
      this.#locks.useLock(lockIdOf(rowLock), row);
    } else {
      implicit =
        this.#locks.tryAcquireImplicit(row, options.owner) ??
        (await this.#locks.acquireImplicit(row, options));
    }
    return this.#track(async () => {
      try {
        // ...and again under the lock: an explicit grant may have come while we waited.
        if (implicit !== undefined) this.#checkToken(row, token);
        const { cells, result } = build(arrival ?? this.#timeFor(row));
        if (cells.length > 0) await this.#apply(cells);
        return result;
      } finally {
        if (implicit !== undefined) this.#locks.releaseImplicit(implicit);
      }
    });
  }

  /** Runs a write that holds its row locks, so that `close()` can wait for it. */
  async #track<T>(write: () => Promise<T>): Promise<T> {
    const work = write();
    this.#inflight.add(work);
    try {
      return await work;
    } finally {
      this.#inflight.delete(work);
    }
  }

  /** Remembers an explicit grant's token as the row's newest (see {@link #newestGrant}). */
  #granted(grant: RowLockGrant): RowLock {
    this.#grants.delete(grant.row);
    this.#grants.set(grant.row, grant.token);
    if (this.#grants.size > GRANT_MEMORY) {
      // Forget the least recently granted row, raising the floor to its token: tokens rise
      // across all rows, so the floor can only reject too much (a stale-looking token on a
      // forgotten row), never admit a token older than a row's real newest grant.
      const [oldRow, oldToken] = this.#grants.entries().next().value as [string, number];
      this.#grants.delete(oldRow);
      if (oldToken > this.#grantFloor) this.#grantFloor = oldToken;
    }
    const lock = new RowLock(grant.row, grant.lockId as string, grant.token, this.#control);
    grant.handle = lock;
    return lock;
  }

  /** The newest token granted for `row` by an explicit lock, or the floor if forgotten. */
  #newestGrant(row: string): number {
    return this.#grants.get(row) ?? this.#grantFloor;
  }

  /**
   * Rejects a mutation whose fencing token is older than the row's newest explicit grant (a
   * valid explicit lock is that grant, so its holder's token passes).
   */
  #checkToken(row: string, token: number | undefined): void {
    if (token === undefined) return;
    const newest = this.#newestGrant(row);
    if (token < newest) {
      throw new StaleTokenError(
        `Fencing token ${token} for row ${toStringBinary(row)} is older than ${newest}: the row was locked by someone else since`,
      );
    }
  }

  async #apply(drafts: Draft[]): Promise<void> {
    const seq = this.#mvcc.begin();
    const cells: Cell[] = drafts.map((d) => ({ ...d, seq }));
    this.#inserting.add(seq);
    let durable: Promise<void> | undefined;
    try {
      const hook = this[rowsInternals].insertYield;
      for (let i = 0; i < cells.length; i++) {
        this.#memstore.insert(cells[i] as Cell);
        if (hook !== undefined) await hook(i);
        else if ((i + 1) % INSERT_CHUNK === 0) await new Promise((r) => setImmediate(r));
      }
      if (this.#storage !== undefined)
        durable = this.#storage.append(encodeCells('mutation', drafts));
    } catch (err) {
      this.#memstore.remove(cells);
      this.#mvcc.complete(seq);
      throw err;
    } finally {
      this.#inserting.delete(seq);
    }
    if (durable !== undefined) {
      try {
        await durable;
      } catch (err) {
        // Not acknowledged, so not applied; later writes cannot be made durable either.
        this.#failure ??= err;
        this.#memstore.remove(cells);
        this.#mvcc.complete(seq);
        throw err;
      }
    }
    this.#mvcc.complete(seq);
    await this.#mvcc.waitVisible(seq);
    const oldest = this.#oldestReadPoint();
    for (const c of cells) {
      if (c.type !== 'DeleteFamily') {
        this.#memstore.trimColumn(
          c.row,
          c.family,
          c.qualifier,
          (this.#families.get(c.family) as ColumnFamily).maxVersions,
          oldest,
        );
      }
    }
    if (
      this.#storage !== undefined &&
      this.#storage.logBytes > this.#checkpointBytes &&
      this.#checkpoint === undefined
    ) {
      this.#runCheckpoint().catch((err: unknown) => {
        this.#failure ??= err;
      });
    }
  }

  #runCheckpoint(): Promise<void> {
    if (this.#checkpoint !== undefined) return this.#checkpoint;
    const storage = this.#storage;
    if (storage === undefined) {
      this.#memstore.compact((f) => this.#maxVersions(f), this.#oldestReadPoint());
      return Promise.resolve();
    }
    const checkpoint = storage
      .checkpoint(() => this.#capture())
      .finally(() => {
        this.#checkpoint = undefined;
      });
    this.#checkpoint = checkpoint;
    return checkpoint;
  }

  #maxVersions(family: string): number {
    return this.#families.get(family)?.maxVersions ?? 1;
  }

  /** The snapshot records: every cell whose mutation's log record is already queued. */
  #capture(): Uint8Array[] {
    this.#memstore.compact((f) => this.#maxVersions(f), this.#oldestReadPoint());
    const records: Uint8Array[] = [];
    let batch: Draft[] = [];
    let bytes = 0;
    for (const cell of this.#memstore.cells()) {
      if (this.#inserting.has(cell.seq)) continue;
      batch.push(cell);
      bytes += 32 + cell.row.length + cell.qualifier.length + cell.value.length;
      if (bytes >= SNAPSHOT_RECORD_BYTES) {
        records.push(encodeCells('snapshot', batch));
        batch = [];
        bytes = 0;
      }
    }
    if (batch.length > 0) records.push(encodeCells('snapshot', batch));
    return records;
  }
}

function lockIdOf(lock: { readonly lockId: string } | string): string {
  if (typeof lock === 'string') return lock;
  if (typeof lock === 'object' && lock !== null && typeof lock.lockId === 'string')
    return lock.lockId;
  throw new InvalidArgumentError('Expected a RowLock returned by lockRow() or its lockId');
}

/** Refuses a stored record holding cells of a family `families` does not declare. */
function checkFamilies(record: Uint8Array, families: Map<string, ColumnFamily>, dir: string): void {
  forEachFamily(record, (family) => {
    if (!families.has(family)) {
      throw new InvalidArgumentError(
        `${dir} holds cells of column family ${family}, which this region does not declare`,
      );
    }
  });
}
