import {
  InvalidArgumentError,
  LimitExceededError,
  LockLostError,
  UnknownRowLockError,
} from '../core/errors.js';
import { describeValue } from '../core/options.js';
import { callContext, type RowCallContext } from '../rows/call-context.js';
import type { CallOptions } from '../rows/call-options.js';
import type { Region } from '../rows/region.js';
import type { Result } from '../rows/result.js';
import type { RowLock } from '../rows/row-lock.js';
import type { Method } from '../wire/messages.js';
import {
  bytes,
  decodeDelete,
  decodeGet,
  decodeIncrement,
  decodeMutation,
  decodePut,
  decodeRowMutations,
  decodeScan,
  encodeResult,
  type LockResolver,
  wireInteger,
} from '../wire/rows-codec.js';
import { toWireError } from '../wire/wire-error.js';
import type { Slot } from './lane.js';
import type { ScannerRegistry } from './scanner-registry.js';
import { unknownScanner } from './scanner-registry.js';
import type { Session } from './session.js';
import type { SessionRegistry } from './session-registry.js';
import { checkTableDescriptor, type TableCatalog } from './table-catalog.js';

/** Per-session limits the dispatcher enforces (the connection enforces calls in flight). */
export interface DispatchLimits {
  maxLocksPerSession: number;
  maxWaitersPerSession: number;
  /** Rows a `nextRows` returns at most, and the byte budget of one batch. */
  maxScanRows: number;
  maxScanBytes: number;
}

/** One call as the dispatcher sees it. */
export interface CallContext extends RowCallContext {
  readonly session: Session;
  /** The call's handler; given back while the call waits (`waiting()`, see `Lane`). */
  readonly slot: Slot;
  /** Aborts when the client cancels the call, its connection closes, or its session ends. */
  readonly signal: AbortSignal;
  /** Whether {@link signal} has aborted, without making the signal (see `call-context.ts`). */
  readonly aborted: boolean;
}

type Handler = (args: unknown[], ctx: CallContext) => unknown;

/**
 * The only place that knows both the wire and the region: each method's arguments are decoded
 * (hostile values are refused by the same checks as in process), row lock ids are resolved
 * against the calling session, and every lock wait runs with the session as the owner (so
 * deadlock detection works across sessions) and the call's signal.
 */
export class Dispatcher {
  readonly #catalog: TableCatalog;
  readonly #sessions: SessionRegistry;
  readonly #scanners: ScannerRegistry;
  readonly #limits: DispatchLimits;
  readonly #lockLeaseMs: number;
  readonly #status: () => unknown;
  readonly #notifyLost: (session: Session, lockId: string, reason: Error) => void;
  readonly #handlers: Record<Method, Handler>;
  readonly #check: () => void;
  readonly #onFenced: (err: unknown) => void;

