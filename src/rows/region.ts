import { EventEmitter } from 'node:events';
import {
  AlreadyClosedError,
  InvalidArgumentError,
  LockLostError,
  LocksmithError,
} from '../core/errors.js';
import { checkCallback, checkOptionsObject } from '../core/options.js';
import { withHandle } from '../core/with-lock.js';
import {
  type CallOptions,
  type CheckedCallOptions,
  checkCallOptions,
  checkOwner,
} from './call-options.js';
import type { Cell } from './cell.js';
import { CheckpointScheduler } from './checkpoint-scheduler.js';
import type { ColumnFamily } from './column-family.js';
import { FamilySchema } from './family-schema.js';
import { RegionTestHooks, rowsInternals } from './internals.js';
import type { Memstore } from './memstore.js';
import { Delete, Increment, type Mutation, Put, RowMutations } from './mutation.js';
import {
  type Draft,
  deleteCells,
  expectationHolds,
  incrementCells,
  type LatestCell,
  putCells,
} from './mutation-cells.js';
import { Mvcc } from './mvcc.js';
import { Get, Scan } from './query.js';
import {
  type CheckedRegionOptions,
  checkRegionOptions,
  type RegionOptions,
} from './region-options.js';
import { type RegionRecovery, recoverRegion } from './region-recovery.js';
import { Result } from './result.js';
import { RowFencing } from './row-fencing.js';
import {
  type BytesInput,
  checkFamilyName,
  checkQualifier,
  checkRow,
  checkValue,
} from './row-input.js';
import { markRowLockLost, markRowLockReleased, RowLock, type RowLockControl } from './row-lock.js';
import { type RowLockGrant, RowLockManager, type RowLockOwner } from './row-lock-manager.js';
import type { TokenReservation } from './row-lock-tokens.js';
import type { RowStorage } from './row-storage.js';
import { ScannerReadPoints } from './scanner-read-points.js';
import { TimestampAllocator } from './timestamp-allocator.js';
import { paceInserts, WritePath } from './write-path.js';

export type { CallOptions } from './call-options.js';
export type { RegionOptions } from './region-options.js';

/** The outcome of one operation of {@link Region.batch}. */
export type BatchStatus = { ok: true } | { ok: false; error: unknown };

const EMPTY = Buffer.alloc(0);

export interface RegionEvents {
  /** An explicit lock's lease ran out: the lock is gone and its id now fails. */
  'lock-expired': [RowLock];
}

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
 *
 * The region is a façade: recovery is `recoverRegion`, fencing `RowFencing`, server times
 * `TimestampAllocator`, the write path `WritePath`, checkpoints `CheckpointScheduler`.
 */
export class Region extends EventEmitter<RegionEvents> implements AsyncDisposable {
  readonly #schema: FamilySchema;
  readonly #memstore: Memstore;
  readonly #mvcc: Mvcc;
  readonly #locks: RowLockManager;
  readonly #storage: RowStorage | undefined;
  readonly #tokens: TokenReservation | undefined;
  readonly #fencing = new RowFencing();
  readonly #times: TimestampAllocator;
  readonly #scanners = new ScannerReadPoints();
  readonly #writes: WritePath;
  readonly #checkpoints: CheckpointScheduler;
  readonly #onArrival: boolean;
  /** Writes holding row locks, which `close()` waits for. */
  readonly #inflight = new Set<Promise<unknown>>();
  #closing: Promise<void> | undefined;
  /** The read point a new read takes (the MVCC read point, unless a test swaps it). */
  #readPoint: () => number;
  /** The newest visible cell of a column, for mutations built under the row lock. */
  readonly #latest: LatestCell;

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

