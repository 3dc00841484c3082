import { InvalidArgumentError, ProtocolError, UnknownRowLockError } from '../core/errors.js';
import { checkCallback, checkOptionsObject } from '../core/options.js';
import { withHandle } from '../core/with-lock.js';
import { type CallOptions, checkCallOptions, checkTryLockOptions } from '../rows/call-options.js';
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
  type TableRowLock,
} from '../rows/table.js';
import type { Method } from '../wire/messages.js';
import {
  decodeResult,
  encodeDelete,
  encodeGet,
  encodeIncrement,
  encodeMutation,
  encodePut,
  encodeRowMutations,
  encodeScan,
} from '../wire/rows-codec.js';
import { fromWireError } from '../wire/wire-error.js';
import type { RemoteRowLock } from './remote-row-lock.js';
import { fromServer, serverTuple } from './server-value.js';

/** What a remote table needs of its client. */
export interface TableClient {
  call(
    method: Method,
    args: unknown[],
    options?: { signal?: AbortSignal; timeoutMs?: number; idempotent?: boolean },
  ): Promise<unknown>;
  /** Makes the handle for a grant answered to a call sent at `sentAt`. */
  granted(table: string, row: Buffer, grant: unknown, sentAt: number): RemoteRowLock;
  /** The lock with this id held through this client, if any. */
  heldLock(lockId: string): RemoteRowLock | undefined;
  /** Whether this client closed the lock, or counts it as lost. */
  gone(lockId: string): boolean;
  now(): number;
  /** Default row lock wait of the server, and the round-trip timeout added to it. */
  readonly rowLockWaitMs: number;
  readonly callTimeoutMs: number;
  /** Rows fetched per scanner round trip. */
  readonly scanBatch: number;
}

const latin1 = (s: string) => Buffer.from(s, 'latin1');