  constructor(options: {
    catalog: TableCatalog;
    sessions: SessionRegistry;
    scanners: ScannerRegistry;
    limits: DispatchLimits;
    lockLeaseMs: number;
    status: () => unknown;
    notifyLost: (session: Session, lockId: string, reason: Error) => void;
    /** Run before every call but `status`: throws (`NOT_MASTER`) once mastership is over. */
    check?: (() => void) | undefined;
    /** A call failed with `FENCED`: the storage refused this master (a newer one exists). */
    onFenced?: ((err: unknown) => void) | undefined;
  }) {
    this.#check = options.check ?? (() => undefined);
    this.#onFenced = options.onFenced ?? (() => undefined);
    this.#catalog = options.catalog;
    this.#sessions = options.sessions;
    this.#scanners = options.scanners;
    this.#limits = options.limits;
    this.#lockLeaseMs = options.lockLeaseMs;
    this.#status = options.status;
    this.#notifyLost = options.notifyLost;
    this.#handlers = {
      get: (a, ctx) =>
        this.#region(a[0])
          .get(decodeGet(a[1], this.#locks(a[0], ctx)))
          .then(encodeResult),
      put: (a, ctx) =>
        this.#region(a[0])
          .put(decodePut(a[1], this.#locks(a[0], ctx)), this.#opts(ctx, a[2]))
          .then(nil),
      delete: (a, ctx) =>
        this.#region(a[0])
          .delete(decodeDelete(a[1], this.#locks(a[0], ctx)), this.#opts(ctx, a[2]))
          .then(nil),
      checkAndPut: (a, ctx) => {
        const [table, row, family, qualifier, expected, put] = a;
        return this.#region(table).checkAndPut(
          bytes(row, 'row'),
          family as string,
          bytes(qualifier, 'qualifier'),
          expected === null || expected === undefined ? null : bytes(expected, 'expected value'),
          decodePut(put, this.#locks(table, ctx)),
          this.#opts(ctx, a[6]),
        );
      },
      checkAndDelete: (a, ctx) => {
        const [table, row, family, qualifier, expected, del] = a;
        return this.#region(table).checkAndDelete(
          bytes(row, 'row'),
          family as string,
          bytes(qualifier, 'qualifier'),
          expected === null || expected === undefined ? null : bytes(expected, 'expected value'),
          decodeDelete(del, this.#locks(table, ctx)),
          this.#opts(ctx, a[6]),
        );
      },
      increment: (a, ctx) =>
        this.#region(a[0])
          .increment(decodeIncrement(a[1], this.#locks(a[0], ctx)), this.#opts(ctx, a[2]))
          .then(encodeResult),
      mutateRow: (a, ctx) =>
        this.#region(a[0])
          .mutateRow(decodeRowMutations(a[1], this.#locks(a[0], ctx)), this.#opts(ctx, a[2]))
          .then(nil),
      // Lock ids are left unresolved: the region refuses any (INVALID_ARGUMENT), as in process.
      mutateRows: (a, ctx) =>
        this.#region(a[0])
          .mutateRows(
            this.#mutations(a[1], a[0], ctx, (lockId) => ({ lockId })),
            this.#opts(ctx, a[2]),
          )
          .then(nil),
      batch: async (a, ctx) => {
        const statuses = await this.#region(a[0]).batch(
          this.#mutations(a[1], a[0], ctx),
          this.#opts(ctx, a[2]),
        );
        return statuses.map((s) => (s.ok ? null : errorEntry(s.error)));
      },
      lockRow: (a, ctx) => this.#lockRow(a, ctx),
      tryLockRow: async (a, ctx) => {
        const region = this.#region(a[0]);
        this.#checkLockRoom(ctx.session);
        const lock = await region.tryLockRow(bytes(a[1], 'row'), { owner: ctx.session });
        return lock === null ? null : this.#hold(ctx.session, a[0] as string, lock);
      },
      unlockRow: (a, ctx) => {
        const lockId = this.#owned(a[0], a[1], ctx.session);
        ctx.session.removeLock(lockId);
        return this.#region(a[0]).unlockRow(lockId).then(nil);
      },
      renewLease: (a, ctx) =>
        this.#region(a[0])
          .renewLease(this.#owned(a[0], a[1], ctx.session))
          .then(nil),
      openScanner: (a, ctx) => {
        const table = a[0] as string;
        const region = this.#region(table);
        const scanner = this.#scanners.open(ctx.session, table, region.scan(decodeScan(a[1])));
        return this.#nextRows(scanner.id, a[2], ctx).then(([rows, more]) => [
          more ? scanner.id : null,
          rows,
        ]);
      },
      nextRows: async (a, ctx) => {
        const [rows, more] = await this.#nextRows(a[0], a[1], ctx);
        return [rows, more];
      },
      closeScanner: (a, ctx) => {
        const scanner = this.#scanners.get(ctx.session, a[0]);
        if (scanner !== undefined) this.#scanners.close(scanner);
        return null;
      },
      ping: () => null,
      closeSession: (_a, ctx) => {
        this.#sessions.end(ctx.session, sessionClosed(ctx.session));
        return null;
      },
      createTable: async (a) => {
        const descriptor = await this.#catalog.create(checkTableDescriptor(a[0], a[1], a[2]));
        return describeTable(descriptor);
      },
      listTables: () => this.#catalog.list(),
      describeTable: (a) => describeTable(this.#catalog.describe(a[0])),
      dropTable: async (a) => {
        await this.#catalog.drop(a[0]);
        return null;
      },
      status: () => this.#status(),
    };
  }

  /**
   * Runs one call; resolves with the wire value of its result. A master's calls (all but
   * `status`) first check the mastership (no I/O); a `FENCED` refusal is reported before it
   * is passed on.
   */
  call(method: Method, args: unknown[], ctx: CallContext): Promise<unknown> {
    // No async function (its frame and await cost more than a fast call's own work): a
    // synchronous throw becomes a rejection here, and only a rejection is looked at.
    if (method !== 'status') {
      try {
        this.#check();
      } catch (err) {
        return Promise.reject(err);
      }
    }
    let answer: unknown;
    try {
      answer = this.#handlers[method](args, ctx);
    } catch (err) {
      this.#noteFenced(err);
      return Promise.reject(err);
    }
    return answer instanceof Promise ? answer.catch(this.#rethrowFenced) : Promise.resolve(answer);
  }

  #noteFenced(err: unknown): void {
    if ((err as { code?: unknown } | null)?.code === 'FENCED') this.#onFenced(err);
  }

  readonly #rethrowFenced = (err: unknown): never => {
    this.#noteFenced(err);
    throw err;
  };

  #region(table: unknown): Region {
    return this.#catalog.region(table);
  }

  /**
   * The region's options for a call: the session owns the wait; `wait` is the wire's waitMs.
   * The call itself is its context: its signal is made only if it waits for a row, and a wait
   * (for a row, or for its write's fsync) gives its handler back.
   */
  #opts(ctx: CallContext, wait?: unknown): CallOptions {
    const options: CallOptions = { owner: ctx.session, [callContext]: ctx };
    if (wait !== null && wait !== undefined) options.waitMs = waitArg(wait);
    return options;
  }

  #mutations(
    list: unknown,
    table: unknown,
    ctx: CallContext,
    resolve: LockResolver = this.#locks(table, ctx),
  ) {
    if (!Array.isArray(list))
      throw new InvalidArgumentError('Malformed mutation list: expected an array');
    return list.map((m) => decodeMutation(m, resolve));
  }

  /** Resolves lock ids of mutations against the calling session. */
  #locks(table: unknown, ctx: CallContext): LockResolver {
    return (lockId) => {
      this.#owned(table, lockId, ctx.session);
      return { lockId };
    };
  }

  /** The id, if the session holds that lock on that table; `UNKNOWN_ROW_LOCK` otherwise. */
  #owned(table: unknown, lockId: unknown, session: Session): string {
    const held = typeof lockId === 'string' ? session.locks.get(lockId) : undefined;
    if (held === undefined || held.table !== table) {
      throw new UnknownRowLockError(
        `Unknown row lock ${typeof lockId === 'string' ? lockId : describeValue(lockId)}: never granted to this session, already released, or its lease expired`,
      );
    }
    return lockId as string;
  }

  #checkLockRoom(session: Session): void {
    if (session.locks.size >= this.#limits.maxLocksPerSession) {
      throw new LimitExceededError(
        `Session ${session.label} holds ${session.locks.size} row locks; the limit is ${this.#limits.maxLocksPerSession}`,
      );
    }
  }

  #lockRow(a: unknown[], ctx: CallContext): Promise<unknown> {
    const [table, row, waitMs] = a;
    const region = this.#region(table);
    const { session } = ctx;
    this.#checkLockRoom(session);
    if (session.waiting >= this.#limits.maxWaitersPerSession) {
      throw new LimitExceededError(
        `Session ${session.label} has ${session.waiting} row lock waits in flight; the limit is ${this.#limits.maxWaitersPerSession}`,
      );
    }
    const options = this.#opts(ctx, waitMs);
    const key = bytes(row, 'row');
    session.waiting++;
    let granted: Promise<RowLock>;
    try {
      granted = region.lockRow(key, options);
    } catch (err) {
      session.waiting--;
      throw err;
    }
    return granted.then(
      (lock) => {
        session.waiting--;
        return this.#hold(session, table as string, lock);
      },
      (err: unknown) => {
        session.waiting--;
        throw err;
      },
    );
  }