  private constructor(options: CheckedRegionOptions, recovery: RegionRecovery) {
    super();
    const { clock } = options;
    const { memstore, storage, tokens } = recovery;
    const mvcc = new Mvcc(recovery.seq);
    const schema = new FamilySchema(options.families);
    const oldestReadPoint = () => this.#scanners.oldest(mvcc.readPoint);
    this.#schema = schema;
    this.#memstore = memstore;
    this.#mvcc = mvcc;
    this.#storage = storage;
    this.#tokens = tokens;
    this.#times = new TimestampAllocator(clock);
    this.#onArrival = options.timestampOnArrival;
    this.#readPoint = () => mvcc.readPoint;
    this.#latest = (row, family, qualifier) =>
      memstore.latest(row, family, qualifier, mvcc.readPoint);
    const writes = new WritePath(memstore, mvcc, storage, schema, oldestReadPoint);
    this.#writes = writes;
    this.#checkpoints = new CheckpointScheduler(
      {
        memstore,
        storage,
        maxVersions: (f) => schema.maxVersions(f),
        oldestReadPoint,
        pending: writes.pending,
      },
      options.checkpointBytes,
      (err) => writes.fail(err),
    );
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
    return new Region(checked, await recoverRegion(checked));
  }

  /** Test hooks (see internals.ts); not part of the public API. */
  get [rowsInternals](): RegionTestHooks {
    return new RegionTestHooks({
      setInsertPace: (pace) => {
        this.#writes.pace = pace ?? paceInserts;
      },
      setReadPoint: (readPoint) => {
        this.#readPoint = readPoint ?? (() => this.#mvcc.readPoint);
      },
    });
  }

  /** Families in byte order. */
  get families(): readonly ColumnFamily[] {
    return this.#schema.families;
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
    this.#schema.checkQuery(get);
    if (get.rowLock !== undefined) this.#locks.useLock(lockIdOf(get.rowLock), get.row);
    return new Result(
      get.row,
      this.#memstore.read(get.row, get, this.#readPoint(), this.#schema.order),
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
    this.#schema.checkQuery(scan);
    const readPoint = this.#readPoint();
    this.#scanners.open(readPoint);
    try {
      let key: string | undefined;
      for (;;) {
        key = this.#memstore.nextRow(scan.startRow, key, scan.stopRow);
        if (key === undefined) return;
        const cells = this.#memstore.read(key, scan, readPoint, this.#schema.order);
        if (cells.length > 0) yield new Result(key, cells);
      }
    } finally {
      this.#scanners.close(readPoint);
    }
  }

  // ---- mutations -------------------------------------------------------------------------

  async put(put: Put, options?: CallOptions): Promise<void> {
    if (!(put instanceof Put)) throw new InvalidArgumentError('put() takes a Put');
    const checked = checkCallOptions(options, 'put');
    this.#schema.checkPut(put);
    await this.#mutate(put.row, put.rowLock, put.token, checked, (now) => ({
      cells: putCells(put, now),
      result: undefined,
    }));
  }

  async delete(del: Delete, options?: CallOptions): Promise<void> {
    if (!(del instanceof Delete)) throw new InvalidArgumentError('delete() takes a Delete');
    const checked = checkCallOptions(options, 'delete');
    this.#schema.checkDelete(del);
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
    this.#schema.checkPut(put);
    return this.#checkAndMutate(row, family, qualifier, expected, put, checked, (now) =>
      putCells(put, now),
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
    this.#schema.checkDelete(del);
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
    for (const c of inc.columns) this.#schema.check(c.family);
    return this.#mutate(inc.row, inc.rowLock, inc.token, checked, (now) => {
      const cells = incrementCells(inc, now, this.#latest);
      // The write number is internal; a result's cells carry 0.
      const result = new Result(
        inc.row,
        cells.map((c) => ({ ...c, seq: 0 })),
      );
      return { cells, result };
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
      if (m instanceof Put) this.#schema.checkPut(m);
      else this.#schema.checkDelete(m);
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
        m instanceof Put ? putCells(m, now) : this.#deleteCells(m, now),
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
      if (m instanceof Put) this.#schema.checkPut(m);
      else if (m instanceof Delete) this.#schema.checkDelete(m);
      else throw new InvalidArgumentError('mutateRows() takes Put and Delete objects');
      if (m.rowLock !== undefined) {
        throw new InvalidArgumentError('mutateRows() takes its own locks; drop the rowLock');
      }
    }
    const rows = [...new Set(mutations.map((m) => m.row))];
    for (const m of mutations) this.#fencing.check(m.row, m.token);
    const grants = await this.#locks.acquireImplicitMany(rows, checked);
    return this.#track(async () => {
      try {
        // An explicit grant may have come while we waited.
        for (const m of mutations) this.#fencing.check(m.row, m.token);
        const cells = mutations.flatMap((m) => {
          const now = this.#times.timeFor(m.row);
          return m instanceof Put ? putCells(m, now) : this.#deleteCells(m, now);
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
    return this.#checkpoints.run();
  }

  /** Waits for writes in flight, fails lock waiters, and closes the storage. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      await Promise.allSettled([...this.#inflight]);
      await this.#checkpoints.settled();
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
    const failure = this.#writes.failure;
    if (!reading && failure !== undefined) {
      throw new LocksmithError('IO_ERROR', 'This region stopped writing after a storage failure', {
        cause: failure,
      });
    }
  }

  #deleteCells(del: Delete, now: number): Draft[] {
    return deleteCells(del, now, this.#schema.order, this.#latest);
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
    this.#schema.check(checkFamilyName(family));
    const q = checkQualifier(qualifier);
    const want = expected === null || expected === undefined ? EMPTY : checkValue(expected);
    if (mutation.row !== key) {
      throw new InvalidArgumentError("Action's row must match the passed row");
    }
    return this.#mutate(key, mutation.rowLock, mutation.token, options, (now) => {
      const matches = expectationHolds(this.#latest(key, family, q), want);
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
    const arrival = this.#onArrival ? this.#times.timeFor(row) : undefined;
    // Checked before any wait, so a stale writer fails at once...
    this.#fencing.check(row, token);
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
        if (implicit !== undefined) this.#fencing.check(row, token);
        const { cells, result } = build(arrival ?? this.#times.timeFor(row));
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

  async #apply(cells: Draft[]): Promise<void> {
    await this.#writes.apply(cells);
    this.#checkpoints.afterWrite();
  }

  /** Wraps an explicit grant in its handle, remembering its token for fencing. */
  #granted(grant: RowLockGrant): RowLock {
    this.#fencing.granted(grant.row, grant.token);
    const lock = new RowLock(grant.row, grant.lockId as string, grant.token, this.#control);
    grant.handle = lock;
    return lock;
  }
}

function lockIdOf(lock: { readonly lockId: string } | string): string {
  if (typeof lock === 'string') return lock;
  if (typeof lock === 'object' && lock !== null && typeof lock.lockId === 'string')
    return lock.lockId;
  throw new InvalidArgumentError('Expected a RowLock returned by lockRow() or its lockId');
}
