import { EventEmitter } from 'node:events';
import { type Clock, systemClock } from '../core/clock.js';
import {
  AbortedError,
  AlreadyClosedError,
  DeadlockError,
  InternalError,
  InvalidArgumentError,
  LockTimeoutError,
  UnknownRowLockError,
} from '../core/errors.js';
import { nextFencingToken } from '../core/fencing.js';
import { type HeldLock, heldByCaller } from '../core/held-by-caller.js';
import { checkSignal, checkToken, describeValue } from '../core/options.js';
import { toStringBinary } from './bytes.js';
import { callContext, type RowCallContext } from './call-context.js';
import {
  checkOwner as checkOwnerOption,
  checkWaitMs as checkWaitMsOption,
} from './call-options.js';
import { LeaseQueue } from './lease-queue.js';
import { LOCK_ID, newLockId } from './lock-id.js';
import { checkRowKey } from './row-input.js';
import {
  describeOwner,
  keepsRow,
  type PendingWait,
  RowsCall,
  WaitForGraph,
  type WaitStep,
} from './wait-for-graph.js';

/**
 * Identity of a client or session, compared with `===`. Requests without an owner are
 * anonymous: each is its own owner, holding nothing else while it waits.
 */
export type RowLockOwner = object | string;

/** A request waiting for a row, as {@link RowLockManager.activity} reports it. */
export interface RowLockWaitInfo {
  readonly row: string;
  /** Who waits (`undefined`: an anonymous call). */
  readonly owner: RowLockOwner | undefined;
  /** Who holds the row now (`undefined`: an anonymous call's implicit lock). */
  readonly holder: RowLockOwner | undefined;
  /** An explicit `lockRow` (true) or a mutation's implicit lock (false). */
  readonly explicit: boolean;
  readonly waitedMs: number;
}

/** A deadlock caught: when (wall clock, ms) and the cycle the refused request would have closed. */
export interface DeadlockRecord {
  readonly at: number;
  readonly cycle: readonly WaitStep[];
}

/** See {@link RowLockManager.activity}. */
export interface RowLockActivity {
  readonly waits: RowLockWaitInfo[];
  /** Requests waiting in all (`waits` stops at its limit). */
  readonly waiting: number;
  /** Deadlocks caught (requests refused with `DeadlockError`) since the manager started. */
  readonly deadlocks: number;
  readonly lastDeadlock: DeadlockRecord | undefined;
}

/** What a holder has. */
export interface RowLockGrant {
  /** The row key as a latin1 string (one character per byte; see `rowKey`). */
  readonly row: string;
  /** The id of an explicit lock (see `newLockId` for its format); `undefined` for implicit. */
  readonly lockId: string | undefined;
  /**
   * Fencing token. Tokens increase strictly over all grants of one manager, implicit and
   * explicit, whatever the row, so they increase per row too. Each is
   * `max(previous + 1, wall clock in µs)` ({@link nextFencingToken}), the clock being read on
   * the first grant and every 128th after (reading it costs a third of a fast lock): tokens
   * may lag the clock between readings, which keeps them below any later manager's first.
   */
  readonly token: number;
  /** Who took it (the `owner` of the request), if it named one. */
  readonly owner?: RowLockOwner | undefined;
  /** The user's object for an explicit grant (the Region's RowLock handle); set by the user. */
  handle?: object | undefined;
}

export interface RowLockManagerOptions {
  /** Lease of an explicit lock, renewed by every use (HBase `hbase.regionserver.lease.period`). */
  leasePeriodMs?: number;
  /**
   * Default limit on a wait for a row (HBase 0.94.16 `hbase.rowlock.wait.duration`): then
   * {@link LockTimeoutError}. `Infinity` waits forever (HBase 0.90); 0 never waits.
   */
  rowLockWaitMs?: number;
  /** Leases and wait limits run on `clock.monotonic()`; tokens use `clock.wall()`. */
  clock?: Clock;
  /**
   * Durable tokens: the first grant gets `firstToken` (a value above every token handed out
   * before, e.g. by an earlier process), and before any grant would exceed the reserved
   * ceiling, `reserveTokens(token)` is called to reserve a block from `token` on; it returns
   * the new ceiling (the highest token the block covers). It runs synchronously inside the
   * grant and must not throw (a failure to persist is the reserver's to report).
   */
  firstToken?: number;
  /** The ceiling already reserved when the manager starts (default: none, `firstToken - 1`). */
  tokenCeiling?: number;
  reserveTokens?: (from: number) => number;
}

export interface AcquireOptions {
  /** Cancels the wait with an {@link AbortedError} (cause: the signal's reason). */
  signal?: AbortSignal;
  /** Overrides `rowLockWaitMs` for this call: 0 means try once, `Infinity` wait forever. */
  waitMs?: number;
  /** Who asks; needed for deadlock detection across calls (see {@link RowLockOwner}). */
  owner?: RowLockOwner;
  /**
   * Explicit locks only: `true` grants the lock without a lease — it is held until unlocked or
   * the manager closes, and uses or renewals have nothing to extend. For a holder whose life
   * is bounded otherwise: the process itself, or a server's session, whose own lease ends
   * its locks. Default `false`: the lease of `leasePeriodMs`, renewed by use.
   */
  renew?: boolean;
  /** Internal: the host's view of the call (see `call-context.ts`). */
  [callContext]?: RowCallContext;
}

