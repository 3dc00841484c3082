import type { Clock } from '../core/clock.js';
import { type LockLostError, LockObtainFailedError } from '../core/errors.js';
import { FSDirectory } from '../directory/fs-directory.js';
import type { Lock } from '../directory/lock.js';
import { takeOverLock } from '../directory/take-over-lock.js';
import type { OpenRegionStorage } from '../rows/region-storage.js';
import type { ServingData } from './connection.js';
import { dataDirInUse } from './data-dir-in-use.js';
import { Dispatcher, type DispatchLimits, type LockRecords } from './dispatch.js';
import { DurableSessions } from './durable-sessions.js';
import { ScannerRegistry } from './scanner-registry.js';
import type { ServerStatus } from './server-status.js';
import type { Session } from './session.js';
import { type JournalState, SessionJournal } from './session-journal.js';
import { type SessionLimits, SessionRegistry } from './session-registry.js';
import { type CatalogFleet, TableCatalog } from './table-catalog.js';

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
  /**
   * `durable`: sessions and their row locks are recorded in `<data>/sessions` and put back by
   * the next server on the directory (after a restart or a failover); `memory`: they end with
   * the server, as its scanners do.
   */
  sessions: 'durable' | 'memory';
  dispatchLimits: DispatchLimits;
  /** The `status` call's answer. */
  status: () => ServerStatus;
  /** `host:port` the server names itself by (its fleet address, or where it listens). */
  self: () => string;
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
  readonly fleet: boolean;
  readonly catalog: TableCatalog;
  readonly sessions: SessionRegistry;
  readonly scanners: ScannerRegistry;
  readonly dispatcher: Dispatcher;
  readonly #lock: Lock;
  readonly #journal: SessionJournal | undefined;
  readonly #durable: DurableSessions | undefined;
  /** Where grants and releases are recorded: the session journal's, or a fleet's. */
  readonly #records: LockRecords | undefined;
  #closing: Promise<void> | undefined;

  private constructor(parts: {
    mastership: DataMastership | undefined;
    fleet: boolean;
    catalog: TableCatalog;
    sessions: SessionRegistry;
    scanners: ScannerRegistry;
    dispatcher: Dispatcher;
    lock: Lock;
    journal: SessionJournal | undefined;
    durable: DurableSessions | undefined;
    records: LockRecords | undefined;
  }) {
    this.epoch = parts.mastership?.token ?? 0;
    this.role = parts.mastership === undefined ? 'standalone' : 'master';
    this.fleet = parts.fleet;
    this.catalog = parts.catalog;
    this.sessions = parts.sessions;
    this.scanners = parts.scanners;
    this.dispatcher = parts.dispatcher;
    this.#lock = parts.lock;
    this.#journal = parts.journal;
    this.#durable = parts.durable;
    this.#records = parts.records;
  }

  /**
   * Takes the directory's lock, opens (recovering) every table, and is ready for sessions.
   * `onLockLost` is told when the directory's lock is lost (standalone: the server closes).
   */
  static async open(
    settings: DataSettings,
    mastership: DataMastership | undefined,
    onLockLost: (reason: unknown) => void,
    fleet?: CatalogFleet,
    fleetLocks?: LockRecords,
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
    let journal: SessionJournal | undefined;
    try {
      const { leasePeriodMs, rowLockWaitMs, durability, openStorage } = settings;
      catalog = await TableCatalog.open(
        dataDir,
        { leasePeriodMs, rowLockWaitMs, durability, clock, openStorage },
        mastership === undefined
          ? undefined
          : { epoch: mastership.token, check: () => mastership.check() },
        fleet,
      );
      // In a fleet a refused write means its region was claimed elsewhere: the member looks again.
      const onFenced =
        fleet !== undefined
          ? () => fleet.changed()
          : mastership === undefined
            ? undefined
            : (err: unknown) => mastership.lost(err);
      let durable: DurableSessions | undefined;
      let recorded: JournalState | undefined;
      // A fleet's members keep their sessions in memory; their locks are the fleet's records.
      if (settings.sessions === 'durable' && fleet === undefined) {
        journal = await SessionJournal.open(dataDir, {
          durability,
          clock,
          epoch: mastership?.token,
          openStorage,
        });
        recorded = await journal.recover();
        durable = new DurableSessions(journal, (err) => {
          if ((err as { code?: unknown } | null)?.code === 'FENCED') onFenced?.(err);
          else
            process.emitWarning(
              `locksmith: a session record could not be written: ${(err as Error).message}`,
            );
        });
      }
      const scanners = new ScannerRegistry(clock, leasePeriodMs, 100);
      let self: DataService | undefined;
      const sessions = new SessionRegistry(
        clock,
        settings.sessionLimits,
        (session, reason) => {
          if (self !== undefined) self.#endSession(session, reason);
        },
        durable === undefined ? undefined : (session) => durable.opened(session),
      );
      const dispatcher = new Dispatcher({
        catalog,
        sessions,
        scanners,
        limits: settings.dispatchLimits,
        lockLeaseMs: leasePeriodMs,
        status: settings.status,
        self: settings.self,
        notifyLost: (session, lockId, reason) =>
          session.sink?.notify('lockLost', [
            lockId,
            (reason as { code?: string }).code ?? 'LOCK_LOST',
            reason.message,
          ]),
        check: mastership === undefined ? undefined : () => mastership.check(),
        onFenced,
        records: durable ?? fleetLocks,
      });
      self = new DataService({
        fleet: fleet !== undefined,
        mastership,
        catalog,
        sessions,
        scanners,
        dispatcher,
        lock,
        journal,
        durable,
        records: durable ?? fleetLocks,
      });
      if (recorded !== undefined && durable !== undefined) {
        await restore(recorded, sessions, catalog, dispatcher, durable);
        durable.follow(() => sessions.all());
      }
      lock.once('lost', (reason: LockLostError) => onLockLost(reason));
      return self;
    } catch (err) {
      await journal?.close().catch(() => undefined);
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
      const durable = this.#durable;
      if (durable !== undefined) {
        // The sessions stay recorded for the next server on the directory; their clients are
        // not told they ended (they did not), only disconnected, so that they resume there.
        durable.detach();
        for (const session of this.sessions.all()) {
          const sink = session.sink;
          session.sink = undefined;
          sink?.disconnect();
        }
      }
      this.sessions.close(reason);
      this.scanners.shutdown();
      await this.#journal?.close().catch(() => undefined);
      await this.catalog.close();
      await this.#lock.close().catch(() => undefined);
    })();
    return this.#closing;
  }

  #endSession(session: Session, reason: LockLostError): void {
    this.scanners.closeAll(session);
    this.#durable?.ended(session);
    for (const [lockId, { table, lock }] of [...session.locks]) {
      session.removeLock(lockId);
      this.#records?.released(lockId).catch(() => undefined);
      // The unlock runs at once; a refusal comes later: its lease ran out or its table was
      // dropped meanwhile (the handle knows already).
      (async () => this.catalog.regions(table).unlockRow(lock))().catch(() =>
        lock.close().catch(() => undefined),
      );
    }
    const sink = session.sink;
    session.sink = undefined;
    sink?.forgotten?.();
    if (
      sink !== undefined &&
      (reason.code === 'SESSION_EXPIRED' || reason.code === 'MASTER_CHANGED')
    )
      sink.sessionEnded(reason.code, reason.message);
  }
}

/**
 * Puts back what the journal recorded: every session with a full lease from now, and every
 * lock of theirs on its row with its id and token (a full lease too, for a lock that has one).
 * A lock that cannot be put back (its table was dropped, its row is held) is recorded released.
 */
async function restore(
  recorded: JournalState,
  sessions: SessionRegistry,
  catalog: TableCatalog,
  dispatcher: Dispatcher,
  durable: DurableSessions,
): Promise<void> {
  const byKey = new Map<string, Session>();
  for (const s of recorded.sessions) byKey.set(s.key, sessions.restore(s));
  const dropped: Promise<void>[] = [];
  for (const l of recorded.locks) {
    const session = byKey.get(l.session);
    try {
      if (session === undefined) throw new Error('no session');
      const table = catalog.resolve(l.table);
      const lock = table.regions.restoreRowLock(Buffer.from(l.row, 'latin1'), {
        lockId: l.lockId,
        token: l.token,
        owner: session,
        renew: l.renew,
      });
      dispatcher.adopt(session, table.name, lock);
    } catch {
      dropped.push(durable.released(l.lockId));
    }
  }
  // A record that cannot be written now is dropped again by the next recovery.
  await Promise.allSettled(dropped);
}
