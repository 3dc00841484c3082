import type { Clock } from '../core/clock.js';
import { LockLostError } from '../core/errors.js';
import { type Grant, lateGrant, type Method } from '../wire/calls.js';
import { RemoteRowLock } from './remote-row-lock.js';

/** Ids of lost locks remembered (see {@link HeldLocks}). */
const GONE_KEPT = 4096;

/** What the owner of a client's locks needs of its connection. */
export interface HeldLocksOptions {
  readonly clock: Clock;
  /** Monotonic time until which the session is known alive (0 once lost). */
  sessionValidUntil(): number;
  /** Sends `unlockRow` for a lock of the session; its answer does not matter. */
  giveBack(table: string, lockId: string): Promise<unknown>;
  /** The id of the session now (the proof of holding its locks, see `adoptLock`). */
  sessionId(): string | undefined;
  /**
   * A lock that is moving to its region's next server (a fleet): it is to be adopted there
   * (`unlock`: then released there, its handle being closed). Absent: nothing moves.
   */
  moving?(lock: RemoteRowLock, from: HeldLocks, unlock: boolean): Promise<unknown>;
  /** Whether locks can move now (the client routes by region: it met a fleet). */
  moves?(): boolean;
}

/**
 * The one owner of the row locks a client's session holds: it makes the handles from grants,
 * finds them by id, and decides every end of one — released, lost (a server notice, the
 * session's end, a reconnect that no longer lists it, the client's close) — and gives back
 * every lock the server granted that no handle stands for (a grant answered after its caller
 * gave up, a grant found at reconnect whose answer never arrived).
 *
 * It remembers the ids of lost locks, so a use of one fails here as in process, even while the
 * server (whose lease outlasts the client's conservative one) still holds it. A released lock's
 * id is not kept: its unlock reaches the server ahead of any later call of this connection,
 * which the server then refuses the same way; if the connection drops first, the row stays
 * the session's until the reconnect gives it back, so no one else can hold it meanwhile.
 */
export class HeldLocks {
  readonly #options: HeldLocksOptions;
  readonly #locks = new Map<string, RemoteRowLock>();
  readonly #gone = new Set<string>();
  readonly #control;