export interface RowLockManagerEvents {
  /** An explicit lock's lease ran out; the lock is gone and its row handed on. */
  expired: [RowLockGrant];
}

export const DEFAULT_LEASE_PERIOD_MS = 60_000;
export const DEFAULT_ROW_LOCK_WAIT_MS = 30_000;

const HELD = 0;
const RELEASED = 1;
const EXPIRED = 2;

/** A grant. Also the row's entry: a row is in the manager's map exactly while it is held. */
class Hold implements RowLockGrant {
  readonly row: string;
  readonly lockId: string | undefined;
  readonly token: number;
  /** Changed only by `transferRowLock` (an explicit lock adopted by its holder's next session). */
  owner: RowLockOwner | undefined;
  /** Who holds the row for the wait-for graph (see `PendingWait.holds`). */
  holds: RowLockOwner | undefined;
  /** Tells a foreign grant without a map lookup on the release path. */
  readonly manager: RowLockManager;
  /**
   * Lease deadline on the monotonic clock; explicit locks only. `Infinity` for a lock that
   * renews itself (no lease, never in the lease queue).
   */
  deadline: number;
  state: number = HELD;
  /** Requests waiting for this row, handed to the next holder along with the row. */
  queue: WaitQueue | undefined = undefined;
  /** The user's object for an explicit grant (the Region's RowLock handle); set by the user. */
  handle: object | undefined = undefined;

  constructor(
    row: string,
    lockId: string | undefined,
    token: number,
    owner: RowLockOwner | undefined,
    holds: RowLockOwner | undefined,
    manager: RowLockManager,
    deadline: number,
  ) {
    this.row = row;
    this.lockId = lockId;
    this.token = token;
    this.owner = owner;
    this.holds = holds;
    this.manager = manager;
    this.deadline = deadline;
  }
}

/** A row's FIFO of waiting requests, a doubly linked list so that any request leaves in O(1). */
class WaitQueue {
  head: Waiter | undefined = undefined;
  tail: Waiter | undefined = undefined;
}

/** A request waiting for a row; also the listener of its abort signal (no closure). */
class Waiter implements PendingWait {
  readonly row: string;
  /** Who asks, as status pages show it (a multi-row call's caller). */
  readonly owner: RowLockOwner | undefined;
  readonly explicit: boolean;
  readonly renews: boolean;
  readonly call: RowsCall | undefined;
  readonly node: RowLockOwner | undefined;
  readonly holds: RowLockOwner | undefined;
  readonly queue: WaitQueue;
  readonly signal: AbortSignal | undefined;
  readonly onAbort: (waiter: Waiter) => void;
  prev: Waiter | undefined;
  next: Waiter | undefined = undefined;
  /** See `PendingWait.keeper`. */
  keeper: PendingWait | undefined;
  /** Wait limit on the monotonic clock, when finite. */
  deadline = Number.POSITIVE_INFINITY;
  /** When the wait began, on the monotonic clock (status pages show how long it waited). */
  since = 0;
  settled = false;
  resolve: (grant: Hold) => void = noop;
  reject: (err: Error) => void = noop;

  constructor(
    row: string,
    who: Requester,
    queue: WaitQueue,
    signal: AbortSignal | undefined,
    onAbort: (waiter: Waiter) => void,
  ) {
    this.row = row;
    this.owner = who.owner;
    this.explicit = who.explicit;
    this.renews = who.renews === true;
    this.call = who.call;
    this.node = who.call ?? who.owner;
    this.holds = who.explicit ? who.owner : who.call;
    this.queue = queue;
    this.signal = signal;
    this.onAbort = onAbort;
    const tail = queue.tail;
    this.keeper = tail === undefined ? undefined : keepsRow(tail) ? tail : tail.keeper;
    this.prev = tail;
    if (queue.tail === undefined) queue.head = this;
    else queue.tail.next = this;
    queue.tail = this;
  }

  handleEvent(): void {
    this.onAbort(this);
  }

  unlink(): void {
    const queue = this.queue;
    if (this.prev === undefined) queue.head = this.next;
    else this.prev.next = this.next;
    if (this.next === undefined) queue.tail = this.prev;
    else this.next.prev = this.prev;
    this.prev = undefined;
    this.next = undefined;
  }
}

function noop(): void {}

/** A wait from inside `withRowLock` for the row that helper holds: it would never end. */
function selfWait(row: string): DeadlockError {
  return new DeadlockError(
    `Row lock row=${toStringBinary(row)} is held by this call's own withRowLock: waiting for it would never end (pass the lock to the operation: { rowLock: lock })`,
  );
}

