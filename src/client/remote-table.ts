import {
  DeadlockError,
  InvalidArgumentError,
  ProtocolError,
  UnknownRowLockError,
} from '../core/errors.js';
import { callerHoldsAny, type HeldLock, heldByCaller } from '../core/held-by-caller.js';
import { checkCallback, checkOptionsObject } from '../core/options.js';
import { withHandle } from '../core/with-lock.js';
import { toStringBinary } from '../rows/bytes.js';
import {
  type CallOptions,
  checkCallOptions,
  checkLockRowOptions,
  checkTryLockOptions,
} from '../rows/call-options.js';
import { Delete, Increment, Put, RowMutations } from '../rows/mutation.js';
import { Get, Scan } from '../rows/query.js';
import type { TryLockOptions } from '../rows/region.js';
import type { Result } from '../rows/result.js';
import { type BytesInput, checkQualifier, checkRow, checkValue } from '../rows/row-input.js';
import {
  type BatchStatus,
  type RowLockRef,
  rowLockIdOf,
  type Table,
  type TableCallOptions,
  type TableLockOptions,
  type TableRowLock,
} from '../rows/table.js';
import type { HeldLocks } from './held-locks.js';
import type { CallLimits, TypedCall } from './typed-call.js';

/** What a remote table needs of its client. */
export interface TableClient {
  readonly call: TypedCall;
  /** The session's locks: handles made from grants, found by id. */
  readonly locks: HeldLocks;
  now(): number;
  /** Default row lock wait of the server, and the round-trip timeout added to it. */
  readonly rowLockWaitMs: number;
  readonly callTimeoutMs: number;
  /** Rows fetched per scanner round trip. */
  readonly scanBatch: number;
}

/** The session owns every lock of the client: an `owner` is refused. */
function noOwner(owner: unknown, what: string): void {
  if (owner !== undefined) {
    throw new InvalidArgumentError(
      `${what}: option owner is not available over the network: the session is the owner`,
    );
  }
}

/**
 * The region's own option check (same names, same messages), then what only a process can
 * give: an `owner` (the session is the owner).
 */
function callOptions(
  options: TableCallOptions | undefined,
  what: string,
): { signal?: AbortSignal; waitMs?: number } {
  const { owner, ...rest } = checkCallOptions(options as CallOptions | undefined, what);
  noOwner(owner, what);
  return rest;
}

/**
 * A table on a locksmith server, through the client's session: the {@link Table} interface,
 * with the same argument checks (done here, before anything is sent) and the same errors as
 * the in-process `Region`. A call that carried a row lock renews the lock's lease on this
 * side too once the server answers it.
 */
export class RemoteTable implements Table {
  readonly name: string;
  readonly #client: TableClient;

  /** @internal Use `client.table(name)`. */
  constructor(name: string, client: TableClient) {
    this.name = name;
    this.#client = client;
  }

