import type { Clock } from '../core/clock.js';
import { LockLostError } from '../core/errors.js';
import type { HeldLock } from '../core/held-by-caller.js';
import { RowFencing } from './row-fencing.js';
import {
  markRowLockLost,
  markRowLockReleased,
  moveRowLock,
  RowLock,
  type RowLockControl,
  tellOwnerOfLoss,
} from './row-lock.js';
import {
  type AcquireOptions,
  type RowLockActivity,
  type RowLockGrant,
  RowLockManager,
  type RowLockOwner,
} from './row-lock-manager.js';
import type { RowLockTokenStore } from './row-lock-tokens.js';
import { type RowLockRef, rowLockIdOf } from './table.js';

/** The losses {@link RegionRowLocks.close} makes (see {@link lostToRegionClose}). */
const regionClosings = new WeakSet<object>();

/**
 * Whether a lock's loss is its region's closing (a move, a shutdown, a drop), not its lease or
 * its release: where locks are recorded outside the region (a fleet), the lock is then still
 * recorded, for the region's next server to put back.
 */
export function lostToRegionClose(reason: unknown): boolean {
  return typeof reason === 'object' && reason !== null && regionClosings.has(reason);
}

/** What the row locks need of the region's options. */
export interface RowLockSettings {
  clock: Clock;
  leasePeriodMs: number;
  rowLockWaitMs: number;
}

/** What the row locks ask of the region. */
export interface RowLockRegion {
  /** True once the region began closing: a handle's `close()` then leaves the lock alone. */
  closing: () => boolean;
  /** Called after a lease ran out and the handle was marked lost (`LEASE_EXPIRED`). */
  onExpired: (lock: RowLock) => void;
}

/**
 * A region's row locks: a {@link RowLockManager} whose explicit grants are handed out as
 * {@link RowLock} handles and fenced by ({@link RowFencing}): by the holder's token while held,
 * by the remembered token once ended.
 *
 * Contract: every explicit grant gets exactly one handle, and its token becomes the row's
 * newest for {@link checkToken}; a handle learns of its end through its signal: released
 * ({@link unlockRow}), `LEASE_EXPIRED` (then `onExpired`), or `LOCK_LOST` at {@link close}.
 * Row keys given here are already checked latin1 keys; lock references are checked.
 */
export class RegionRowLocks {
  readonly #manager: RowLockManager;
  readonly #fencing = new RowFencing();
  /** What every RowLock handle calls back into. */
  readonly #control: RowLockControl;