/** Who asks for a row, and how it will hold it. */
interface Requester {
  readonly owner: RowLockOwner | undefined;
  readonly explicit: boolean;
  /** An explicit lock without a lease (see `AcquireOptions.renew`). */
  readonly renews?: boolean;
  /** The multi-row call the request belongs to, if any (see {@link RowsCall}). */
  readonly call?: RowsCall | undefined;
}

/**
 * In-process row locks with HBase's contract (0.94.16 semantics) and what HBase lacked.
 *
 * - Explicit locks (`lockRow`/`unlockRow`) carry an unguessable id and a lease of
 *   `leasePeriodMs`, renewed by {@link useLock} and {@link renewLease}. An expired lease frees
 *   the row (the next waiter gets it), emits `expired`, and the id then fails with
 *   {@link UnknownRowLockError}, as do released and unknown ids and an id used on another row.
 * - Implicit locks guard one operation: no id, no lease; the caller releases them. A
 *   single-row operation waits for nothing while it holds its lock, so its lock is no owner's
 *   in the wait-for graph: single-row operations never deadlock, whoever runs them.
 * - One lock per row, explicit or implicit; no re-entrance. Waiters are served in FIFO order.
 *   A wait ends with the grant, {@link LockTimeoutError} after `waitMs` (default
 *   `rowLockWaitMs`), {@link AbortedError} from the signal, or at once with
 *   {@link DeadlockError} when it would close a cycle of owners waiting for each other (see
 *   {@link WaitForGraph}); failing leaves the caller's other locks and waits alone.
 * - Leases and wait limits share two {@link LeaseQueue}s: one timer each, whatever the number of
 *   locks. Lease timers never keep the process alive; a pending wait limit does.
 * - Rows are latin1 strings of 1 to `MAX_ROW_BYTES` characters (see `rowKey`, `checkRowKey`).
 * - Free rows are forgotten: memory is proportional to held locks plus waiting requests.
 *
 * After {@link close}, pending waits reject with {@link AlreadyClosedError}, and so does every
 * later call, except {@link releaseImplicit} (a no-op, so `finally` blocks stay quiet).
 */
export class RowLockManager extends EventEmitter<RowLockManagerEvents> {
  readonly #clock: Clock;
  readonly #leasePeriodMs: number;
  readonly #rowLockWaitMs: number;
  readonly #rows = new Map<string, Hold>();
  readonly #ids = new Map<string, Hold>();
  readonly #leases: LeaseQueue<Hold>;
  readonly #waitLimits: LeaseQueue<Waiter>;
  readonly #graph: WaitForGraph;
  readonly #onAbort = (waiter: Waiter): void => this.#abortWait(waiter);
  readonly #reserveTokens: ((from: number) => number) | undefined;
  /** Highest token reserved durably; Infinity when tokens are not persisted. */
  #tokenCeiling = Number.POSITIVE_INFINITY;
  #lastToken: number | undefined;
  #grants = 0;
  #waiting = 0;
  /** Requests waiting, per owner that has any (for status pages: one owner's waits). */
  readonly #waitingByOwner = new Map<RowLockOwner, number>();
  #deadlocks = 0;
  #lastDeadlock: DeadlockRecord | undefined;
  #closed = false;