  /** Records a granted lock as the session's; the session may have ended while it waited. */
  #hold(session: Session, table: string, lock: RowLock): unknown {
    if (session.ended) {
      lock.close().catch(() => undefined);
      throw new LockLostError(`Session ${session.label} ended while the lock was being granted`, {
        code: 'SESSION_EXPIRED',
      });
    }
    session.addLock(lock.lockId, { table, lock });
    lock.once('lost', (reason) => {
      if (session.locks.get(lock.lockId)?.lock === lock) {
        session.removeLock(lock.lockId);
        this.#notifyLost(session, lock.lockId, reason);
      }
    });
    return [lock.lockId, lock.token, this.#lockLeaseMs];
  }

  async #nextRows(id: unknown, count: unknown, ctx: CallContext): Promise<[unknown[], boolean]> {
    const scanner = this.#scanners.get(ctx.session, id);
    if (scanner === undefined) throw unknownScanner(id);
    if (scanner.busy)
      throw new InvalidArgumentError('nextRows: a nextRows call on this scanner is still running');
    const limit =
      count === null || count === undefined
        ? this.#limits.maxScanRows
        : wireInteger(count, 'row count');
    if (limit < 1)
      throw new InvalidArgumentError(`nextRows: the row count must be at least 1, got ${limit}`);
    scanner.busy = true;
    const rows: unknown[] = [];
    let bytes = 0;
    try {
      while (
        rows.length < Math.min(limit, this.#limits.maxScanRows) &&
        bytes < this.#limits.maxScanBytes
      ) {
        const next = await scanner.rows.next();
        if (next.done === true) {
          this.#scanners.close(scanner);
          return [rows, false];
        }
        rows.push(encodeResult(next.value));
        bytes += resultBytes(next.value);
      }
      return [rows, true];
    } catch (err) {
      this.#scanners.close(scanner);
      throw err;
    } finally {
      scanner.busy = false;
    }
  }
}