  /**
   * As `Region.lockRow`. A lock that renews itself (the default) is held while this client's
   * session lives: the session's heartbeats keep it, and it is lost (`SESSION_EXPIRED`) when
   * they stop reaching the server for a session lease.
   */
  async lockRow(row: BytesInput, options?: TableLockOptions): Promise<TableRowLock> {
    const key = checkRow(row);
    const { owner, renew, signal, waitMs } = checkLockRowOptions(options, 'lockRow');
    noOwner(owner, 'lockRow');
    const wait = waitMs ?? this.#client.rowLockWaitMs;
    if (wait !== 0) this.#refuseSelfWait([key]);
    const sentAt = this.#client.now();
    const grant = await this.#client.call('lockRow', [this.name, key, waitMs, renew], {
      signal,
      timeoutMs: Number.isFinite(wait) ? wait + this.#client.callTimeoutMs : 0,
      waitMs: wait,
    });
    return this.#client.locks.granted(this.name, Buffer.from(key, 'latin1'), grant, sentAt);
  }

  /** As `Region.tryLockRow`; the `owner` option is refused (the session owns the lock). */
  async tryLockRow(row: BytesInput, options?: TryLockOptions): Promise<TableRowLock | null> {
    const key = checkRow(row);
    const { owner, renew } = checkTryLockOptions(options);
    noOwner(owner, 'tryLockRow');
    const sentAt = this.#client.now();
    const grant = await this.#client.call('tryLockRow', [this.name, key, renew]);
    return grant === null
      ? null
      : this.#client.locks.granted(this.name, Buffer.from(key, 'latin1'), grant, sentAt);
  }

  async withRowLock<T>(
    row: BytesInput,
    fn: (lock: TableRowLock) => T | PromiseLike<T>,
    options?: TableLockOptions,
  ): Promise<T> {
    checkCallback(fn, 'withRowLock fn');
    if (fn === undefined) throw new InvalidArgumentError('withRowLock needs a function');
    const lock = await this.lockRow(row, options);
    return withHandle(lock, fn, this.#heldLockOf(lock.row.toString('latin1')));
  }

  async unlockRow(lock: RowLockRef): Promise<void> {
    const id = rowLockIdOf(lock);
    await this.#client.call('unlockRow', [this.name, id]);
    // The server released it: the handle closes without a second round trip.
    this.#client.locks.get(id)?.released();
  }

  async renewLease(lock: RowLockRef): Promise<void> {
    const id = rowLockIdOf(lock);
    const sentAt = this.#client.now();
    await this.#client.call('renewLease', [this.name, id]);
    this.#client.locks.get(id)?.renewedAt(sentAt);
  }

  async get(get: Get, options?: TableCallOptions): Promise<Result> {
    if (!(get instanceof Get)) throw new InvalidArgumentError('get() takes a Get');
    const { signal } = callOptions(options, 'get');
    return this.#using(get.rowLock?.lockId, () =>
      this.#client.call('get', [this.name, get], { signal }),
    );
  }

  async *scan(scan: Scan): AsyncGenerator<Result, void, undefined> {
    if (!(scan instanceof Scan)) throw new InvalidArgumentError('scan() takes a Scan');
    const batch = this.#client.scanBatch;
    const first = await this.#client.call('openScanner', [this.name, scan, batch]);
    let scanner = first.scanner;
    try {
      yield* first.rows;
      while (scanner !== null) {
        const page = await this.#client.call('nextRows', [scanner, batch]);
        if (!page.more) scanner = null;
        yield* page.rows;
      }
    } finally {
      if (scanner !== null)
        await this.#client.call('closeScanner', [scanner]).catch(() => undefined);
    }
  }

  async put(put: Put, options?: TableCallOptions): Promise<void> {
    if (!(put instanceof Put)) throw new InvalidArgumentError('put() takes a Put');
    const lockId = put.rowLock?.lockId;
    const { waitMs, limits } = this.#limits(lockId, options, 'put', [put.row]);
    await this.#using(lockId, () => this.#client.call('put', [this.name, put, waitMs], limits));
  }

  async delete(del: Delete, options?: TableCallOptions): Promise<void> {
    if (!(del instanceof Delete)) throw new InvalidArgumentError('delete() takes a Delete');
    const lockId = del.rowLock?.lockId;
    const { waitMs, limits } = this.#limits(lockId, options, 'delete', [del.row]);
    await this.#using(lockId, () => this.#client.call('delete', [this.name, del, waitMs], limits));
  }

  async checkAndPut(
    row: BytesInput,
    family: string,
    qualifier: BytesInput,
    expected: BytesInput | null,
    put: Put,
    options?: TableCallOptions,
  ): Promise<boolean> {
    if (!(put instanceof Put)) throw new InvalidArgumentError('checkAndPut() takes a Put');
    const [key, q, e] = checkedCell(row, qualifier, expected);
    const lockId = put.rowLock?.lockId;
    const { waitMs, limits } = this.#limits(lockId, options, 'checkAndPut', [key]);
    return this.#using(lockId, () =>
      this.#client.call('checkAndPut', [this.name, key, family, q, e, put, waitMs], limits),
    );
  }

  async checkAndDelete(
    row: BytesInput,
    family: string,
    qualifier: BytesInput,
    expected: BytesInput | null,
    del: Delete,
    options?: TableCallOptions,
  ): Promise<boolean> {
    if (!(del instanceof Delete)) throw new InvalidArgumentError('checkAndDelete() takes a Delete');
    const [key, q, e] = checkedCell(row, qualifier, expected);
    const lockId = del.rowLock?.lockId;
    const { waitMs, limits } = this.#limits(lockId, options, 'checkAndDelete', [key]);
    return this.#using(lockId, () =>
      this.#client.call('checkAndDelete', [this.name, key, family, q, e, del, waitMs], limits),
    );
  }

  async increment(inc: Increment, options?: TableCallOptions): Promise<Result> {
    if (!(inc instanceof Increment))
      throw new InvalidArgumentError('increment() takes an Increment');
    if (inc.columns.length === 0)
      throw new InvalidArgumentError('An Increment needs at least one column');
    const lockId = inc.rowLock?.lockId;
    const { waitMs, limits } = this.#limits(lockId, options, 'increment', [inc.row]);
    return this.#using(lockId, () =>
      this.#client.call('increment', [this.name, inc, waitMs], limits),
    );
  }

  async incrementColumnValue(
    row: BytesInput,
    family: string,
    qualifier: BytesInput,
    amount: bigint | number,
    options?: TableCallOptions & { rowLock?: TableRowLock | undefined },
  ): Promise<bigint> {
    const { rowLock, ...rest } = checkOptionsObject(options, 'incrementColumnValue options');
    const inc = new Increment(row, rowLock === undefined ? {} : { rowLock });
    inc.addColumn(family, qualifier, amount);
    const result = await this.increment(inc, rest);
    const cell = result.cells[0];
    if (cell === undefined || cell.value.length !== 8) {
      throw new ProtocolError('The server sent a malformed counter');
    }
    return cell.value.readBigInt64BE(0);
  }

  async mutateRow(mutations: RowMutations, options?: TableCallOptions): Promise<void> {
    if (!(mutations instanceof RowMutations))
      throw new InvalidArgumentError('mutateRow() takes RowMutations');
    if (mutations.mutations.length === 0) throw new InvalidArgumentError('RowMutations is empty');
    const lockId = mutations.mutations.find((m) => m.rowLock !== undefined)?.rowLock?.lockId;
    const { waitMs, limits } = this.#limits(lockId, options, 'mutateRow', [mutations.row]);
    await this.#using(lockId, () =>
      this.#client.call('mutateRow', [this.name, mutations, waitMs], limits),
    );
  }

  async mutateRows(
    mutations: readonly (Put | Delete)[],
    options?: TableCallOptions,
  ): Promise<void> {
    checkList(mutations, 'mutateRows', 'a non-empty array');
    const { waitMs, limits } = this.#limits(
      undefined,
      options,
      'mutateRows',
      mutations.map((m) => m.row),
    );
    await this.#client.call('mutateRows', [this.name, mutations, waitMs], limits);
  }

  /**
   * As `Region.batch`: an entry that is not a Put or Delete fails alone (it is not sent);
   * the others go in one call and get the server's status each.
   */
  async batch(
    mutations: readonly (Put | Delete)[],
    options?: TableCallOptions,
  ): Promise<BatchStatus[]> {
    if (!Array.isArray(mutations))
      throw new InvalidArgumentError('batch() takes an array of Put and Delete');
    const sent = mutations.filter((m) => m instanceof Put || m instanceof Delete);
    const { waitMs, limits } = this.#limits(undefined, options, 'batch', sent);
    const errors = await this.#client.call('batch', [this.name, sent, waitMs], limits);
    if (errors.length !== sent.length) {
      throw new ProtocolError(
        `The server sent ${errors.length} batch statuses for ${sent.length} mutations`,
      );
    }
    let next = 0;
    return mutations.map((m): BatchStatus => {
      if (!(m instanceof Put || m instanceof Delete))
        return {
          ok: false,
          error: new InvalidArgumentError('batch() takes Put and Delete objects'),
        };
      const error = errors[next++];
      return error === null || error === undefined ? { ok: true } : { ok: false, error };
    });
  }

  /** Forgets nothing on the server: a remote table is a name. */
  async close(): Promise<void> {}

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /**
   * A mutation's wait (sent when the caller gave one) and its round trip's limits: the wait
   * for the row plus the call timeout; a call carrying a row lock does not wait for its row.
   */
  #limits(
    lockId: string | undefined,
    options: TableCallOptions | undefined,
    what: string,
    rows: readonly (string | { readonly row: string; readonly rowLock?: unknown })[],
  ): { waitMs: number | undefined; limits: CallLimits } {
    const { signal, waitMs } = callOptions(options, what);
    const wait = lockId !== undefined ? 0 : (waitMs ?? this.#client.rowLockWaitMs);
    if (wait !== 0 && callerHoldsAny()) {
      this.#refuseSelfWait(
        rows.flatMap((r) => (typeof r === 'string' ? [r] : r.rowLock === undefined ? [r.row] : [])),
      );
    }
    return {
      waitMs,
      limits: {
        signal,
        timeoutMs: Number.isFinite(wait) ? wait + this.#client.callTimeoutMs : 0,
        waitMs: wait,
      },
    };
  }

  /** `row` of this table as held by a caller's `withRowLock` (see `held-by-caller.ts`). */
  #heldLockOf(row: string): HeldLock {
    return { target: this.#client, key: `${this.name}\0${row}` };
  }

  /**
   * A wait from inside `withRowLock` for the row it holds would never end: the server lets a
   * session wait for its own lock (its other calls may release it), so it is refused here.
   */
  #refuseSelfWait(rows: readonly string[]): void {
    for (const row of rows) {
      const { target, key } = this.#heldLockOf(row);
      if (heldByCaller(target, key)) {
        throw new DeadlockError(
          `Row lock row=${toStringBinary(row)} of table ${this.name} is held by this call's own withRowLock: waiting for it would never end (pass the lock to the operation: { rowLock: lock })`,
        );
      }
    }
  }

  /** Runs a call carrying `lockId`; its answer renews the lock's lease on this side. */
  async #using<T>(lockId: string | undefined, call: () => Promise<T>): Promise<T> {
    if (lockId === undefined) return call();
    const { locks } = this.#client;
    const lock = locks.get(lockId);
    if (lock === undefined && locks.isGone(lockId)) {
      throw new UnknownRowLockError(
        `Unknown row lock ${lockId}: never granted, already released, or its lease expired`,
      );
    }
    lock?.ensureValid();
    const sentAt = this.#client.now();
    const value = await call();
    lock?.renewedAt(sentAt);
    return value;
  }
}

/** Checks a list of mutations as the region does; `takes` says what `what` takes. */
function checkList(mutations: readonly (Put | Delete)[], what: string, takes: string): void {
  if (!Array.isArray(mutations))
    throw new InvalidArgumentError(`${what}() takes ${takes} of Put and Delete`);
  for (const m of mutations) {
    if (!(m instanceof Put || m instanceof Delete))
      throw new InvalidArgumentError(`${what}() takes Put and Delete objects`);
  }
}

/** The compared cell of a check-and-mutate, checked as the region checks it. */
function checkedCell(
  row: BytesInput,
  qualifier: BytesInput,
  expected: BytesInput | null,
): [string, string, Buffer | null] {
  return [
    checkRow(row),
    checkQualifier(qualifier),
    expected === null ? null : checkValue(expected),
  ];
}