  constructor(options: HeldLocksOptions) {
    this.#options = options;
    this.#control = {
      clock: options.clock,
      sessionValidUntil: () => options.sessionValidUntil(),
      unlock: (table: string, lockId: string, lock: RemoteRowLock) => {
        const moving = options.moving;
        if (moving === undefined || options.moves?.() !== true)
          return options.giveBack(table, lockId);
        if (lock.moving) return moving(lock, this, true);
        return options.giveBack(table, lockId).catch((err: unknown) => {
          // Its region closed there just before (a `lockMoved` on its way): released where
          // its region is now.
          if ((err as { code?: unknown }).code !== 'UNKNOWN_ROW_LOCK') throw err;
          lock.markMoving();
          return moving(lock, this, true);
        });
      },
      forget: (lock: RemoteRowLock, lost: boolean) => this.#forget(lock, lost),
    };
  }

  /** Locks held now. */
  get size(): number {
    return this.#locks.size;
  }

  /** The handle for a grant answered to a call sent at `sentAt` (monotonic). */
  granted(table: string, row: Buffer, grant: Grant, sentAt: number): RemoteRowLock {
    const lock = new RemoteRowLock(
      table,
      row,
      grant.lockId,
      grant.token,
      sentAt,
      grant.leaseMs,
      this.#control,
    );
    lock.sessionId = this.#options.sessionId();
    this.#locks.set(grant.lockId, lock);
    return lock;
  }

  /**
   * `lockId` of the server's `lockMoved` notice (its region closed there: the region's next
   * server keeps it for this client), or every lock (`undefined`: the connection dropped in a
   * fleet, its server may be gone): each moves on (see `HeldLocksOptions.moving`).
   */
  moved(lockId: unknown): void {
    const moving = this.#options.moving;
    if (moving === undefined || this.#options.moves?.() !== true) return;
    const locks =
      lockId === undefined
        ? [...this.#locks.values()]
        : typeof lockId === 'string'
          ? [this.#locks.get(lockId)]
          : [];
    for (const lock of locks) {
      if (lock === undefined || lock.moving) continue;
      lock.markMoving();
      moving(lock, this, false).catch(() => undefined);
    }
  }

  /** Whether a handle of this session's is on `row` (latin1) of `table` (a walk: rare use). */
  holdsRow(table: string, row: string): boolean {
    for (const lock of this.#locks.values())
      if (lock.table === table && lock.row.toString('latin1') === row) return true;
    return false;
  }

  /** A moving lock adopted by another session: it is that one's now (not lost). */
  handOver(lock: RemoteRowLock, to: HeldLocks): void {
    if (this.#locks.get(lock.lockId) === lock) this.#locks.delete(lock.lockId);
    // A handle closed while it moved is released by the relocation, not held.
    if (!lock.closed) to.#locks.set(lock.lockId, lock);
    lock.settled(to.#control, to.#options.sessionId());
  }

  /** The handle of a lock held now, if any. */
  get(lockId: string): RemoteRowLock | undefined {
    return this.#locks.get(lockId);
  }

  /** Whether this client counts the lock as lost (a use of its id fails without a round trip). */
  isGone(lockId: string): boolean {
    return this.#gone.has(lockId);
  }

  /** A result its caller gave up on: a lock it grants is given back. */
  lateResult(method: Method, args: readonly unknown[], value: unknown): void {
    const grant = lateGrant(method, args, value);
    if (grant !== undefined) this.#giveBack(grant.table, grant.lockId);
  }

  /** The server's `lockLost` notice: `[lockId, code, message]`. */
  lockLost(data: unknown): void {
    if (!Array.isArray(data)) return;
    const [lockId, code, message] = data as unknown[];
    const lock = typeof lockId === 'string' ? this.#locks.get(lockId) : undefined;
    lock?.lose(
      new LockLostError(String(message), {
        code: code === 'LEASE_EXPIRED' || code === 'SESSION_EXPIRED' ? code : 'LOCK_LOST',
      }),
    );
  }

  /** The session ended (expired, closed, master changed): every lock with it. */
  loseAll(reason: LockLostError): void {
    // A moving lock is not this session's to lose: its adoption elsewhere decides.
    for (const lock of [...this.#locks.values()]) if (!lock.moving) lock.lose(reason);
  }

  /** The client closes its session: every lock ends with it. */
  clientClosed(): void {
    for (const lock of [...this.#locks.values()]) {
      lock.lose(
        new LockLostError(`${lock.resource}: the client closed its session`, { code: 'LOCK_LOST' }),
      );
    }
  }

  /**
   * A connection carries the session again. `held` lists `[lockId, table]` of the locks the
   * server still holds for it: a handle not listed is lost; a listed lock without a handle was
   * granted while the answer could not arrive, and is given back.
   */
  reconnected(resumed: boolean, held: readonly (readonly [string, string])[]): void {
    const stillHeld = new Set(held.map(([lockId]) => lockId));
    for (const lock of [...this.#locks.values()]) {
      // A moving lock still held here did not move after all (the same session resumed).
      if (lock.moving && stillHeld.has(lock.lockId)) lock.settled(this.#control, lock.sessionId);
      else if (lock.moving) continue;
      else if (!stillHeld.has(lock.lockId)) {
        lock.lose(
          new LockLostError(`${lock.resource}: not held by the session after reconnecting`, {
            code: resumed ? 'LEASE_EXPIRED' : 'SESSION_EXPIRED',
          }),
        );
      }
    }
    for (const [lockId, table] of held) {
      if (!this.#locks.has(lockId)) this.#giveBack(table, lockId);
    }
  }

  #giveBack(table: string, lockId: string): void {
    this.#options.giveBack(table, lockId).catch(() => undefined);
  }

  #forget(lock: RemoteRowLock, lost: boolean): void {
    if (this.#locks.get(lock.lockId) === lock) this.#locks.delete(lock.lockId);
    // Only a loss is remembered (rare): a set churned on every unlock would be a tenth of a
    // lock cycle's client CPU. Bounded: the oldest go first (a very old id then reaches the
    // server, which refuses it).
    if (!lost) return;
    this.#gone.add(lock.lockId);
    if (this.#gone.size > GONE_KEPT) this.#gone.delete(this.#gone.values().next().value as string);
  }
}
