import { EventEmitter } from 'node:events';
import {
  AbortedError,
  AlreadyClosedError,
  FencedError,
  InvalidArgumentError,
  LockIOError,
  NotServingRegionError,
} from '../core/errors.js';
import { checkCallback, checkOptionsObject } from '../core/options.js';
import { withHandle } from '../core/with-lock.js';
import { toStringBinary } from './bytes.js';
import {
  type CallOptions,
  type CheckedCallOptions,
  checkCallOptions,
  checkLockRowOptions,
  checkTryLockOptions,
  type LockRowOptions,
  type TryLockOptions,
} from './call-options.js';
import type { Cell } from './cell.js';
import type { ColumnFamily } from './column-family.js';
import { FamilySchema } from './family-schema.js';
import { RegionTestHooks, rowsInternals } from './internals.js';
import type { Memstore } from './memstore.js';
import { Delete, Increment, Put, RowMutations } from './mutation.js';
import { type Draft, MutationCells } from './mutation-cells.js';
import {
  cellCount,
  checkExpectation,
  checkMutateRows,
  checkRowMutations,
} from './mutation-checks.js';
import { MutationRunner } from './mutation-runner.js';
import { Mvcc } from './mvcc.js';
import { Get, Scan, scanBetween } from './query.js';
import {
  type CheckedRegionOptions,
  checkRegionOptions,
  type RegionOptions,
} from './region-options.js';
import { RegionReads } from './region-reads.js';
import { type RegionPlacement, type RegionRecovery, recoverRegion } from './region-recovery.js';
import { RegionRowLocks } from './region-row-locks.js';
import type { RegionStorage } from './region-storage.js';
import { Result } from './result.js';
import { type BytesInput, checkCellCount, checkRow } from './row-input.js';
import type { RowLock } from './row-lock.js';
import type { RowLockActivity, RowLockOwner } from './row-lock-manager.js';
import type { RowLockTokenStore } from './row-lock-tokens.js';
import type { BatchStatus, RowLockRef, Table, TableRowLock } from './table.js';
import { TimestampAllocator } from './timestamp-allocator.js';
import { INSERT_CHUNK, WritePath } from './write-path.js';

/** What {@link Region.tryLockRow} accepts. */
export type { CallOptions, LockRowOptions, TryLockOptions } from './call-options.js';
export type { RegionOptions } from './region-options.js';
export type { RegionPlacement } from './region-recovery.js';
export type { BatchStatus } from './table.js';

/** The events a {@link Region} emits. */
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
 * The region is a façade that checks arguments and delegates, one part per concept:
 * `recoverRegion` (open), `FamilySchema`, `RegionRowLocks` (with `RowFencing`),
 * `MutationRunner` (with `TimestampAllocator`), `MutationCells`, `WritePath` (with
 * `CheckpointScheduler`) and `RegionReads`. Test hooks: see internals.ts.
 *
 * It is a {@link Table}: the network client's remote table has the same methods, types,
 * errors and codes, and every error of a method comes as a rejection.
 */
export class Region extends EventEmitter<RegionEvents> implements Table {
  readonly #schema: FamilySchema;
  readonly #memstore: Memstore;
  readonly #mvcc: Mvcc;
  readonly #locks: RegionRowLocks;
  readonly #runner: MutationRunner;
  readonly #storage: RegionStorage | undefined;
  readonly #tokens: RowLockTokenStore | undefined;
  readonly #reads: RegionReads;
  readonly #writes: WritePath;
  readonly #cells: MutationCells;
  #closing: Promise<void> | undefined;
  /** The rows this region holds: `[#startKey, #endKey)`, `''` for no bound (see placement). */
  readonly #startKey: string;
  #endKey: string;
  readonly #rowLockWaitMs: number;

