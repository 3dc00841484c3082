import {
  InvalidArgumentError,
  LimitExceededError,
  LockLostError,
  UnknownRowLockError,
  UnsupportedOperationError,
} from '../core/errors.js';
import { describeValue } from '../core/options.js';
import { callContext, type RowCallContext } from '../rows/call-context.js';
import type { CallOptions, LockRowOptions } from '../rows/call-options.js';
import { lostToRegionClose } from '../rows/region-row-locks.js';
import type { Result } from '../rows/result.js';
import { checkRow } from '../rows/row-input.js';
import type { RowLock } from '../rows/row-lock.js';
import {
  type ArgScope,
  CALLS,
  type CallSpec,
  decodeCallArgs,
  type Grant,
  type HandlerArgs,
  type HandlerResult,
  type Method,
} from '../wire/calls.js';
import type { Slot } from './lane.js';
import type { ScannerRegistry } from './scanner-registry.js';
import { unknownScanner } from './scanner-registry.js';
import type { ServerStatus } from './server-status.js';
import type { Session } from './session.js';
import type { SessionRegistry } from './session-registry.js';
import type { TableCatalog } from './table-catalog.js';
import type { TableRegions } from './table-regions.js';

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

/** Each method's handler, typed from the call table: checked arguments in, a result out. */
type Handlers = {
  [M in Method]: (
    args: HandlerArgs<M>,
    ctx: CallContext,
  ) => HandlerResult<M> | Promise<HandlerResult<M>>;
};

/** A call's spec and handler with the method forgotten (the table pairs them by method). */
type AnySpec = CallSpec<unknown[], unknown[], unknown, unknown>;
type AnyHandler = (args: unknown[], ctx: CallContext) => unknown;

/**
 * The only place that knows both the wire and the region: each method's arguments are decoded
 * by the call table (hostile values are refused by the same checks as in process), row lock
 * ids are resolved against the calling session, and every lock wait runs with the session as
 * the owner (so deadlock detection works across sessions) and the call's signal.
 */
export class Dispatcher {
  readonly #catalog: TableCatalog;
  readonly #sessions: SessionRegistry;
  readonly #scanners: ScannerRegistry;
  readonly #limits: DispatchLimits;
  readonly #lockLeaseMs: number;
  readonly #status: () => ServerStatus;
  /** The address this server names itself by in a region map (`host:port`). */
  readonly #self: () => string;
  readonly #notifyLost: (session: Session, lockId: string, reason: Error) => void;
  readonly #handlers: Handlers;
  readonly #check: () => void;
  readonly #onFenced: (err: unknown) => void;
  readonly #records: LockRecords | undefined;
  /** Each session's argument scope, made on its first call. */
  readonly #scopes = new WeakMap<Session, ArgScope>();

