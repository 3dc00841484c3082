import {
  DeadlockError,
  InvalidArgumentError,
  NotServingRegionError,
  ProtocolError,
  UnknownRowLockError,
} from '../core/errors.js';
import { callerHoldsAny, type HeldLock, heldByCaller } from '../core/held-by-caller.js';
import { checkCallback, checkOptionsObject, describeValue } from '../core/options.js';
import { withHandle } from '../core/with-lock.js';
import { toStringBinary } from '../rows/bytes.js';
import {
  type CallOptions,
  checkCallOptions,
  checkLockRowOptions,
  checkTryLockOptions,
} from '../rows/call-options.js';
import { Delete, Increment, Put, RowMutations } from '../rows/mutation.js';
import { Get, Scan, scanBetween } from '../rows/query.js';
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
import { MAX_ROUTE_TRIES, type RegionRouter, type Route } from './region-router.js';
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
  /** The connection is up (a call now is sent now, not queued until it reconnects). */
  readonly connected: boolean;
  /** The session now, if any: its id (the proof of holding its locks) and lease. */
  readonly session: { readonly id: string; readonly leaseMs: number } | undefined;
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
  readonly #router: RegionRouter | undefined;

  /**
   * @internal Use `client.table(name)`. With a `router`, each call goes to its row's region's
   * server of a fleet (see {@link RegionRouter}); `client` is the one the client connected to.
   */
  constructor(name: string, client: TableClient, router?: RegionRouter) {
    this.name = name;
    this.#client = client;
    this.#router = router;
  }

  /** Runs `call` with the client of `row`'s region (sent again where the region moved). */
  #on<T>(
    row: string | undefined,
    call: (client: TableClient) => Promise<T>,
    signal?: AbortSignal,
  ): Promise<T> {
    const router = this.#router;
    if (router === undefined) return call(this.#client);
    return router.run(this.name, row, (route) => call(route.client), signal);
  }

  /**
   * A lock call failed: where its server went away before answering (its connection lost),
   * a grant it may have made is reclaimed where the row's region is served next (see
   * `RegionRouter.reclaim`). Rethrows `err`.
   */
  #unanswered(
    c: TableClient,
    row: string,
    holder: { id: string; leaseMs: number } | undefined,
    err: unknown,
  ): never {
    if (
      holder !== undefined &&
      ((err as { code?: unknown }).code === 'CONNECTION_LOST' || !c.connected)
    )
      this.#router?.reclaim(this.name, row, holder);
    throw err;
  }

  /** The client whose session holds `lockId`, once the lock is done moving if it moves. */
  async #settledHolderOf(lockId: string): Promise<TableClient> {
    const router = this.#router;
    if (router === undefined) return this.#client;
    const found = router.handleOf(lockId);
    if (found?.lock.moving === true) await router.relocate(found.lock, found.from, false);
    return router.holderOf(lockId);
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
    const began = this.#client.now();
    return this.#on(
      key,
      async (c) => {
        // A call sent again waits only for what is left of its wait.
        const left = Number.isFinite(wait) ? Math.max(0, wait - (c.now() - began)) : wait;
        const sentAt = c.now();
        const holder = c.session;
        const grant = await c
          .call(
            'lockRow',
            [this.name, key, waitMs === undefined && left === wait ? undefined : left, renew],
            {
              signal,
              timeoutMs: Number.isFinite(left) ? left + c.callTimeoutMs : 0,
              waitMs: left,
            },
          )
          .catch((err: unknown) => this.#unanswered(c, key, holder, err));
        return c.locks.granted(this.name, Buffer.from(key, 'latin1'), grant, sentAt);
      },
      signal,
    );
  }

  /** As `Region.tryLockRow`; the `owner` option is refused (the session owns the lock). */
  async tryLockRow(row: BytesInput, options?: TryLockOptions): Promise<TableRowLock | null> {
    const key = checkRow(row);
    const { owner, renew } = checkTryLockOptions(options);
    noOwner(owner, 'tryLockRow');
    return this.#on(key, async (c) => {
      const sentAt = c.now();
      const holder = c.session;
      const grant = await c
        .call('tryLockRow', [this.name, key, renew])
        .catch((err: unknown) => this.#unanswered(c, key, holder, err));
      return grant === null
        ? null
        : c.locks.granted(this.name, Buffer.from(key, 'latin1'), grant, sentAt);
    });
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
    for (let again = true; ; again = false) {
      const c = await this.#settledHolderOf(id);
      try {
        await c.call('unlockRow', [this.name, id]);
      } catch (err) {
        // Its region closed there just before (a `lockMoved` on its way): where it is now.
        const found = this.#router?.handleOf(id);
        if (!again || (err as { code?: unknown }).code !== 'UNKNOWN_ROW_LOCK' || !found) throw err;
        found.lock.markMoving();
        continue;
      }
      // The server released it: the handle closes without a second round trip.
      c.locks.get(id)?.released();
      return;
    }
  }

  async renewLease(lock: RowLockRef): Promise<void> {
    const id = rowLockIdOf(lock);
    const c = await this.#settledHolderOf(id);
    const sentAt = c.now();
    await c.call('renewLease', [this.name, id]);
    c.locks.get(id)?.renewedAt(sentAt);
  }

  async get(get: Get, options?: TableCallOptions): Promise<Result> {
    if (!(get instanceof Get)) throw new InvalidArgumentError('get() takes a Get');
    const { signal } = callOptions(options, 'get');
    return this.#on(
      get.row,
      (c) => this.#using(c, get.rowLock?.lockId, () => c.call('get', [this.name, get], { signal })),
      signal,
    );
  }

  /**
   * The rows in key order. On a fleet, region after region, each on its server, as HBase's
   * client scanners go: a region that moved while it was read is read again from the first
   * row not returned yet, so no row is returned twice or skipped.
   */
  async *scan(scan: Scan): AsyncGenerator<Result, void, undefined> {
    if (!(scan instanceof Scan)) throw new InvalidArgumentError('scan() takes a Scan');
    const router = this.#router;
    if (router === undefined) {
      yield* this.#scanOn(this.#client, scan);
      return;
    }
    const stop = scan.stopRow;
    let from = scan.startRow;
    for (let attempt = 1; ; ) {
      let last: string | undefined;
      let route: Route | undefined;
      try {
        route = await router.route(this.name, from);
        const end = route.endKey;
        const bounded =
          end === undefined || end === '' || (stop !== undefined && stop <= end) ? stop : end;
        const part =
          from === scan.startRow && bounded === stop ? scan : scanBetween(scan, from, bounded);
        for await (const result of this.#scanOn(route.client, part)) {
          last = result.row.toString('latin1');
          yield result;
        }
      } catch (err) {
        if (!(err instanceof NotServingRegionError) || attempt >= MAX_ROUTE_TRIES) throw err;
        if (last !== undefined) from = `${last}\0`;
        await router.refresh(this.name, attempt);
        attempt = last === undefined ? attempt + 1 : 1;
        continue;
      }
      const end = route.endKey;
      if (end === undefined || end === '' || (stop !== undefined && end >= stop)) return;
      from = end;
      attempt = 1;
    }
  }

  async *#scanOn(c: TableClient, scan: Scan): AsyncGenerator<Result, void, undefined> {
    const batch = c.scanBatch;
    const first = await c.call('openScanner', [this.name, scan, batch]);
    let scanner = first.scanner;
    try {
      yield* first.rows;
      while (scanner !== null) {
        const page = await c.call('nextRows', [scanner, batch]);
        if (!page.more) scanner = null;
        yield* page.rows;
      }
    } finally {
      if (scanner !== null) await c.call('closeScanner', [scanner]).catch(() => undefined);
    }
  }

  async put(put: Put, options?: TableCallOptions): Promise<void> {
    if (!(put instanceof Put)) throw new InvalidArgumentError('put() takes a Put');
    const lockId = put.rowLock?.lockId;
    const { waitMs, limits } = this.#limits(lockId, options, 'put', [put.row]);
    await this.#on(
      put.row,
      (c) => this.#using(c, lockId, () => c.call('put', [this.name, put, waitMs], limits)),
      limits.signal,
    );
  }

  async delete(del: Delete, options?: TableCallOptions): Promise<void> {
    if (!(del instanceof Delete)) throw new InvalidArgumentError('delete() takes a Delete');
    const lockId = del.rowLock?.lockId;
    const { waitMs, limits } = this.#limits(lockId, options, 'delete', [del.row]);
    await this.#on(
      del.row,
      (c) => this.#using(c, lockId, () => c.call('delete', [this.name, del, waitMs], limits)),
      limits.signal,
    );
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
    return this.#on(
      key,
      (c) =>
        this.#using(c, lockId, () =>
          c.call('checkAndPut', [this.name, key, family, q, e, put, waitMs], limits),
        ),
      limits.signal,
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
    return this.#on(
      key,
      (c) =>
        this.#using(c, lockId, () =>
          c.call('checkAndDelete', [this.name, key, family, q, e, del, waitMs], limits),
        ),
      limits.signal,
    );
  }

  async increment(inc: Increment, options?: TableCallOptions): Promise<Result> {
    if (!(inc instanceof Increment))
      throw new InvalidArgumentError('increment() takes an Increment');
    if (inc.columns.length === 0)
      throw new InvalidArgumentError('An Increment needs at least one column');
    const lockId = inc.rowLock?.lockId;
    const { waitMs, limits } = this.#limits(lockId, options, 'increment', [inc.row]);
    return this.#on(
      inc.row,
      (c) => this.#using(c, lockId, () => c.call('increment', [this.name, inc, waitMs], limits)),
      limits.signal,
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
    await this.#on(
      mutations.row,
      (c) =>
        this.#using(c, lockId, () => c.call('mutateRow', [this.name, mutations, waitMs], limits)),
      limits.signal,
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
    // One region's rows (the server refuses rows of two): sent to the first row's.
    await this.#on(
      mutations[0]?.row,
      (c) => c.call('mutateRows', [this.name, mutations, waitMs], limits),
      limits.signal,
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
    const { waitMs, limits } = this.#limits(undefined, options, 'batch', sent);
    const errors = await this.#batch(sent, waitMs, limits, 1);
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

  /**
   * One batch call per server (one in all without a fleet), the statuses back in the
   * mutations' order; on a fleet, the entries a server refused with `NOT_SERVING_REGION`
   * (nothing of them applied) are sent again after the map is read again.
   */
  async #batch(
    sent: readonly (Put | Delete)[],
    waitMs: number | undefined,
    limits: CallLimits,
    attempt: number,
  ): Promise<(Error | null)[]> {
    const router = this.#router;
    const out: (Error | null)[] = new Array(sent.length).fill(null);
    const parts = new Map<TableClient, number[]>();
    for (const [at, m] of sent.entries()) {
      let client = this.#client;
      if (router !== undefined) {
        try {
          const route = router.route(this.name, m.row);
          client = (route instanceof Promise ? await route : route).client;
        } catch (err) {
          out[at] = err as Error;
          continue;
        }
      }
      const part = parts.get(client) ?? [];
      part.push(at);
      parts.set(client, part);
    }
    await Promise.all(
      [...parts].map(async ([c, at]) => {
        const errors = await c.call(
          'batch',
          [this.name, at.map((i) => sent[i] as Put | Delete), waitMs],
          limits,
        );
        if (errors.length !== at.length) {
          throw new ProtocolError(
            `The server sent ${errors.length} batch statuses for ${at.length} mutations`,
          );
        }
        errors.forEach((e, k) => {
          out[at[k] as number] = e ?? null;
        });
      }),
    );
    const refused = out.flatMap((e, at) => (e instanceof NotServingRegionError ? [at] : []));
    if (router === undefined || refused.length === 0 || attempt >= MAX_ROUTE_TRIES) return out;
    await router.refresh(this.name, attempt);
    const again = await this.#batch(
      refused.map((at) => sent[at] as Put | Delete),
      waitMs,
      limits,
      attempt + 1,
    );
    again.forEach((e, k) => {
      out[refused[k] as number] = e;
    });
    return out;
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
  async #using<T>(c: TableClient, lockId: string | undefined, call: () => Promise<T>): Promise<T> {
    if (lockId === undefined) return call();
    const { locks } = c;
    let lock = locks.get(lockId);
    const router = this.#router;
    if (lock === undefined && router !== undefined) {
      // Held through another server's session: the row's region is served here now, so the
      // lock moves here first (its old server closed the region, or went away).
      const found = router.handleOf(lockId);
      if (found !== undefined) {
        found.lock.markMoving();
        await router.relocate(found.lock, found.from, false);
        lock = locks.get(lockId);
        if (lock === undefined && router.handleOf(lockId) !== undefined) {
          // It stayed with (or went to) another server: the call is routed again.
          throw new NotServingRegionError(
            `Row lock ${lockId} is held through another server of the fleet: routed again`,
          );
        }
      }
    }
    if (lock?.moving === true && router !== undefined) {
      // Its region closed at this server (a `lockMoved`) and may be served here again: the
      // lock is adopted where the region is now before a call carries it, which that server
      // would refuse as unknown until then.
      await router.relocate(lock, locks, false);
      if (locks.get(lockId) === undefined && router.handleOf(lockId) !== undefined) {
        throw new NotServingRegionError(`Row lock ${lockId} moved with its region: routed again`);
      }
    }
    if (lock === undefined && locks.isGone(lockId)) {
      throw new UnknownRowLockError(
        `Unknown row lock ${lockId}: never granted, already released, or its lease expired`,
      );
    }
    lock?.ensureValid();
    const sentAt = c.now();
    let value: T;
    try {
      value = await call();
    } catch (err) {
      // Refused as unknown because its region closed there while the call was on its way (the
      // `lockMoved` came first on the connection): nothing was applied; it is routed again and
      // waits for the lock's adoption.
      if (lock?.moving === true && (err as { code?: unknown }).code === 'UNKNOWN_ROW_LOCK') {
        throw new NotServingRegionError(
          `Row lock ${lockId} is moving with its region: routed again`,
          { cause: err },
        );
      }
      throw err;
    }
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

/**
 * The table `name` of `tables`, made by `make` at its first use (no round trip: a missing
 * table fails its first call, `TABLE_NOT_FOUND`); a name that is not a non-empty string is
 * refused at once.
 */
export function tableNamed(
  tables: Map<string, RemoteTable>,
  name: string,
  make: () => RemoteTable,
): RemoteTable {
  if (typeof name !== 'string' || name.length === 0) {
    throw new InvalidArgumentError(
      `A table name must be a non-empty string, got ${describeValue(name)}`,
    );
  }
  let table = tables.get(name);
  if (table === undefined) {
    table = make();
    tables.set(name, table);
  }
  return table;
}
