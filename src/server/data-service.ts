import type { Clock } from '../core/clock.js';
import { type LockLostError, LockObtainFailedError } from '../core/errors.js';
import { FSDirectory } from '../directory/fs-directory.js';
import type { Lock } from '../directory/lock.js';
import { takeOverLock } from '../directory/take-over-lock.js';
import type { OpenRegionStorage } from '../rows/region-storage.js';
import type { ServingData } from './connection.js';
import { dataDirInUse } from './data-dir-in-use.js';
import { Dispatcher, type DispatchLimits } from './dispatch.js';
import { ScannerRegistry } from './scanner-registry.js';
import type { ServerStatus } from './server-status.js';
import type { Session } from './session.js';
import { type SessionLimits, SessionRegistry } from './session-registry.js';
import { TableCatalog } from './table-catalog.js';

/** What every data side of a server is opened with (the server's settings). */
export interface DataSettings {
  dataDir: string;
  leasePeriodMs: number;
  rowLockWaitMs: number;
  durability: 'fsync' | 'none';
  clock: Clock;
  /** How each table's storage is opened (default: `RowStorage`). */
  openStorage: OpenRegionStorage | undefined;
  sessionLimits: SessionLimits;
  dispatchLimits: DispatchLimits;
  /** The `status` call's answer. */
  status: () => ServerStatus;
}

/** The mastership a master's data side runs under; absent for a standalone server. */
export interface DataMastership {
  /** The mastership token: the epoch of the storage and of WELCOME. At least 1. */
  token: number;
  /** Throws `NOT_MASTER` once the mastership is no longer certain (no I/O). */
  check(): void;
  /**
   * The mastership is over as far as the data side can tell: the storage refused a write
   * (`FENCED`) or the data directory's lock was taken over.
   */
  lost(reason: unknown): void;
}

/**
 * The data side of a server: its tables, sessions, scanners and the dispatcher over them,
 * guarded by `<dataDir>/write.lock`. A standalone server opens one for its whole life (the
 * lock taken plainly: a second server on the directory fails); a master opens one per
 * mastership (the lock taken over from a deposed master, the token as the regions' epoch,
 * every call checked against the mastership) and closes it when the mastership ends.
 */
export class DataService implements ServingData {
  readonly epoch: number;
  readonly role: 'standalone' | 'master';
  readonly catalog: TableCatalog;
  readonly sessions: SessionRegistry;
  readonly scanners: ScannerRegistry;
  readonly dispatcher: Dispatcher;
  readonly #lock: Lock;
  #closing: Promise<void> | undefined;

  private constructor(parts: {
    mastership: DataMastership | undefined;
    catalog: TableCatalog;
    sessions: SessionRegistry;
    scanners: ScannerRegistry;
    dispatcher: Dispatcher;
    lock: Lock;
  }) {
    this.epoch = parts.mastership?.token ?? 0;
    this.role = parts.mastership === undefined ? 'standalone' : 'master';
    this.catalog = parts.catalog;
    this.sessions = parts.sessions;
    this.scanners = parts.scanners;
    this.dispatcher = parts.dispatcher;
    this.#lock = parts.lock;
  }

  /**
   * Takes the directory's lock, opens (recovering) every table, and is ready for sessions.
   * `onLockLost` is told when the directory's lock is lost (standalone: the server closes).
   */
  static async open(
    settings: DataSettings,
    mastership: DataMastership | undefined,
    onLockLost: (reason: unknown) => void,
  ): Promise<DataService> {
    const { dataDir, clock } = settings;
    // Standalone, the directory is this server's alone: a second server on it fails here. A
    // master's mastership proves any other holder deposed: it takes the lock over.
    const lock =
      mastership === undefined
        ? await (await FSDirectory.open(dataDir)).obtainLock('write.lock').catch((err: unknown) => {
            throw err instanceof LockObtainFailedError ? dataDirInUse(dataDir, err) : err;
          })
        : await takeOverLock(dataDir, 'write.lock');
    let catalog: TableCatalog | undefined;
    try {
      const { leasePeriodMs, rowLockWaitMs, durability, openStorage } = settings;
      catalog = await TableCatalog.open(
        dataDir,
        { leasePeriodMs, rowLockWaitMs, durability, clock, openStorage },
        mastership === undefined
          ? undefined
          : { epoch: mastership.token, check: () => mastership.check() },
      );
      const scanners = new ScannerRegistry(clock, leasePeriodMs, 100);
      let self: DataService | undefined;
      const sessions = new SessionRegistry(clock, settings.sessionLimits, (session, reason) => {
        if (self !== undefined) self.#endSession(session, reason);
      });
      const dispatcher = new Dispatcher({
        catalog,
        sessions,
        scanners,
        limits: settings.dispatchLimits,
        lockLeaseMs: leasePeriodMs,
        status: settings.status,
        notifyLost: (session, lockId, reason) =>
          session.sink?.notify('lockLost', [
            lockId,
            (reason as { code?: string }).code ?? 'LOCK_LOST',
            reason.message,
          ]),
        check: mastership === undefined ? undefined : () => mastership.check(),
        onFenced: mastership === undefined ? undefined : (err) => mastership.lost(err),
      });
      self = new DataService({ mastership, catalog, sessions, scanners, dispatcher, lock });
      lock.once('lost', (reason: LockLostError) => onLockLost(reason));
      return self;
    } catch (err) {
      await catalog?.close();
      await lock.close().catch(() => undefined);
      throw err;
    }
  }

  /**
   * Ends every session with `reason` (their locks are released; with `MASTER_CHANGED` or
   * `SESSION_EXPIRED` their connections are told and closed), closes every scanner and table,
   * and gives the directory's lock back. Idempotent.
   */
  close(reason: LockLostError): Promise<void> {
    this.#closing ??= (async () => {
      this.sessions.close(reason);
      this.scanners.shutdown();
      await this.catalog.close();
      await this.#lock.close().catch(() => undefined);
    })();
    return this.#closing;
  }

  #endSession(session: Session, reason: LockLostError): void {
    this.scanners.closeAll(session);
    for (const [lockId, { table, lock }] of [...session.locks]) {
      session.removeLock(lockId);
      // The unlock runs at once; a refusal comes later: its lease ran out or its table was
      // dropped meanwhile (the handle knows already).
      (async () => this.catalog.region(table).unlockRow(lockId))().catch(() =>
        lock.close().catch(() => undefined),
      );
    }
    const sink = session.sink;
    session.sink = undefined;
    if (
      sink !== undefined &&
      (reason.code === 'SESSION_EXPIRED' || reason.code === 'MASTER_CHANGED')
    )
      sink.sessionEnded(reason.code, reason.message);
  }
}