  constructor(options: {
    catalog: TableCatalog;
    sessions: SessionRegistry;
    scanners: ScannerRegistry;
    limits: DispatchLimits;
    lockLeaseMs: number;
    status: () => ServerStatus;
    self: () => string;
    notifyLost: (session: Session, lockId: string, reason: Error) => void;
    /** Run before every call but `status`: throws (`NOT_MASTER`) once mastership is over. */
    check?: (() => void) | undefined;
    /** A call failed with `FENCED`: the storage refused this master (a newer one exists). */
    onFenced?: ((err: unknown) => void) | undefined;
    /** Where grants and releases are recorded (durable sessions); absent: in memory only. */
    records?: LockRecords | undefined;
  }) {
    this.#records = options.records;
    this.#check = options.check ?? (() => undefined);
    this.#onFenced = options.onFenced ?? (() => undefined);
    this.#catalog = options.catalog;
    this.#sessions = options.sessions;
    this.#scanners = options.scanners;
    this.#limits = options.limits;
    this.#lockLeaseMs = options.lockLeaseMs;
    this.#status = options.status;
    this.#self = options.self;
    this.#notifyLost = options.notifyLost;
    this.#handlers = {
      get: ([t, get]) => t.regions.get(get),
      put: ([t, put, wait], ctx) => t.regions.put(put, this.#opts(ctx, wait)),
      delete: ([t, del, wait], ctx) => t.regions.delete(del, this.#opts(ctx, wait)),
      checkAndPut: ([t, row, family, qualifier, expected, put, wait], ctx) =>
        t.regions.checkAndPut(row, family, qualifier, expected, put, this.#opts(ctx, wait)),
      checkAndDelete: ([t, row, family, qualifier, expected, del, wait], ctx) =>
        t.regions.checkAndDelete(row, family, qualifier, expected, del, this.#opts(ctx, wait)),
      increment: ([t, inc, wait], ctx) => t.regions.increment(inc, this.#opts(ctx, wait)),
      mutateRow: ([t, mutations, wait], ctx) =>
        t.regions.mutateRow(mutations, this.#opts(ctx, wait)),
      mutateRows: ([t, mutations, wait], ctx) =>
        t.regions.mutateRows(mutations, this.#opts(ctx, wait)),
      batch: ([t, mutations, wait], ctx) => t.regions.batch(mutations, this.#opts(ctx, wait)),
      openScanner: ([t, scan, count], ctx) => {
        const scanner = this.#scanners.open(ctx.session, t.name, t.regions.scan(scan));
        return this.#nextRows(scanner.id, count, ctx).then(({ rows, more }) => ({
          scanner: more ? scanner.id : null,
          rows,
        }));
      },
      nextRows: ([id, count], ctx) => this.#nextRows(id, count, ctx),
      lockRow: (args, ctx) => this.#lockRow(args, ctx),
      tryLockRow: async ([t, row, renew], ctx) => {
        this.#checkLockRoom(ctx.session);
        const lock = await t.regions.tryLockRow(row, { owner: ctx.session, renew });
        return lock === null ? null : this.#hold(ctx, t.name, lock);
      },
      adoptLock: ([t, row, lockId, holderId], ctx) => {
        const adopt = this.#records?.adopt;
        if (adopt === undefined) {
          throw new UnknownRowLockError(
            `Unknown row lock ${lockId}: this server keeps no locks for their holders to adopt (only a fleet member with durable sessions does)`,
          );
        }
        this.#checkLockRoom(ctx.session);
        const lock = adopt.call(
          this.#records,
          ctx.session,
          t.name,
          t.regions,
          checkRow(row),
          lockId,
          holderId,
        );
        return this.#hold(ctx, t.name, lock);
      },
      unlockRow: ([t, lockId], ctx) => {
        // The decoder checked that the session holds it (on this table).
        const { lock } = ctx.session.locks.get(lockId) as { lock: RowLock };
        ctx.session.removeLock(lockId);
        const unlocked = t.regions.unlockRow(lock);
        const records = this.#records;
        if (records === undefined) return unlocked;
        // An unlock is answered once it is recorded: one the client saw done stays done. The
        // record's sync is a wait: the handler is given back meanwhile.
        ctx.waiting();
        return unlocked.then(() => records.released(lockId));
      },
      renewLease: ([t, lockId], ctx) =>
        t.regions.renewLease((ctx.session.locks.get(lockId) as { lock: RowLock }).lock),
      closeScanner: ([id], ctx) => {
        const scanner = this.#scanners.get(ctx.session, id);
        if (scanner !== undefined) this.#scanners.close(scanner);
      },
      ping: () => undefined,
      // Answered by the connection, in the order of its frames (see Connection).
      openSession: () => {
        throw new UnsupportedOperationError('openSession is answered by the connection');
      },
      resumeSession: () => {
        throw new UnsupportedOperationError('resumeSession is answered by the connection');
      },
      closeSession: (_args, ctx) => {
        this.#sessions.end(ctx.session, sessionClosed(ctx.session));
      },
      createTable: ([descriptor]) => this.#catalog.create(descriptor),
      listTables: async () => {
        await this.#catalog.current();
        return this.#catalog.list();
      },
      describeTable: async ([name]) => {
        await this.#catalog.current();
        return this.#catalog.describe(name);
      },
      dropTable: ([name]) => this.#catalog.drop(name),
      splitTable: ([name, key]) => this.#catalog.split(name, key),
      regionMap: ([name]) => {
        const self = this.#self();
        return {
          self,
          regions: this.#catalog
            .regions(name)
            .ranges()
            .map(({ startKey, endKey, region, server }) => ({
              startKey,
              endKey,
              server: region === undefined ? (server ?? null) : self,
            })),
        };
      },
      status: () => this.#status(),
    };
  }

  /**
   * Runs one call; resolves with the wire value of its result. A master's calls (all but
   * `status`) first check the mastership (no I/O); a `FENCED` refusal is reported before it
   * is passed on.
   */
  call(method: Method, raw: readonly unknown[], ctx: CallContext): Promise<unknown> {
    // No async function (its frame and await cost more than a fast call's own work): a
    // synchronous throw becomes a rejection here, and only a rejection is looked at.
    const spec = CALLS[method] as AnySpec;
    let answer: unknown;
    try {
      if (method !== 'status') this.#check();
      const args = decodeCallArgs(method, raw, this.#scope(ctx.session));
      answer = (this.#handlers[method] as AnyHandler)(args, ctx);
    } catch (err) {
      this.#noteFenced(err);
      return Promise.reject(err);
    }
    return answer instanceof Promise
      ? answer.then(spec.encodeResult, this.#rethrowFenced)
      : Promise.resolve(spec.encodeResult(answer));
  }

  /** How the call table's decoders find tables and this session's locks. */
  #scope(session: Session): ArgScope {
    let scope = this.#scopes.get(session);
    if (scope === undefined) {
      const owned = (table: string, lockId: unknown) => this.#owned(table, lockId, session);
      scope = {
        table: (name) => this.#catalog.resolve(name),
        owned,
        locks: (table) => (lockId) => ({ lockId: owned(table, lockId) }),
      };
      this.#scopes.set(session, scope);
    }
    return scope;
  }

  #noteFenced(err: unknown): void {
    if ((err as { code?: unknown } | null)?.code === 'FENCED') this.#onFenced(err);
  }

  readonly #rethrowFenced = (err: unknown): never => {
    this.#noteFenced(err);
    throw err;
  };

  /**
   * The region's options for a call: the session owns the wait; `wait` is the wire's waitMs.
   * The call itself is its context: its signal is made only if it waits for a row, and a wait
   * (for a row, or for its write's fsync) gives its handler back.
   */
  #opts(ctx: CallContext, waitMs: number | undefined): CallOptions {
    const options: CallOptions = { owner: ctx.session, [callContext]: ctx };
    if (waitMs !== undefined) options.waitMs = waitMs;
    return options;
  }

  /** The id, if the session holds that lock on that table; `UNKNOWN_ROW_LOCK` otherwise. */
  #owned(table: string, lockId: unknown, session: Session): string {
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

  #lockRow([t, row, waitMs, renew]: HandlerArgs<'lockRow'>, ctx: CallContext): Promise<Grant> {
    const { session } = ctx;
    this.#checkLockRoom(session);
    if (session.lockCalls >= this.#limits.maxWaitersPerSession) {
      throw new LimitExceededError(
        `Session ${session.label} has ${session.lockCalls} lockRow calls in flight; the limit is ${this.#limits.maxWaitersPerSession}`,
      );
    }
    const options: LockRowOptions = this.#opts(ctx, waitMs);
    options.renew = renew;
    session.lockCalls++;
    let granted: Promise<RowLock>;
    try {
      granted = t.regions.lockRow(row, options);
    } catch (err) {
      session.lockCalls--;
      throw err;
    }
    return granted.then(
      (lock) => {
        session.lockCalls--;
        return this.#hold(ctx, t.name, lock);
      },
      (err: unknown) => {
        session.lockCalls--;
        throw err;
      },
    );
  }

  /**
   * Records a granted lock as the session's; the session may have ended while it waited.
   * With durable sessions the grant is answered once it is recorded; a grant that cannot be
   * recorded is released and the call fails.
   */
  #hold(ctx: CallContext, table: string, lock: RowLock): Grant | Promise<Grant> {
    const { session } = ctx;
    if (session.ended) {
      lock.close().catch(() => undefined);
      throw ended(session);
    }
    this.adopt(session, table, lock);
    // A lock that renews itself has no lease of its own: it ends with the session.
    const leaseMs = lock.leaseRemainingMs === Number.POSITIVE_INFINITY ? 0 : this.#lockLeaseMs;
    const grant: Grant = { lockId: lock.lockId, token: lock.token, leaseMs };
    const records = this.#records;
    if (records === undefined) return grant;
    // Waiting for the record's sync gives the handler back (a handler held through a sync
    // would cap the group commit of grants at the number of handlers).
    ctx.waiting();
    return records.granted(session, table, lock).then(
      () => {
        if (session.ended) throw ended(session);
        if (records.survivesRegionClose === true && session.locks.get(lock.lockId)?.lock !== lock) {
          // Its region closed here while the grant was recorded (it moved on, the record
          // with it): the client is told after the grant, so it adopts the lock where it is.
          setImmediate(() => session.sink?.notify('lockMoved', [lock.lockId]));
        }
        return grant;
      },
      (err: unknown) => {
        if (session.removeLock(lock.lockId) !== undefined) lock.close().catch(() => undefined);
        throw err;
      },
    );
  }

  /**
   * Makes `lock` the session's: a use of its id by the session is accepted, and its loss (its
   * lease ran out, its table was dropped) is told to the session's client and recorded.
   */
  adopt(session: Session, table: string, lock: RowLock): void {
    session.addLock(lock.lockId, { table, lock });
    session.onLockLost = this.#lockLost;
  }

  /** A lock of `session` was lost (see {@link adopt}); one function for every lock. */
  readonly #lockLost = (session: Session, lock: RowLock, reason: Error): void => {
    if (session.locks.get(lock.lockId)?.lock !== lock) return;
    session.removeLock(lock.lockId);
    const records = this.#records;
    if (records?.survivesRegionClose === true && lostToRegionClose(reason)) {
      records.movedAway?.(lock.lockId);
      session.sink?.notify('lockMoved', [lock.lockId]);
      return;
    }
    this.#notifyLost(session, lock.lockId, reason);
    records?.released(lock.lockId).catch(() => undefined);
  };

