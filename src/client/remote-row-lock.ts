import type { Clock } from '../core/clock.js';
import { LockLostError } from '../core/errors.js';
import { LockHandleBase } from '../core/lock-handle.js';
import { toStringBinary } from '../rows/bytes.js';
import type { TableRowLock } from '../rows/table.js';

/** What a remote lock asks of its client. */
export interface RemoteLockControl {
  readonly clock: Clock;
  /**
   * Monotonic time until which the session is known alive (0 once lost): the server releases
   * every lock of a session whose lease ran out, whatever the lock's own lease says.
   */
  sessionValidUntil(): number;
  unlock(table: string, lockId: string, lock: RemoteRowLock): Promise<unknown>;
  /**
   * The handle is done: closed (its unlock sent or answered) or `lost`. Only a lost id needs
   * remembering: the server may still hold it while this side counts it lost, so a later use
   * must fail here; a closed one's unlock reaches the server ahead of any later use of its id.
   */
  forget(lock: RemoteRowLock, lost: boolean): void;
}

/**
 * A row lock held by this client's session on a server: the same handle as an in-process
 * `RowLock` (token, `signal`, `lost`, `ensureValid()`, `close()` once).
 *
 * A lock that renews itself (`leaseMs` 0, the default of `lockRow`) has no lease of its own:
 * it lives as long as the session, which the client's heartbeats keep. Otherwise its lease is
 * tracked here conservatively: a use or renewal answered by the server, sent at
 * time `t`, keeps it until `t + lease`; past that the handle counts as lost
 * (`LEASE_EXPIRED`) even before the server says so, because the server may already have
 * handed the row to someone else. The same holds for the session's lease, tracked the same way
 * by the connection: past it the handle counts as lost (`SESSION_EXPIRED`), so a process that
 * was paused (SIGSTOP, a long GC, a blocked event loop) past the session lease finds its lock
 * invalid at its first `ensureValid()`, before any timer had a turn to say so. The server's own notice (`lockLost`), the end of the
 * session (`SESSION_EXPIRED`) and a reconnect that finds the lock gone also end it.
 */
export class RemoteRowLock extends LockHandleBase implements TableRowLock {
  readonly lockId: string;
  readonly row: Buffer;
  readonly table: string;
  /** The lock's own lease; 0 when it renews itself (held while the session lives). */
  readonly leaseMs: number;
  #control: RemoteLockControl;
  #validUntil: number;
  /**
   * While the lock moves to its region's next server (see `RegionRouter.relocate`): until when
   * the session that held it was known alive, in place of that session's (which may be
   * replaced meanwhile). Undefined when it does not move.
   */
  #movingUntil: number | undefined;
  /** @internal The id of the session holding it (its proof of holding, for an adoption). */
  sessionId: string | undefined;
  #timer: NodeJS.Timeout | undefined;

  /** @internal Made by the remote table from a grant. */
  constructor(
    table: string,
    row: Buffer,
    lockId: string,
    token: number,
    sentAt: number,
    leaseMs: number,
    control: RemoteLockControl,
  ) {
    super(`table=${table} row=${toStringBinary(row.toString('latin1'))}`, token);
    this.table = table;
    this.row = row;
    this.lockId = lockId;
    this.leaseMs = leaseMs;
    this.#control = control;
    this.#validUntil = leaseMs === 0 ? Number.POSITIVE_INFINITY : sentAt + leaseMs;
  }

  /**
   * Someone can now notice a loss (the handle's `signal` was read, or a `lost` listener
   * added): from here a timer reports the lease's end by itself. Until then a lapsed lease is
   * found by `ensureValid()` (every call carrying the lock makes it first) or by the server's
   * notice, so a lock nobody watches costs no timer (a timer per lock would be a visible share of a
   * lock cycle's cost).
   */
  protected override observed(): void {
    // A lock that renews itself ends only with the session, which the connection reports.
    if (this.#validUntil !== Number.POSITIVE_INFINITY) this.#arm();
  }

  /** Monotonic time until which the lock is known to be held (its lease's and its session's). */
  get validUntil(): number {
    return Math.min(this.#validUntil, this.#sessionValidUntil());
  }

  #sessionValidUntil(): number {
    return this.#movingUntil ?? this.#control.sessionValidUntil();
  }

  /** @internal Whether it is moving to its region's next server. */
  get moving(): boolean {
    return this.#movingUntil !== undefined;
  }

  /** @internal Its region moved, or its server went away: valid for its session's lease at most. */
  markMoving(): void {
    this.#movingUntil ??= this.#control.sessionValidUntil();
  }

  /** @internal Held again by a session: adopted by another (`control`), or resumed. */
  settled(control: RemoteLockControl, sessionId: string | undefined): void {
    this.#control = control;
    this.#movingUntil = undefined;
    this.sessionId = sessionId;
  }

  /** @internal A call carrying this lock, sent at `sentAt`, was answered: the lease renewed. */
  renewedAt(sentAt: number): void {
    if (sentAt + this.leaseMs > this.#validUntil) this.#validUntil = sentAt + this.leaseMs;
  }

  /** @internal Released through `table.unlockRow`: closed here without another round trip. */
  released(): void {
    clearTimeout(this.#timer);
    this.#control.forget(this, false);
    this.markClosed();
  }

  /** @internal The server, the session or a reconnect says the lock is gone. */
  lose(reason: LockLostError): void {
    clearTimeout(this.#timer);
    this.#control.forget(this, true);
    this.markLost(reason);
  }

  protected checkValid(): void {
    const now = this.#control.clock.monotonic();
    if (now >= this.#validUntil) {
      this.#expire();
      throw this.lostReason;
    }
    if (now >= this.#sessionValidUntil()) {
      this.lose(
        new LockLostError(
          `Session lost: no answer from the server for a whole session lease; ${this.resource} may have been handed to someone else`,
          { code: 'SESSION_EXPIRED' },
        ),
      );
      throw this.lostReason;
    }
  }

  /**
   * Sends the unlock and closes without waiting for its answer: the server releases the row
   * as it reads the request, ahead of anything this client sends later, so a lock/unlock cycle
   * costs one round trip. If the connection drops before the request got through, the lock is
   * released when the client reconnects (the session's leftover locks are given back) or with
   * the session. An answer other than success can only say the lock was already gone.
   */
  protected closeOnce(): void {
    clearTimeout(this.#timer);
    this.#control.forget(this, false);
    if (this.lostReason !== undefined) return;
    this.#control.unlock(this.table, this.lockId, this).catch(() => undefined);
  }

  #arm(): void {
    const delay = Math.max(0, this.#validUntil - this.#control.clock.monotonic());
    this.#timer = setTimeout(() => {
      if (this.closed || this.lostReason !== undefined) return;
      if (this.#control.clock.monotonic() < this.#validUntil) this.#arm();
      else this.#expire();
    }, delay);
    this.#timer.unref();
  }

  #expire(): void {
    this.lose(
      new LockLostError(
        `Row lock lease expired: no use or renewal of ${this.resource} was answered within its lease (${this.leaseMs} ms)`,
        { code: 'LEASE_EXPIRED' },
      ),
    );
  }
}