/** A wait on the wire: milliseconds, or -1 for forever. */
function wireWait(ms: number): number {
  return Number.isFinite(ms) ? Math.ceil(ms) : -1;
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

  async lockRow(row: BytesInput, options?: TableCallOptions): Promise<TableRowLock> {
    const key = checkRow(row);
    const { signal, waitMs } = callOptions(options, 'lockRow');
    const wait = waitMs ?? this.#client.rowLockWaitMs;
    const sentAt = this.#client.now();
    const grant = await this.#client.call(
      'lockRow',
      [this.name, latin1(key), waitMs === undefined ? null : wireWait(waitMs)],
      {
        ...(signal === undefined ? {} : { signal }),
        timeoutMs: Number.isFinite(wait) ? wait + this.#client.callTimeoutMs : 0,
      },
    );
    return this.#client.granted(this.name, latin1(key), grant, sentAt);
  }

  /** As `Region.tryLockRow`; the `owner` option is refused (the session owns the lock). */
  async tryLockRow(row: BytesInput, options?: TryLockOptions): Promise<TableRowLock | null> {
    const key = checkRow(row);
    noOwner(checkTryLockOptions(options), 'tryLockRow');
    const sentAt = this.#client.now();
    const grant = await this.#client.call('tryLockRow', [this.name, latin1(key)]);
    return grant === null ? null : this.#client.granted(this.name, latin1(key), grant, sentAt);
  }

  async withRowLock<T>(
    row: BytesInput,
    fn: (lock: TableRowLock) => T | PromiseLike<T>,
    options?: TableCallOptions,
  ): Promise<T> {
    checkCallback(fn, 'withRowLock fn');
    if (fn === undefined) throw new InvalidArgumentError('withRowLock needs a function');
    return withHandle(await this.lockRow(row, options), fn);
  }

  async unlockRow(lock: RowLockRef): Promise<void> {
    const id = rowLockIdOf(lock);
    await this.#client.call('unlockRow', [this.name, id]);
    // The server released it: the handle closes without a second round trip.
    this.#client.heldLock(id)?.released();
  }

  async renewLease(lock: RowLockRef): Promise<void> {
    const id = rowLockIdOf(lock);
    const sentAt = this.#client.now();
    await this.#client.call('renewLease', [this.name, id]);
    this.#client.heldLock(id)?.renewedAt(sentAt);
  }

  async get(get: Get, options?: TableCallOptions): Promise<Result> {
    if (!(get instanceof Get)) throw new InvalidArgumentError('get() takes a Get');
    const { signal } = callOptions(options, 'get');
    const value = await this.#using(get.rowLock?.lockId, () =>
      this.#client.call('get', [this.name, encodeGet(get)], {
        ...(signal === undefined ? {} : { signal }),
        idempotent: true,
      }),
    );
    return fromServer('get result', () => decodeResult(value));
  }

  async *scan(scan: Scan): AsyncGenerator<Result, void, undefined> {
    if (!(scan instanceof Scan)) throw new InvalidArgumentError('scan() takes a Scan');
    const batch = this.#client.scanBatch;
    const opened = serverTuple(
      await this.#client.call('openScanner', [this.name, encodeScan(scan), batch]),
      'scanner',
      2,
    );
    const [id, first] = opened;
    if ((id !== null && typeof id !== 'string') || !Array.isArray(first)) {
      throw new ProtocolError('The server sent a malformed scanner');
    }
    let scanner = id;
    try {
      for (const r of first) yield fromServer('scan result', () => decodeResult(r));
      while (scanner !== null) {
        const [rows, more] = serverTuple(
          await this.#client.call('nextRows', [scanner, batch]),
          'scan batch',
          2,
        );
        if (!Array.isArray(rows)) throw new ProtocolError('The server sent a malformed scan batch');
        if (more !== true) scanner = null;
        for (const r of rows) yield fromServer('scan result', () => decodeResult(r));
      }
    } finally {
      if (scanner !== null)
        await this.#client.call('closeScanner', [scanner]).catch(() => undefined);
    }
  }

  async put(put: Put, options?: TableCallOptions): Promise<void> {
    if (!(put instanceof Put)) throw new InvalidArgumentError('put() takes a Put');
    await this.#mutate('put', put.rowLock?.lockId, [this.name, encodePut(put)], options);
  }

  async delete(del: Delete, options?: TableCallOptions): Promise<void> {
    if (!(del instanceof Delete)) throw new InvalidArgumentError('delete() takes a Delete');
    await this.#mutate('delete', del.rowLock?.lockId, [this.name, encodeDelete(del)], options);
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
    const args = this.#checkArgs(row, family, qualifier, expected);
    return (
      (await this.#mutate(
        'checkAndPut',
        put.rowLock?.lockId,
        [...args, encodePut(put)],
        options,
      )) === true
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
    const args = this.#checkArgs(row, family, qualifier, expected);
    return (
      (await this.#mutate(
        'checkAndDelete',
        del.rowLock?.lockId,
        [...args, encodeDelete(del)],
        options,
      )) === true
    );
  }

  async increment(inc: Increment, options?: TableCallOptions): Promise<Result> {
    if (!(inc instanceof Increment))
      throw new InvalidArgumentError('increment() takes an Increment');
    if (inc.columns.length === 0)
      throw new InvalidArgumentError('An Increment needs at least one column');
    const value = await this.#mutate(
      'increment',
      inc.rowLock?.lockId,
      [this.name, encodeIncrement(inc)],
      options,
    );
    return fromServer('increment result', () => decodeResult(value));
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
    await this.#mutate('mutateRow', lockId, [this.name, encodeRowMutations(mutations)], options);
  }

  async mutateRows(
    mutations: readonly (Put | Delete)[],
    options?: TableCallOptions,
  ): Promise<void> {
    await this.#mutate(
      'mutateRows',
      undefined,
      [this.name, this.#list(mutations, 'mutateRows', 'a non-empty array')],
      options,
    );
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
    const statuses = (await this.#mutate(
      'batch',
      undefined,
      [this.name, this.#list(sent, 'batch', 'an array')],
      options,
    )) as unknown[];
    let next = 0;
    return mutations.map((m): BatchStatus => {
      if (!(m instanceof Put || m instanceof Delete))
        return {
          ok: false,
          error: new InvalidArgumentError('batch() takes Put and Delete objects'),
        };
      const s = statuses[next++];
      if (s === null) return { ok: true };
      const [code, message] = s as [unknown, unknown];
      return { ok: false, error: fromWireError(code, message) };
    });
  }

  /** Forgets nothing on the server: a remote table is a name. */
  async close(): Promise<void> {}

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** `mutations` on the wire; `takes` says what `what` takes (the region's own words). */
  #list(mutations: readonly (Put | Delete)[], what: string, takes: string): unknown[] {
    if (!Array.isArray(mutations))
      throw new InvalidArgumentError(`${what}() takes ${takes} of Put and Delete`);
    return mutations.map((m) => {
      if (!(m instanceof Put || m instanceof Delete))
        throw new InvalidArgumentError(`${what}() takes Put and Delete objects`);
      return encodeMutation(m);
    });
  }

  #checkArgs(
    row: BytesInput,
    family: string,
    qualifier: BytesInput,
    expected: BytesInput | null,
  ): unknown[] {
    const key = checkRow(row);
    const q = checkQualifier(qualifier);
    const e = expected === null ? null : checkValue(expected);
    return [this.name, latin1(key), family, latin1(q), e];
  }

  #mutate(
    method: Method,
    lockId: string | undefined,
    args: unknown[],
    options: TableCallOptions | undefined,
  ): Promise<unknown> {
    const { signal, waitMs } = callOptions(options, method);
    const wait = lockId !== undefined ? 0 : (waitMs ?? this.#client.rowLockWaitMs);
    const withWait = waitMs === undefined ? args : [...args, wireWait(waitMs)];
    return this.#using(lockId, () =>
      this.#client.call(method, withWait, {
        ...(signal === undefined ? {} : { signal }),
        timeoutMs: Number.isFinite(wait) ? wait + this.#client.callTimeoutMs : 0,
      }),
    );
  }

  /** Runs a call carrying `lockId`; its answer renews the lock's lease on this side. */
  async #using<T>(lockId: string | undefined, call: () => Promise<T>): Promise<T> {
    if (lockId === undefined) return call();
    const lock = this.#client.heldLock(lockId);
    if (lock === undefined && this.#client.gone(lockId)) {
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