  async #nextRows(
    id: unknown,
    count: number | undefined,
    ctx: CallContext,
  ): Promise<{ rows: Result[]; more: boolean }> {
    const scanner = this.#scanners.get(ctx.session, id);
    if (scanner === undefined) throw unknownScanner(id);
    if (scanner.busy)
      throw new InvalidArgumentError('nextRows: a nextRows call on this scanner is still running');
    const limit = Math.min(count ?? this.#limits.maxScanRows, this.#limits.maxScanRows);
    scanner.busy = true;
    const rows: Result[] = [];
    let bytes = 0;
    try {
      while (rows.length < limit && bytes < this.#limits.maxScanBytes) {
        const next = await scanner.rows.next();
        if (next.done === true) {
          this.#scanners.close(scanner);
          return { rows, more: false };
        }
        rows.push(next.value);
        bytes += resultBytes(next.value);
      }
      return { rows, more: true };
    } catch (err) {
      this.#scanners.close(scanner);
      throw err;
    } finally {
      scanner.busy = false;
    }
  }
}

function resultBytes(result: Result): number {
  let n = result.row.length;
  for (const c of result.cells) n += c.value.length + c.qualifier.length + c.family.length + 16;
  return n;
}

/**
 * Where a server with durable sessions records its grants and releases (see
 * `SessionJournal`); each resolves once the record is durable.
 */
export interface LockRecords {
  granted(session: Session, table: string, lock: RowLock): Promise<void>;
  released(lockId: string): Promise<void>;
  /**
   * Set where a lock outlives its region's closing here (a fleet): such a loss is not recorded
   * as a release (`movedAway` instead), and the client is told `lockMoved`, not `lockLost`.
   */
  readonly survivesRegionClose?: boolean;
  movedAway?(lockId: string): void;
  /** Gives a lock kept for its holder to `session` (see `FleetLocks.adopt`); absent: none kept. */
  adopt?(
    session: Session,
    table: string,
    regions: TableRegions,
    row: string,
    lockId: string | null,
    holderId: string,
  ): RowLock;
}

function ended(session: Session): LockLostError {
  return new LockLostError(`Session ${session.label} ended while the lock was being granted`, {
    code: 'SESSION_EXPIRED',
  });
}

function sessionClosed(session: Session): LockLostError {
  return new LockLostError(`Session ${session.label} was closed by its client`, {
    code: 'LOCK_LOST',
  });
}