/** A waitMs from the wire: milliseconds >= 0, or -1 for forever. */
function waitArg(value: unknown): number {
  const ms = wireInteger(value, 'waitMs');
  if (ms === -1) return Number.POSITIVE_INFINITY;
  if (ms < 0) throw new InvalidArgumentError(`waitMs must be >= 0 or -1 (forever), got ${ms}`);
  return ms;
}

function nil(): null {
  return null;
}

function resultBytes(result: Result): number {
  let n = result.row.length;
  for (const c of result.cells) n += c.value.length + c.qualifier.length + c.family.length + 16;
  return n;
}

/** A failed batch entry: its code and message, as an ERROR frame carries them. */
function errorEntry(error: unknown): unknown[] {
  const { code, message } = toWireError(error);
  return [code, message];
}

function describeTable(d: {
  name: string;
  families: { name: string; maxVersions: number }[];
  timestampOnArrival: boolean;
}) {
  return {
    name: d.name,
    families: d.families.map((f) => ({ name: f.name, maxVersions: f.maxVersions })),
    timestampOnArrival: d.timestampOnArrival,
  };
}

function sessionClosed(session: Session): LockLostError {
  return new LockLostError(`Session ${session.label} was closed by its client`, {
    code: 'LOCK_LOST',
  });
}