  constructor(options: RowLockManagerOptions = {}) {
    super();
    this.#leasePeriodMs = options.leasePeriodMs ?? DEFAULT_LEASE_PERIOD_MS;
    if (
      typeof this.#leasePeriodMs !== 'number' ||
      !Number.isFinite(this.#leasePeriodMs) ||
      this.#leasePeriodMs <= 0
    ) {
      throw new InvalidArgumentError(
        `Invalid leasePeriodMs ${describeValue(this.#leasePeriodMs)}: must be a finite number of milliseconds > 0`,
      );
    }
    this.#rowLockWaitMs = checkWaitMs(
      options.rowLockWaitMs ?? DEFAULT_ROW_LOCK_WAIT_MS,
      'rowLockWaitMs',
    );
    this.#clock = options.clock ?? systemClock;
    this.#reserveTokens = options.reserveTokens;
    if (options.firstToken !== undefined) {
      this.#lastToken = options.firstToken - 1;
      if (this.#reserveTokens !== undefined) {
        this.#tokenCeiling = options.tokenCeiling ?? this.#lastToken;
      }
    }
    this.#leases = new LeaseQueue<Hold>(
      this.#clock,
      (hold) => hold.state === HELD,
      (hold) => this.#expire(hold),
    );
    this.#waitLimits = new LeaseQueue<Waiter>(
      this.#clock,
      (waiter) => !waiter.settled,
      (waiter) => this.#timeOut(waiter),
      true,
    );
    this.#graph = new WaitForGraph((row) => this.#rows.get(row)?.holds);
  }

  get leasePeriodMs(): number {
    return this.#leasePeriodMs;
  }

  get rowLockWaitMs(): number {
    return this.#rowLockWaitMs;
  }

  /** Rows held, explicitly or implicitly. */
  get heldCount(): number {
    return this.#rows.size;
  }

  /**
   * `row` as held by a caller's `withRowLock` (see `held-by-caller.ts`): a wait for it from
   * inside that helper fails at once with `DEADLOCK`.
   */
  heldLockOf(row: string): HeldLock {
    return { target: this, key: row };
  }

  /** Requests waiting for a row. */
  get waitingCount(): number {
    return this.#waiting;
  }

  /**
   * Requests of `owner` waiting for a row: its explicit `lockRow` calls and the implicit locks
   * of its blocked mutations alike (a multi-row call counts once per row it waits for).
   */
  waitingOf(owner: RowLockOwner): number {
    return this.#waitingByOwner.get(owner) ?? 0;
  }

  /**
   * What an operator sees of the row locks now: the requests waiting (at most `limit`, walked
   * row by row, each row's queue in FIFO order, with the row's holder), how many wait in all,
   * and the deadlocks caught since the start (with the last cycle). Costs one pass over the
   * held rows; meant for status pages, not hot paths.
   */
  activity(limit = 100): RowLockActivity {
    if (!Number.isSafeInteger(limit) || limit < 0) {
      throw new InvalidArgumentError(
        `activity limit must be an integer >= 0, got ${describeValue(limit)}`,
      );
    }
    const waits: RowLockWaitInfo[] = [];
    const now = this.#clock.monotonic();
    for (const hold of this.#rows.values()) {
      for (let w = hold.queue?.head; w !== undefined && waits.length < limit; w = w.next) {
        waits.push({
          row: w.row,
          owner: w.owner,
          holder: hold.owner,
          explicit: w.explicit,
          waitedMs: Math.max(0, now - w.since),
        });
      }
      if (waits.length >= limit) break;
    }
    return {
      waits,
      waiting: this.#waiting,
      deadlocks: this.#deadlocks,
      lastDeadlock: this.#lastDeadlock,
    };
  }

  /**
   * Explicit lock (HBase `lockRow`): resolves once `row` is ours, with a lease of
   * `leasePeriodMs`. Waits behind the holder and earlier waiters (see the class comment for how
   * a wait ends). Argument errors reject the promise.
   */
  lockRow(row: string, options?: AcquireOptions): Promise<RowLockGrant> {
    return this.#acquire(row, options, true);
  }

  /** Explicit lock without waiting: `null` when the row is held (then nobody can skip ahead). */
  tryLockRow(row: string, owner?: RowLockOwner, renew = false): RowLockGrant | null {
    this.#checkOpen();
    checkRowKey(row);
    if (owner !== undefined) checkOwner(owner);
    checkRenew(renew);
    if (this.#rows.has(row)) return null;
    return this.#grant(row, owner, true, owner, renew);
  }

  /**
   * Puts back an explicit lock recorded before a restart or a failover (see the server's
   * session journal): same row, id and token, held by `owner`, with a full lease from now
   * (or none for a renewing lock) — a lease never ends because the process holding it
   * changed. Every later grant's token is larger than `token`. Refused (`INVALID_ARGUMENT`) if
   * the row is held or the id is in use: a recovery that meets either has lost track of
   * something and must not create a second holder.
   */
  restoreRowLock(
    row: string,
    lockId: string,
    token: number,
    owner: RowLockOwner | undefined,
    renew: boolean,
  ): RowLockGrant {
    this.#checkOpen();
    checkRowKey(row);
    if (owner !== undefined) checkOwner(owner);
    checkRenew(renew);
    checkToken(token, 'restoreRowLock token');
    if (typeof lockId !== 'string' || !LOCK_ID.test(lockId)) {
      throw new InvalidArgumentError(
        `restoreRowLock: ${describeValue(lockId)} is not a lock id (20 characters of base64url)`,
      );
    }
    if (this.#rows.has(row) || this.#ids.has(lockId)) {
      throw new InvalidArgumentError(
        `restoreRowLock: row=${toStringBinary(row)} is already held (or lock ${lockId} exists): a recorded lock cannot be put back twice`,
      );
    }
    if (this.#lastToken === undefined || token > this.#lastToken) {
      this.#lastToken = token;
      if (token > this.#tokenCeiling)
        this.#tokenCeiling = (this.#reserveTokens as (from: number) => number)(token);
    }
    const deadline = renew ? Number.POSITIVE_INFINITY : this.#leaseDeadline();
    const hold = new Hold(row, lockId, token, owner, owner, this, deadline);
    this.#ids.set(lockId, hold);
    if (!renew) this.#leases.add(hold);
    this.#rows.set(row, hold);
    return hold;
  }

  /**
   * Gives a held explicit lock to another owner, with a full lease from now unless it renews
   * itself: same row, id and token, never free in between (a lock put back by
   * {@link restoreRowLock} for a holder that comes back later under another session).
   * `UNKNOWN_ROW_LOCK` for an id not held.
   */
  transferRowLock(lockId: string, owner: RowLockOwner | undefined, renew: boolean): RowLockGrant {
    this.#checkOpen();
    if (owner !== undefined) checkOwner(owner);
    checkRenew(renew);
    const hold = this.#liveLock(lockId);
    const hadLease = hold.deadline !== Number.POSITIVE_INFINITY;
    hold.owner = owner;
    hold.holds = owner;
    hold.deadline = renew ? Number.POSITIVE_INFINITY : this.#leaseDeadline();
    if (hadLease && renew) this.#leases.remove();
    if (!hadLease && !renew) this.#leases.add(hold);
    return hold;
  }

  /**
   * Releases an explicit lock and hands the row to the first waiter. Never waits. Throws
   * {@link UnknownRowLockError} for an unknown, released or expired id. A lease that ran out
   * so recently that its timer has not fired yet is simply released (the row is freed either
   * way); {@link useLock} and {@link renewLease} do treat it as expired.
   */
  unlockRow(lockId: string): RowLockGrant {
    this.#checkOpen();
    checkLockId(lockId);
    const hold = this.#ids.get(lockId);
    if (hold === undefined) throw unknownLock(lockId);
    this.#ids.delete(lockId);
    hold.state = RELEASED;
    if (hold.deadline !== Number.POSITIVE_INFINITY) this.#leases.remove();
    this.#handOn(hold);
    return hold;
  }

  /**
   * Checks that an explicit lock is still held, without renewing it (a handle's
   * `ensureValid()`): {@link UnknownRowLockError} otherwise; an overdue lease is expired on
   * the spot (emitting `expired`) and rejected.
   */
  checkLock(lockId: string): RowLockGrant {
    this.#checkOpen();
    return this.#liveLock(lockId);
  }

  /**
   * Checks the id an operation on `row` carries and renews its lease (HBase `getLockFromId`,
   * 0.94.16 semantics: an id granted for another row is rejected, like an unknown one).
   */
  useLock(lockId: string, row: string): RowLockGrant {
    this.#checkOpen();
    checkRowKey(row);
    const hold = this.#liveLock(lockId);
    if (hold.row !== row) {
      throw new UnknownRowLockError(
        `Row lock ${lockId} was granted for row=${toStringBinary(hold.row)}, not row=${toStringBinary(row)}`,
      );
    }
    if (hold.deadline !== Number.POSITIVE_INFINITY) hold.deadline = this.#leaseDeadline();
    return hold;
  }

  /** Renews the lease of an explicit lock without an operation (a heartbeat). */
  renewLease(lockId: string): void {
    this.#checkOpen();
    const hold = this.#liveLock(lockId);
    if (hold.deadline !== Number.POSITIVE_INFINITY) hold.deadline = this.#leaseDeadline();
  }

  /**
   * Implicit lock for one operation: the waiting rules of {@link lockRow}, no id, no lease.
   * When the row is free it allocates only the grant and a resolved promise; callers on a hot
   * path try {@link tryAcquireImplicit} first.
   */
  acquireImplicit(row: string, options?: AcquireOptions): Promise<RowLockGrant> {
    return this.#acquire(row, options, false);
  }

  /** Implicit lock without waiting: `null` when the row is held. */
  tryAcquireImplicit(row: string, owner?: RowLockOwner): RowLockGrant | null {
    this.#checkOpen();
    checkRowKey(row);
    if (owner !== undefined) checkOwner(owner);
    if (this.#rows.has(row)) return null;
    return this.#grant(row, owner, false, undefined);
  }

  /**
   * Releases an implicit lock and hands the row to the first waiter. Releasing again is
   * harmless; so is releasing after {@link close}. An explicit grant is an
   * {@link InvalidArgumentError}: those end with {@link unlockRow}.
   */
  releaseImplicit(grant: RowLockGrant): void {
    if (!(grant instanceof Hold)) {
      throw new InvalidArgumentError('releaseImplicit: not a grant of a RowLockManager');
    }
    if (grant.lockId !== undefined) {
      throw new InvalidArgumentError(
        `releaseImplicit: row=${toStringBinary(grant.row)} is held by explicit lock ${grant.lockId}; use unlockRow`,
      );
    }
    if (grant.state !== HELD || this.#closed) return;
    if (grant.manager !== this) {
      throw new InvalidArgumentError('releaseImplicit: the grant belongs to another manager');
    }
    grant.state = RELEASED;
    this.#handOn(grant);
  }

  /**
   * Implicit locks on several rows for one multi-row operation (HBase `mutateRowsWithLocks`):
   * duplicates are merged and rows locked one by one in byte order (latin1 string order), so
   * two such calls never deadlock each other. All or nothing: on failure every lock taken is
   * released and the error is rethrown. `waitMs` bounds the whole call, not each row. The call
   * is a node of its own in the wait-for graph ({@link RowsCall}): it holds rows while it waits
   * for others, and its waits are also its owner's. Resolves with the grants in sorted order.
   */
  async acquireImplicitMany(
    rows: readonly string[],
    options: AcquireOptions = {},
  ): Promise<RowLockGrant[]> {
    this.#checkOpen();
    if (!Array.isArray(rows)) {
      throw new InvalidArgumentError('acquireImplicitMany: rows must be an array of row keys');
    }
    for (const row of rows) checkRowKey(row);
    const waitMs =
      options.waitMs === undefined ? this.#rowLockWaitMs : checkWaitMs(options.waitMs, 'waitMs');
    const owner = options.owner;
    if (owner !== undefined) checkOwner(owner);
    checkSignal(options.signal);
    const context = options[callContext];
    const deferred = options.signal === undefined ? context : undefined;
    if (options.signal?.aborted || deferred?.aborted) {
      throw new AbortedError('Wait for row locks aborted', {
        cause: (options.signal ?? deferred?.signal)?.reason,
      });
    }
    const sorted = [...new Set(rows)].sort();
    const deadline = this.#clock.monotonic() + waitMs;
    const who: Requester = { owner, explicit: false, call: new RowsCall(owner) };
    const grants: RowLockGrant[] = [];
    try {
      for (const row of sorted) {
        this.#checkOpen();
        const holder = this.#rows.get(row);
        grants.push(
          holder === undefined
            ? this.#grant(row, owner, false, who.call)
            : await this.#wait(
                holder,
                who,
                Math.max(0, deadline - this.#clock.monotonic()),
                options.signal ?? deferred?.signal,
                context,
              ),
        );
      }
    } catch (err) {
      for (const grant of grants) this.releaseImplicit(grant);
      throw err;
    }
    return grants;
  }

  /**
   * The token of the current grant of `row`, or `undefined` when the row is free (free rows are
   * forgotten; any later grant has a larger token than every earlier one, on any row).
   */
  newestToken(row: string): number | undefined {
    this.#checkOpen();
    return this.#rows.get(row)?.token;
  }

  /** The token of the explicit lock holding `row` now, or `undefined` (free, or held implicitly). */
  explicitToken(row: string): number | undefined {
    const hold = this.#rows.get(row);
    return hold?.lockId === undefined ? undefined : hold.token;
  }

  /** Whether the explicit lock `lockId` is held (its lease may be overdue but not yet expired). */
  isHeldId(lockId: string): boolean {
    return this.#ids.has(lockId);
  }

  /** Milliseconds left of the explicit lock's lease (0 when overdue), or undefined if not held. */
  leaseRemaining(lockId: string): number | undefined {
    const hold = this.#ids.get(lockId);
    return hold === undefined ? undefined : Math.max(0, hold.deadline - this.#clock.monotonic());
  }

  /** Whether `grant` still holds its row (not released, expired, or closed). */
  isHeld(grant: RowLockGrant): boolean {
    return grant instanceof Hold && grant.state === HELD && grant.manager === this;
  }

  /**
   * Rejects every pending wait with `reason` (explicit and implicit, on every row): a split
   * moves rows to another region, and their waits start again there. Holders keep their rows.
   */
  failWaits(reason: Error): void {
    this.#checkOpen();
    for (const hold of this.#rows.values()) {
      const queue = hold.queue;
      hold.queue = undefined;
      for (let waiter = queue?.head; waiter !== undefined; waiter = queue?.head) {
        this.#finishWait(waiter);
        waiter.reject(reason);
      }
    }
  }

  /**
   * Gives up the explicit locks on rows `>= from` without ending them (no `expired`, no
   * release): a split hands them to the region that takes those rows over, which puts them
   * back with {@link restoreRowLock}. Call after {@link failWaits} and once no implicit lock is
   * held on those rows (the region's writes settled): one left there is a bug, refused.
   */
  detachFrom(from: string): { grant: RowLockGrant; renew: boolean }[] {
    this.#checkOpen();
    const moving = [...this.#rows.values()].filter((hold) => hold.row >= from);
    const implicit = moving.find((hold) => hold.lockId === undefined);
    if (implicit !== undefined) {
      throw new InternalError(
        `A write still holds row=${toStringBinary(implicit.row)} while its region is split`,
      );
    }
    for (const hold of moving) {
      this.#rows.delete(hold.row);
      this.#ids.delete(hold.lockId as string);
      hold.state = RELEASED;
      if (hold.deadline !== Number.POSITIVE_INFINITY) this.#leases.remove();
    }
    return moving.map((grant) => ({ grant, renew: grant.deadline === Number.POSITIVE_INFINITY }));
  }

  /**
   * Makes every later token larger than `floor` (a split: the rows this manager takes over
   * were granted up to their old region's ceiling), reserving durably past it if needed.
   */
  raiseTokens(floor: number): void {
    this.#checkOpen();
    if (this.#lastToken !== undefined && floor <= this.#lastToken) return;
    this.#lastToken = floor;
    if (floor > this.#tokenCeiling)
      this.#tokenCeiling = (this.#reserveTokens as (from: number) => number)(floor);
  }

  /** The highest token this manager may have handed out (its durable ceiling, if kept). */
  get tokenCeiling(): number {
    return Number.isFinite(this.#tokenCeiling) ? this.#tokenCeiling : (this.#lastToken ?? 0);
  }

  /**
   * Stops both timers, rejects every pending wait with {@link AlreadyClosedError} and forgets
   * every lock. Returns the explicit grants it dropped (so their holders can be told). Idempotent.
   */
  close(): RowLockGrant[] {
    if (this.#closed) return [];
    const dropped = [...this.#ids.values()];
    this.#closed = true;
    this.#leases.close();
    this.#waitLimits.close();
    const closed = new AlreadyClosedError('RowLockManager closed while waiting for a row lock');
    for (const hold of this.#rows.values()) {
      hold.state = RELEASED;
      const queue = hold.queue;
      hold.queue = undefined;
      for (let waiter = queue?.head; waiter !== undefined; waiter = queue?.head) {
        this.#finishWait(waiter);
        waiter.reject(closed);
      }
    }
    this.#rows.clear();
    this.#ids.clear();
    return dropped;
  }

  #acquire(
    row: string,
    options: AcquireOptions | undefined,
    explicit: boolean,
  ): Promise<RowLockGrant> {
    let waitMs = this.#rowLockWaitMs;
    let owner: RowLockOwner | undefined;
    let signal: AbortSignal | undefined;
    let deferred: RowCallContext | undefined;
    let context: RowCallContext | undefined;
    let renews = false;
    try {
      this.#checkOpen();
      checkRowKey(row);
      if (options !== undefined) {
        if (options.waitMs !== undefined) waitMs = checkWaitMs(options.waitMs, 'waitMs');
        if (options.renew !== undefined) renews = explicit && checkRenew(options.renew);
        owner = options.owner;
        if (owner !== undefined) checkOwner(owner);
        context = options[callContext];
        // Checked before anything is queued: a waiter whose signal cannot take a listener would
        // be left in the row's queue, breaking the holder's unlock and the wait-limit timer.
        signal = checkSignal(options.signal);
        if (signal === undefined) deferred = context;
        if (signal?.aborted || deferred?.aborted) {
          throw new AbortedError(`Wait for row lock row=${toStringBinary(row)} aborted`, {
            cause: (signal ?? deferred?.signal)?.reason,
          });
        }
      }
    } catch (err) {
      return Promise.reject(err);
    }
    const holder = this.#rows.get(row);
    if (holder === undefined) {
      return Promise.resolve(
        this.#grant(row, owner, explicit, explicit ? owner : undefined, renews),
      );
    }
    // Only a wait needs the signal: a deferred one is made now.
    return this.#wait(
      holder,
      { owner, explicit, renews },
      waitMs,
      signal ?? deferred?.signal,
      context,
    );
  }

  #wait(
    holder: Hold,
    who: Requester,
    waitMs: number,
    signal: AbortSignal | undefined,
    context: RowCallContext | undefined,
  ): Promise<RowLockGrant> {
    const row = holder.row;
    if (waitMs === 0) return Promise.reject(timedOut(row));
    if (heldByCaller(this, row)) return Promise.reject(selfWait(row));
    holder.queue ??= new WaitQueue();
    const waiter = new Waiter(row, who, holder.queue, signal, this.#onAbort);
    waiter.since = this.#clock.monotonic();
    this.#waiting++;
    const owner = waiter.owner;
    if (owner !== undefined) {
      this.#waitingByOwner.set(owner, (this.#waitingByOwner.get(owner) ?? 0) + 1);
    }
    if (waiter.node !== undefined) {
      const named = waiter as Waiter & { node: RowLockOwner };
      this.#graph.add(named);
      const cycle = this.#graph.findCycle(named);
      if (cycle !== undefined) {
        this.#finishWait(waiter);
        this.#deadlocks++;
        this.#lastDeadlock = { at: this.#clock.wall(), cycle };
        return Promise.reject(deadlock(cycle));
      }
    }
    const promise = new Promise<Hold>((resolve, reject) => {
      waiter.resolve = resolve;
      waiter.reject = reject;
    });
    if (waitMs !== Number.POSITIVE_INFINITY) {
      waiter.deadline = waiter.since + waitMs;
      this.#waitLimits.add(waiter);
    }
    signal?.addEventListener('abort', waiter);
    context?.waiting();
    return promise;
  }

  /** `holds`: the graph's holder of the row (see `PendingWait.holds`). */
  #grant(
    row: string,
    owner: RowLockOwner | undefined,
    explicit: boolean,
    holds: RowLockOwner | undefined,
    renews = false,
  ): Hold {
    const last = this.#lastToken;
    const token =
      last === undefined || (++this.#grants & 127) === 0
        ? nextFencingToken(last, this.#clock.wall())
        : last + 1;
    this.#lastToken = token;
    if (token > this.#tokenCeiling)
      this.#tokenCeiling = (this.#reserveTokens as (from: number) => number)(token);
    let hold: Hold;
    if (explicit) {
      const lockId = newLockId();
      if (renews) {
        hold = new Hold(row, lockId, token, owner, holds, this, Number.POSITIVE_INFINITY);
        this.#ids.set(lockId, hold);
      } else {
        hold = new Hold(row, lockId, token, owner, holds, this, this.#leaseDeadline());
        this.#ids.set(lockId, hold);
        this.#leases.add(hold);
      }
    } else {
      hold = new Hold(row, undefined, token, owner, holds, this, 0);
    }
    this.#rows.set(row, hold);
    return hold;
  }

  /** After `hold` stopped holding: the first waiter gets the row, else the row is forgotten. */
  #handOn(hold: Hold): void {
    const queue = hold.queue;
    hold.queue = undefined;
    const waiter = queue?.head;
    if (queue === undefined || waiter === undefined) {
      this.#rows.delete(hold.row);
      return;
    }
    this.#finishWait(waiter);
    const next = this.#grant(hold.row, waiter.owner, waiter.explicit, waiter.holds, waiter.renews);
    if (queue.head !== undefined) next.queue = queue;
    waiter.resolve(next);
  }

  /** Takes a waiter out of its queue, the graph, the limit queue and its signal. */
  #finishWait(waiter: Waiter): void {
    waiter.settled = true;
    waiter.unlink();
    this.#waiting--;
    const owner = waiter.owner;
    if (owner !== undefined) {
      const left = (this.#waitingByOwner.get(owner) ?? 1) - 1;
      if (left === 0) this.#waitingByOwner.delete(owner);
      else this.#waitingByOwner.set(owner, left);
    }
    if (waiter.node !== undefined) {
      this.#graph.delete(waiter as Waiter & { node: RowLockOwner });
    }
    if (waiter.deadline !== Number.POSITIVE_INFINITY) {
      waiter.deadline = Number.POSITIVE_INFINITY;
      this.#waitLimits.remove();
    }
    waiter.signal?.removeEventListener('abort', waiter);
  }

  #abortWait(waiter: Waiter): void {
    if (waiter.settled) return;
    this.#finishWait(waiter);
    waiter.reject(
      new AbortedError(`Wait for row lock row=${toStringBinary(waiter.row)} aborted`, {
        cause: waiter.signal?.reason,
      }),
    );
  }

  /** From the wait-limit queue, which has already counted the waiter out. */
  #timeOut(waiter: Waiter): void {
    waiter.deadline = Number.POSITIVE_INFINITY;
    this.#finishWait(waiter);
    waiter.reject(timedOut(waiter.row));
  }

  /** From the lease queue, which has already counted the lease out. */
  #expire(hold: Hold): void {
    hold.state = EXPIRED;
    this.#ids.delete(hold.lockId as string);
    this.#handOn(hold);
    try {
      this.emit('expired', hold);
    } catch (err) {
      // A listener's failure must not escape from a timer, nor stop the other expiries.
      process.emitWarning(
        `An 'expired' listener of RowLockManager threw: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }

  /** The held lock with this id; an overdue lease is expired on the spot and rejected. */
  #liveLock(lockId: string): Hold {
    checkLockId(lockId);
    const hold = this.#ids.get(lockId);
    if (hold !== undefined && hold.deadline <= this.#clock.monotonic()) {
      hold.state = EXPIRED;
      this.#leases.remove();
      this.#expire(hold);
    } else if (hold !== undefined) {
      return hold;
    }
    throw unknownLock(lockId);
  }

  /**
   * Rounded up to a whole millisecond: a small integer is stored inline in the grant, a
   * fraction would cost a 12-byte heap number per held lock.
   */
  #leaseDeadline(): number {
    return Math.ceil(this.#clock.monotonic() + this.#leasePeriodMs);
  }

  #checkOpen(): void {
    if (this.#closed) throw new AlreadyClosedError('RowLockManager is closed');
  }
}

function checkLockId(lockId: string): void {
  if (typeof lockId !== 'string' || lockId === '') {
    throw new InvalidArgumentError(
      `Invalid row lock id ${describeValue(lockId)}: must be a non-empty string`,
    );
  }
}

function checkRenew(renew: unknown): boolean {
  if (typeof renew !== 'boolean') {
    throw new InvalidArgumentError(`Invalid renew ${describeValue(renew)}: must be true or false`);
  }
  return renew;
}

function unknownLock(lockId: string): UnknownRowLockError {
  return new UnknownRowLockError(
    `Unknown row lock ${lockId}: never granted, already released, or its lease expired`,
  );
}

function checkOwner(owner: RowLockOwner): void {
  checkOwnerOption(owner, 'row lock owner');
}

function checkWaitMs(ms: number, what: string): number {
  return checkWaitMsOption(ms, what);
}

function timedOut(row: string): LockTimeoutError {
  return new LockTimeoutError(`Timed out on getting lock for row=${toStringBinary(row)}`);
}

function deadlock(cycle: readonly { owner: RowLockOwner; row: string }[]): DeadlockError {
  const first = cycle[0] as { owner: RowLockOwner; row: string };
  const path = cycle
    .map((step) => `${describeOwner(step.owner)} -[row=${toStringBinary(step.row)}]->`)
    .join(' ');
  return new DeadlockError(
    `Deadlock: ${describeOwner(first.owner)} waiting for row=${toStringBinary(first.row)} would close the cycle ${path} ${describeOwner(first.owner)}; this request gives up`,
  );
}