  private constructor(
    options: CheckedRegionOptions,
    recovery: RegionRecovery,
    placement: RegionPlacement | undefined,
  ) {
    super();
    this.#startKey = placement?.startKey ?? '';
    this.#endKey = placement?.endKey ?? '';
    this.#rowLockWaitMs = options.rowLockWaitMs;
    const { clock } = options;
    const { memstore, storage, tokens } = recovery;
    const mvcc = new Mvcc(recovery.seq);
    const schema = new FamilySchema(options.families);
    const reads = new RegionReads(memstore, schema, mvcc);
    this.#schema = schema;
    this.#memstore = memstore;
    this.#mvcc = mvcc;
    this.#storage = storage;
    this.#tokens = tokens;
    this.#reads = reads;
    this.#cells = new MutationCells(schema.order, (row, family, qualifier) =>
      memstore.latest(row, family, qualifier, mvcc.readPoint),
    );
    const writes = new WritePath(
      memstore,
      mvcc,
      storage,
      schema,
      () => reads.oldestReadPoint(),
      options.checkpointBytes,
    );
    this.#writes = writes;
    this.#locks = new RegionRowLocks(options, tokens, {
      closing: () => this.#closing !== undefined,
      onExpired: (lock) => this.emit('lock-expired', lock),
    });
    this.#runner = new MutationRunner({
      locks: this.#locks,
      times: new TimestampAllocator(clock),
      apply: (cells) => writes.apply(cells),
      checkOpen: () => this.#checkOpen(),
      timestampOnArrival: options.timestampOnArrival,
    });
  }

  /**
   * Opens (and recovers) or creates a region. Every option is checked first (unknown names
   * included), and the data in `dir` is checked against `families` before anything on disk
   * changes: a refused open (`INVALID_ARGUMENT`, or `LOCK_OBTAIN_FAILED` when the directory
   * is open elsewhere, or `FENCED` when it carries a larger epoch than `options.epoch`) leaves
   * the directory byte for byte as it was.
   *
   * `placement` (internal: a server's table split into regions) bounds the rows the region
   * holds: recovery keeps only those, and a call for another row is refused with
   * `NOT_SERVING_REGION` (HBase's `NotServingRegionException`); a split's new region also
   * gets the rows it takes over and starts its tokens above its parent's.
   */
  static async open(options: RegionOptions, placement?: RegionPlacement): Promise<Region> {
    const checked = checkRegionOptions(options);
    return new Region(checked, await recoverRegion(checked, placement), placement);
  }

  /** Test hooks (see internals.ts); not part of the public API. */
  get [rowsInternals](): RegionTestHooks {
    return new RegionTestHooks({
      setInsertPace: (pace) => this.#writes.overridePace(pace),
      setReadPoint: (readPoint) => this.#reads.overrideReadPoint(readPoint),
      storageStats: () => this.#storage?.stats,
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
   * Locks `row` until `unlockRow`, the handle's `close()` or the region's close; waits for
   * other holders (FIFO). With `renew: false`, HBase's lease: the lock is also lost when no
   * use or `renewLease` came within `leasePeriodMs`, and the {@link RowLock}'s `signal` aborts
   * by itself then (`LEASE_EXPIRED`).
   */
  async lockRow(row: BytesInput, options?: LockRowOptions): Promise<RowLock> {
    const key = checkRow(row);
    const checked = checkLockRowOptions(options, 'lockRow');
    this.#checkOpen();
    this.#checkRange(key);
    return this.#locks.lockRow(key, checked);
  }

  /** Locks `row` if nobody holds it or waits for it; null otherwise. Never waits. */
  async tryLockRow(row: BytesInput, options?: TryLockOptions): Promise<RowLock | null> {
    const key = checkRow(row);
    const { owner, renew } = checkTryLockOptions(options);
    this.#checkOpen();
    this.#checkRange(key);
    return this.#locks.tryLockRow(key, owner, renew);
  }

  /**
   * Locks `row`, runs `fn` with the lock, and unlocks on every exit path (core's
   * `withHandle`): resolves with `fn`'s result only if the lock was not lost meanwhile;
   * otherwise rejects with the `LockLostError` (`LEASE_EXPIRED`), since the work may have
   * overlapped another holder. Pass `lock.signal` to the work and `lock` (or `lock.token`) to
   * the mutations. The lock renews itself unless `renew: false` (then a use renews the lease).
   */
  async withRowLock<T>(
    row: BytesInput,
    fn: (lock: RowLock) => T | PromiseLike<T>,
    options?: LockRowOptions,
  ): Promise<T> {
    const key = checkRow(row);
    checkCallback(fn, 'withRowLock fn');
    if (fn === undefined) throw new InvalidArgumentError('withRowLock needs a function');
    const checked = checkLockRowOptions(options, 'withRowLock');
    this.#checkOpen();
    this.#checkRange(key);
    return withHandle(await this.#locks.lockRow(key, checked), fn, this.#locks.heldLockOf(key));
  }

  /**
   * Puts back an explicit lock recorded before a restart or a failover: the same row, id and
   * token, held by `owner`, with a full lease from now (none if it renews itself). For a
   * server recovering its sessions; refused if the row is held (see
   * `RowLockManager.restoreRowLock`).
   */
  restoreRowLock(
    row: BytesInput,
    recorded: { lockId: string; token: number; owner?: RowLockOwner | undefined; renew: boolean },
  ): RowLock {
    const key = checkRow(row);
    this.#checkOpen();
    this.#checkRange(key);
    return this.#locks.restoreRowLock(
      key,
      recorded.lockId,
      recorded.token,
      recorded.owner,
      recorded.renew,
    );
  }

  /**
   * Gives a held explicit lock to `owner` (its holder's next session), with a full lease from
   * now unless it renews itself; the handle stays the same (see
   * `RowLockManager.transferRowLock`).
   */
  transferRowLock(lock: RowLock, owner: RowLockOwner | undefined, renew: boolean): void {
    this.#checkOpen();
    this.#locks.transfer(lock, owner, renew);
  }

  /** Releases an explicit lock; `UNKNOWN_ROW_LOCK` if it is not held (released, expired). */
  async unlockRow(lock: RowLockRef): Promise<void> {
    this.#locks.unlockRow(lock);
  }

  /** Renews a lock's lease without an operation. */
  async renewLease(lock: RowLockRef): Promise<void> {
    this.#locks.renewLease(lock);
  }

  /**
   * For status pages: the requests waiting for rows now (at most `limit`, default 100), with
   * each row's holder, and the deadlocks caught so far with the last cycle.
   */
  rowLockActivity(limit?: number): RowLockActivity {
    return this.#locks.activity(limit);
  }

  /** Requests waiting for a row: all of them, or `owner`'s (see `RowLockManager.waitingOf`). */
  rowLockWaiting(owner?: RowLockOwner): number {
    return this.#locks.waiting(owner);
  }

  // ---- reads -----------------------------------------------------------------------------

  /**
   * Reads one row. Never waits for row locks; a lock id on the Get is checked and renewed.
   * The options are checked as every call's; an already aborted `signal` refuses the read.
   */
  async get(get: Get, options?: CallOptions): Promise<Result> {
    this.#checkOpen(true);
    if (!(get instanceof Get)) throw new InvalidArgumentError('get() takes a Get');
    const { signal } = checkCallOptions(options, 'get');
    if (signal?.aborted) throw new AbortedError('get was aborted', { cause: signal.reason });
    this.#schema.checkQuery(get);
    this.#checkRange(get.row);
    if (get.rowLock !== undefined) this.#locks.use(get.rowLock, get.row);
    return this.#reads.get(get);
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
    // Row keys are strings: the later of the two starts, in byte order.
    let start = scan.startRow;
    if (start < this.#startKey) start = this.#startKey;
    const end = this.#endKey;
    const stop =
      end !== '' && (scan.stopRow === undefined || scan.stopRow > end) ? end : scan.stopRow;
    yield* this.#reads.scan(
      start === scan.startRow && stop === scan.stopRow ? scan : scanBetween(scan, start, stop),
    );
  }

  // ---- mutations -------------------------------------------------------------------------

  put(put: Put, options?: CallOptions): Promise<void> {
    // No async function (a small put's frame cost more than its checks); a synchronous
    // refusal is a rejection, as in every other method.
    try {
      if (!(put instanceof Put)) throw new InvalidArgumentError('put() takes a Put');
      const checked = checkCallOptions(options, 'put');
      this.#schema.checkPut(put);
      this.#checkRange(put.row);
      return this.#runner.mutate(put.row, put.rowLock, put.token, checked, (now) => ({
        cells: this.#cells.of(put, now),
        result: undefined,
      }));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  async delete(del: Delete, options?: CallOptions): Promise<void> {
    if (!(del instanceof Delete)) throw new InvalidArgumentError('delete() takes a Delete');
    const checked = checkCallOptions(options, 'delete');
    this.#schema.checkDelete(del);
    this.#checkRange(del.row);
    await this.#runner.mutate(del.row, del.rowLock, del.token, checked, (now) => ({
      cells: this.#cells.of(del, now),
      result: undefined,
    }));
  }

  /**
   * Applies `put` if `family:qualifier` of `row` currently holds `expected`; null or empty
   * `expected` means the cell must be absent. Atomic: both happen under the row lock.
   */
  async checkAndPut(
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
    return this.#checkAndMutate(row, family, qualifier, expected, put, checked);
  }

  /** Applies `del` if `family:qualifier` currently holds `expected` (null: absent). */
  async checkAndDelete(
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
    return this.#checkAndMutate(row, family, qualifier, expected, del, checked);
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
    this.#schema.checkIncrement(inc);
    this.#checkRange(inc.row);
    return this.#runner.mutate(inc.row, inc.rowLock, inc.token, checked, (now) => {
      const cells = this.#cells.increment(inc, now);
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
    options?: CallOptions & { rowLock?: TableRowLock | { readonly lockId: string } | undefined },
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
    const { rowLock, token } = checkRowMutations(this.#schema, mutations);
    this.#checkRange(mutations.row);
    await this.#runner.mutate(mutations.row, rowLock, token, checked, (now) => ({
      cells: mutations.mutations.flatMap((m) => this.#cells.of(m, now)),
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
    checkMutateRows(this.#schema, mutations);
    for (const m of mutations) this.#checkRange(m.row);
    return this.#runner.mutateRows(mutations, checked, this.#cells.of);
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
    checkCellCount(cellCount(mutations), 'A batch');
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

  // ---- splits (internal: a server's table split into regions) --------------------------

  /** The rows this region holds, `[startKey, endKey)` (`''`: no bound). */
  get range(): { readonly startKey: string; readonly endKey: string } {
    return { startKey: this.#startKey, endKey: this.#endKey };
  }

  /**
   * @internal The pause of a split, after the moved rows were copied: fails every wait for a
   * row lock here with `NOT_SERVING_REGION` (the server sends those calls again, to the row's
   * region after the split), then waits for the writes in flight and a checkpoint under way.
   * The server stops routing calls here before, so that nothing is in flight once this
   * resolves.
   */
  async quiesce(): Promise<void> {
    this.#checkOpen();
    this.#locks.failWaits(
      new NotServingRegionError(
        `This region (rows ${this.#describeRange()}) is being split; the call is sent again`,
      ),
    );
    await this.#runner.settled();
    await this.#writes.checkpoints.settled();
  }

  /** How long a wait for a row lock lasts when a call does not say (`rowLockWaitMs`). */
  get rowLockWaitMs(): number {
    return this.#rowLockWaitMs;
  }

  /** @internal The highest row-lock token this region may have handed out. */
  get tokenCeiling(): number {
    return this.#locks.tokenCeiling;
  }

  /**
   * @internal Pins the read point now (see `RegionReads.pin`): a split copies the rows it moves
   * as of it, then, paused, only what was written after it.
   */
  pinReadPoint(): { readPoint: number; release: () => void } {
    return this.#reads.pin();
  }

  /**
   * @internal The cells of rows `>= key` (every version and delete marker, in the order that
   * rebuilds them) whose write numbers are in `(after, upTo]`, for the region a split makes.
   * Nothing changes here.
   */
  cellsFrom(key: string, after = 0, upTo = Number.POSITIVE_INFINITY): Cell[] {
    return this.#memstore
      .cellsBetween(key, this.#endKey)
      .filter((cell) => cell.seq > after && cell.seq <= upTo);
  }

  /**
   * @internal Applies cells a split took from the region it cut (written there after the
   * rows' copy), write by write in their order, each durable here before this resolves. Only
   * before the region serves: nothing else writes meanwhile.
   */
  async absorb(cells: readonly Cell[]): Promise<void> {
    const writes = new Map<number, Draft[]>();
    for (const { seq, ...draft } of [...cells].sort((a, b) => a.seq - b.seq)) {
      const list = writes.get(seq);
      if (list === undefined) writes.set(seq, [draft]);
      else list.push(draft);
    }
    // Started in order (each takes its write number at once) and synced together; a large one
    // inserts over several turns before its record is queued, so the next waits for it (the
    // log must hold them in their order).
    const started: Promise<void>[] = [];
    for (const drafts of writes.values()) {
      const applied = this.#writes.apply(drafts);
      // Awaited below; an earlier one failing while a large one is awaited is not unhandled.
      applied.catch(() => undefined);
      started.push(applied);
      if (drafts.length >= INSERT_CHUNK) await applied;
    }
    await Promise.all(started);
  }

  /**
   * @internal Last step of a split, after it is recorded: this region ends at `key`. Its rows
   * from `key` on leave the memstore (the storage still holds them until the next checkpoint;
   * recovery drops them, see placement), and their explicit locks are handed back for the new
   * region to {@link adoptRowLock}, unended.
   */
  splitAt(key: string): { lock: RowLock; owner: RowLockOwner | undefined; renew: boolean }[] {
    this.#checkRange(key);
    this.#endKey = key;
    this.#memstore.dropRows(key, '');
    return this.#locks.detachFrom(key);
  }

  /** @internal Every later row-lock token here is larger than `floor` (see `raiseTokens`). */
  raiseTokens(floor: number): void {
    this.#locks.raiseTokens(floor);
  }

  /** @internal Holds a lock that a split moved here (see {@link splitAt}). */
  adoptRowLock(lock: RowLock, owner: RowLockOwner | undefined, renew: boolean): void {
    this.#checkRange(lock.row.toString('latin1'));
    this.#locks.adopt(lock, owner, renew);
  }

  // ---- lifecycle -------------------------------------------------------------------------

  /**
   * Checkpoint: writes a snapshot of the live cells and drops the log before it, compacting
   * as HBase's major compaction does (hidden versions and delete markers go).
   */
  flush(): Promise<void> {
    this.#checkOpen();
    return this.#writes.checkpoints.run();
  }

  /** Waits for writes in flight, fails lock waiters, and closes the storage. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      await this.#runner.settled();
      await this.#writes.checkpoints.settled();
      this.#locks.close();
      this.#tokens?.close();
      await this.#storage?.close();
    })();
    return this.#closing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  // ---- internals -------------------------------------------------------------------------

  /**
   * Reads go on after a storage failure (what they see is durable); writes stop, with
   * `FENCED` when a newer master took the storage over (the region must be closed: it is
   * deposed), else `IO_ERROR`.
   */
  #checkOpen(reading = false): void {
    if (this.#closing !== undefined) throw new AlreadyClosedError('This region is closed');
    const failure = this.#writes.failure;
    if (!reading && failure instanceof FencedError) {
      throw new FencedError(
        `This region's storage is owned by a newer master: ${failure.message}`,
        {
          cause: failure,
        },
      );
    }
    if (!reading && failure !== undefined) {
      throw new LockIOError('This region stopped writing after a storage failure', {
        cause: failure,
      });
    }
  }

  #checkRange(key: string): void {
    if (key < this.#startKey || (this.#endKey !== '' && key >= this.#endKey)) {
      throw new NotServingRegionError(
        `Row ${toStringBinary(key)} is not in this region (rows ${this.#describeRange()})`,
      );
    }
  }

  #describeRange(): string {
    const end = this.#endKey === '' ? 'end' : toStringBinary(this.#endKey);
    return `${this.#startKey === '' ? 'start' : toStringBinary(this.#startKey)} to ${end}`;
  }

  async #checkAndMutate(
    row: BytesInput,
    family: string,
    qualifier: BytesInput,
    expected: BytesInput | null,
    mutation: Put | Delete,
    options: CheckedCallOptions,
  ): Promise<boolean> {
    const want = checkExpectation(this.#schema, row, family, qualifier, expected, mutation);
    const { row: key, qualifier: q, expected: value } = want;
    this.#checkRange(key);
    return this.#runner.mutate(key, mutation.rowLock, mutation.token, options, (now) => {
      const cells = this.#cells.ifExpected(key, family, q, value, mutation, now);
      return { cells: cells ?? [], result: cells !== undefined };
    });
  }
}