  /** `tokens`: durable fencing tokens (a region with a directory); in-memory ones otherwise. */
  constructor(
    settings: RowLockSettings,
    tokens: RowLockTokenStore | undefined,
    region: RowLockRegion,
  ) {
    const { leasePeriodMs } = settings;
    const manager = new RowLockManager({
      clock: settings.clock,
      leasePeriodMs,
      rowLockWaitMs: settings.rowLockWaitMs,
      ...(tokens === undefined
        ? {}
        : {
            firstToken: tokens.firstToken,
            tokenCeiling: tokens.ceiling,
            reserveTokens: (from: number) => tokens.reserve(from),
          }),
    });
    this.#manager = manager;
    // Tokens of earlier owners (before a restart or failover) are unknown per row here.
    if (tokens !== undefined) this.#fencing.refuseBelow(tokens.firstToken);
    this.#control = {
      check: (lockId) => {
        manager.checkLock(lockId);
      },
      leaseRemaining: (lockId) => manager.leaseRemaining(lockId),
      releaseIfHeld: (lock) => {
        if (!region.closing() && manager.isHeldId(lock.lockId)) {
          const grant = manager.unlockRow(lock.lockId);
          this.#fencing.released(grant.row, grant.token);
        }
      },
    };
    manager.on('expired', (grant) => {
      this.#fencing.released(grant.row, grant.token);
      const lock = grant.handle as RowLock;
      const reason = new LockLostError(
        `Row lock lease expired: ${lock.resource} (lock ${lock.lockId}, not used or renewed for ${leasePeriodMs} ms)`,
        { code: 'LEASE_EXPIRED' },
      );
      lock[markRowLockLost](reason);
      tellOwnerOfLoss(grant.owner, lock, reason);
      region.onExpired(lock);
    });
  }

  async lockRow(row: string, options: AcquireOptions): Promise<RowLock> {
    return this.#handle(await this.#manager.lockRow(row, options));
  }

  tryLockRow(row: string, owner: RowLockOwner | undefined, renew: boolean): RowLock | null {
    const grant = this.#manager.tryLockRow(row, owner, renew);
    return grant === null ? null : this.#handle(grant);
  }

  /** See `RowLockManager.restoreRowLock`. */
  restoreRowLock(
    row: string,
    lockId: string,
    token: number,
    owner: RowLockOwner | undefined,
    renew: boolean,
  ): RowLock {
    return this.#handle(this.#manager.restoreRowLock(row, lockId, token, owner, renew));
  }

  unlockRow(lock: RowLockRef): void {
    const grant = this.#manager.unlockRow(rowLockIdOf(lock));
    this.#fencing.released(grant.row, grant.token);
    (grant.handle as RowLock | undefined)?.[markRowLockReleased]();
  }

  renewLease(lock: RowLockRef): void {
    this.#manager.renewLease(rowLockIdOf(lock));
  }

  /** An operation on `row` under `lock`: checks the lock holds that row and renews it. */
  use(lock: RowLockRef, row: string): void {
    this.#manager.useLock(rowLockIdOf(lock), row);
  }

  /** Refuses a mutation of `row` carrying a token older than the row's newest explicit grant. */
  checkToken(row: string, token: number | undefined): void {
    this.#fencing.check(row, token, this.#manager.explicitToken(row));
  }

  /** Waits and deadlocks now, for status pages (see `RowLockManager.activity`). */
  activity(limit?: number): RowLockActivity {
    return this.#manager.activity(limit);
  }

  /** See `RowLockManager.heldLockOf`. */
  heldLockOf(row: string): HeldLock {
    return this.#manager.heldLockOf(row);
  }

  /** Requests waiting: all, or `owner`'s. */
  waiting(owner?: RowLockOwner): number {
    return owner === undefined ? this.#manager.waitingCount : this.#manager.waitingOf(owner);
  }

  /** An implicit lock on `row` for one mutation if it is free now; null otherwise. */
  tryAcquireImplicit(row: string, owner: RowLockOwner | undefined): RowLockGrant | null {
    return this.#manager.tryAcquireImplicit(row, owner);
  }

  /** An implicit lock on `row` for one mutation, waiting for it (FIFO). */
  acquireImplicit(row: string, options: AcquireOptions): Promise<RowLockGrant> {
    return this.#manager.acquireImplicit(row, options);
  }

  /** Implicit locks on several rows, taken in byte order (see `acquireImplicitMany`). */
  acquireImplicitMany(rows: string[], options: AcquireOptions): Promise<RowLockGrant[]> {
    return this.#manager.acquireImplicitMany(rows, options);
  }

  releaseImplicit(grant: RowLockGrant): void {
    this.#manager.releaseImplicit(grant);
  }

  /** See `RowLockManager.failWaits`. */
  failWaits(reason: Error): void {
    this.#manager.failWaits(reason);
  }

  /** The explicit locks on rows `>= from`, given up for another region to adopt (a split). */
  detachFrom(from: string): { lock: RowLock; owner: RowLockOwner | undefined; renew: boolean }[] {
    return this.#manager.detachFrom(from).map(({ grant, renew }) => ({
      lock: grant.handle as RowLock,
      owner: grant.owner,
      renew,
    }));
  }

  /**
   * Holds `lock` (detached from the region that held its row before a split) here: the same
   * handle, id and token, a full lease from now unless it renews itself.
   */
  adopt(lock: RowLock, owner: RowLockOwner | undefined, renew: boolean): void {
    const grant = this.#manager.restoreRowLock(
      lock.row.toString('latin1'),
      lock.lockId,
      lock.token,
      owner,
      renew,
    );
    lock[moveRowLock](this.#control);
    grant.handle = lock;
  }

  /** See `RowLockManager.transferRowLock`; the handle stays the same. */
  transfer(lock: RowLock, owner: RowLockOwner | undefined, renew: boolean): void {
    this.#manager.transferRowLock(lock.lockId, owner, renew);
  }

  /**
   * See `RowLockManager.raiseTokens`; tokens up to `floor` (the old region's) are refused on
   * every row not held here, as their newest grants were made there.
   */
  raiseTokens(floor: number): void {
    this.#manager.raiseTokens(floor);
    this.#fencing.refuseBelow(floor + 1);
  }

  /** See `RowLockManager.tokenCeiling`. */
  get tokenCeiling(): number {
    return this.#manager.tokenCeiling;
  }

  /** Fails waiters, and ends the locks still held: their holders learn it from their signal. */
  close(): void {
    for (const grant of this.#manager.close()) {
      const lock = grant.handle as RowLock | undefined;
      if (lock === undefined) continue;
      const reason = new LockLostError(
        `Row lock lost: the region closed while it was held (${lock.resource})`,
        { code: 'LOCK_LOST' },
      );
      regionClosings.add(reason);
      lock[markRowLockLost](reason);
      tellOwnerOfLoss(grant.owner, lock, reason);
    }
  }

  #handle(grant: RowLockGrant): RowLock {
    const lock = new RowLock(grant.row, grant.lockId as string, grant.token, this.#control);
    grant.handle = lock;
    return lock;
  }
}
