import type { LockLostError } from '../core/errors.js';
import { LockHandleBase } from '../core/lock-handle.js';
import { toStringBinary } from './bytes.js';

/** What a {@link RowLock} asks of the region that granted it (internal). */
export interface RowLockControl {
  /** Throws (`UNKNOWN_ROW_LOCK`) unless `lockId` is still held; never renews the lease. */
  check(lockId: string): void;
  /** Unlocks `lockId` if it is still held; a no-op otherwise (expired, unlocked, closed). */
  releaseIfHeld(lock: RowLock): void;
  /** Milliseconds left of the lease, or undefined once the lock is not held. */
  leaseRemaining(lockId: string): number | undefined;
}

/** Internal entry points of a {@link RowLock}, reachable only through these symbols. */
export const markRowLockLost: unique symbol = Symbol('locksmith.rows.markRowLockLost');
export const markRowLockReleased: unique symbol = Symbol('locksmith.rows.markRowLockReleased');
/** Hands a held lock's handle to the region that took its row over (a split). */
export const moveRowLock: unique symbol = Symbol('locksmith.rows.moveRowLock');
/**
 * @internal An owner (the `owner` of `lockRow`) with a method under this symbol hears of the
 * loss of each of its locks (lease expired, region closed) right after the handle's `lost`
 * listeners: one method per owner where a listener per lock cost a closure, a bound wrapper
 * and their contexts (about 250 B of heap a held lock on a server).
 */
export const rowLockLost: unique symbol = Symbol('locksmith.rows.rowLockLost');

/** @internal See {@link rowLockLost}. */
export interface RowLockLossObserver {
  [rowLockLost](lock: RowLock, reason: LockLostError): void;
}

/** @internal Tells `owner` of its lock's loss, if it listens (see {@link rowLockLost}). */
export function tellOwnerOfLoss(owner: unknown, lock: RowLock, reason: LockLostError): void {
  if (typeof owner === 'object' && owner !== null && rowLockLost in owner) {
    (owner as RowLockLossObserver)[rowLockLost](lock, reason);
  }
}

/**
 * An explicit row lock, as HBase's client `RowLock` (the row and the lock id that operations
 * carry), and locksmith's lock handle (`LockHandle` of the core):
 *
 * - `token` is the fencing token of this grant. It strictly increases with every grant of the
 *   row, explicit or implicit; for a region with a `dir` also across restarts (tokens are
 *   reserved durably, see docs/rows.md).
 * - `signal` aborts by itself when the lock stops being ours: with a `LockLostError` of code
 *   `LEASE_EXPIRED` when its lease ran out (the moment the lease timer fires, or earlier when
 *   a use or `ensureValid()` finds it overdue), `LOCK_LOST` when the region closed under it,
 *   and an `AlreadyClosedError` once it was unlocked. `lost` fires with the same reason.
 * - `ensureValid()` throws once it is no longer held; it does not renew the lease (a use in an
 *   operation, or `region.renewLease(lock)`, does).
 * - `close()` unlocks once, whatever the number of calls; after expiry or `region.unlockRow`
 *   it does nothing. `await using lock = await region.lockRow(row)` unlocks at scope exit.
 *
 * The id is unguessable and never reused: knowing a row does not let anyone use its lock.
 */
export class RowLock extends LockHandleBase {
  readonly lockId: string;
  readonly #key: string;
  #control: RowLockControl;

  /** @internal Made by the region; user code gets these from `lockRow`/`tryLockRow`. */
  constructor(key: string, lockId: string, token: number, control: RowLockControl) {
    super(undefined, token);
    this.lockId = lockId;
    this.#key = key;
    this.#control = control;
  }

  /**
   * `row=` and the row as `toStringBinary` renders it, made on each read: a string kept per
   * lock cost a field and a 32 B string on every lock a server holds, for messages alone.
   */
  override get resource(): string {
    return `row=${toStringBinary(this.#key)}`;
  }

  /**
   * The row key's bytes, a fresh copy on each call: a Buffer kept per held lock retained its
   * share of Node's 8 KB allocation pool (about 400 B a lock with 10,000 held), and a caller
   * writing into the copy changes nothing.
   */
  get row(): Buffer {
    return Buffer.from(this.#key, 'latin1');
  }

  /**
   * @internal The row key as the region keys it (latin1, a character a byte), shared rather
   * than copied: what a server records and routes by, on every unlock of every lock.
   */
  get rowKey(): string {
    return this.#key;
  }

  /**
   * Milliseconds left of the lease until it runs out unless used or renewed (0 when overdue);
   * undefined once the lock is no longer held. For status pages: by the time it is read, it is
   * already a little less.
   */
  get leaseRemainingMs(): number | undefined {
    return this.#control.leaseRemaining(this.lockId);
  }

  protected checkValid(): void {
    try {
      this.#control.check(this.lockId);
    } catch (err) {
      // A lease found overdue here was reported through markRowLockLost just now.
      const lost = this.lostReason;
      if (lost !== undefined) throw lost;
      this.fail(err as Error);
    }
  }

  protected closeOnce(): void {
    this.#control.releaseIfHeld(this);
  }

  /** @internal The lease ran out or the region closed. */
  [markRowLockLost](reason: LockLostError): void {
    this.markLost(reason);
  }

  /** @internal Its row now belongs to another region (a split): the same lock, held there. */
  [moveRowLock](control: RowLockControl): void {
    this.#control = control;
  }

  /** @internal Unlocked through `region.unlockRow`. */
  [markRowLockReleased](): void {
    this.markClosed();
  }
}
