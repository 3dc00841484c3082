import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { Clock } from '../core/clock.js';
import { decodeCells } from '../rows/cell-codec.js';
import { LOCK_ID } from '../rows/lock-id.js';
import type { OpenRegionStorage, RegionStorage } from '../rows/region-storage.js';
import { RowStorage } from '../rows/row-storage.js';

/** A session as the journal keeps it: everything but its secret id (only the id's digest). */
export interface JournalSession {
  /** `sessionKey(id)`: finds the session when its client presents the id again. */
  readonly key: string;
  readonly leaseMs: number;
  readonly releaseOnDisconnect: boolean;
  readonly client: string;
}

/** An explicit row lock granted to a session. */
export interface JournalLock {
  readonly lockId: string;
  readonly table: string;
  /** The row, as the region keys it (latin1, a character a byte). */
  readonly row: string;
  readonly token: number;
  /** The holder's `JournalSession.key`. */
  readonly session: string;
  /** Held while the session lives (no lease of its own). */
  readonly renew: boolean;
}

/** What a journal held when it opened: the sessions and the locks to put back. */
export interface JournalState {
  readonly sessions: JournalSession[];
  /** One per row at most: where two grants of a row were recorded, the newer (larger token). */
  readonly locks: JournalLock[];
}

export interface SessionJournalOptions {
  durability: 'fsync' | 'none';
  clock: Clock;
  /** The mastership token (absent: standalone): the journal is fenced as the tables are. */
  epoch?: number | undefined;
  openStorage?: OpenRegionStorage | undefined;
}

/** The digest that names a session in the journal (and on the server): sha-256, base64url. */
export function sessionKey(id: string): string {
  return createHash('sha256').update(id).digest('base64url');
}

/** The first byte of every record of this journal (a region's records start with 0 or 1). */
const FORMAT = 'J';
const OPENED = 's';
const GRANTED = 'l';
const RELEASED = 'L';
const ENDED = 'S';

/**
 * A checkpoint starts once the log holds this many bytes, or twice what the last checkpoint
 * wrote if that is more: the cost of a checkpoint (linear in what is held) is paid once per
 * as many logged bytes, and the log a restart replays stays bounded.
 */
const CHECKPOINT_MIN_BYTES = 4 << 20;

/**
 * The durable record of a server's sessions and their explicit row locks, so that both
 * survive a restart and a failover (Chubby kept sessions and locks in its database for the
 * same reason). It lives under `<data>/sessions`, written through the same storage as the
 * tables (write-ahead log, group commit, checkpoints, epoch fencing): a deposed master's
 * records fail with `FENCED` like its data writes, and a new master reads what every earlier
 * master acknowledged.
 *
 * Each event is one log record — a session opened or ended, a lock granted or released — and
 * the journal keeps in memory only what stands: a small object per session, and the locks
 * until the server has put them back, after which it reads them from the server's sessions
 * ({@link followLocks}). A checkpoint writes what stands as one record each before the log
 * behind it is dropped. A session is recorded when it opens, a grant once its session's record
 * is durable and before the grant is answered, a release before it is answered. Records of
 * different locks need no order among themselves: where a release was not recorded before the
 * row's next grant was, the next grant's larger token tells which holds ({@link recover}), and
 * a lock whose session is gone is dropped. Renewals are not recorded: whoever opens the
 * journal starts every lease afresh.
 *
 * Why not a region (as the first version was): a lock's row in a memstore cost about 3 KB of
 * heap and a put plus a delete through the MVCC write path per lock cycle; a record here is
 * one encoded line and a map entry.
 */
export class SessionJournal {
  readonly #storage: RegionStorage;
  #recovered: Uint8Array[] | undefined;
  readonly #sessions = new Map<string, JournalSession>();
  /** The locks that stand, until {@link followLocks} hands that over to the server's sessions. */
  readonly #locks = new Map<string, JournalLock>();
  #liveLocks: (() => Iterable<JournalLock>) | undefined;
  #checkpointAt = CHECKPOINT_MIN_BYTES;

  private constructor(storage: RegionStorage, recovered: Uint8Array[]) {
    this.#storage = storage;
    this.#recovered = recovered;
  }

  static async open(dataDir: string, options: SessionJournalOptions): Promise<SessionJournal> {
    const open: OpenRegionStorage =
      options.openStorage ?? ((dir, o, accept) => RowStorage.open(dir, o, accept));
    const storageOptions =
      options.epoch === undefined
        ? { durability: options.durability }
        : { durability: options.durability, epoch: options.epoch };
    const { storage, recovered } = await open(join(dataDir, 'sessions'), storageOptions, () => {});
    return new SessionJournal(storage, [...recovered.snapshot, ...recovered.log]);
  }

  /**
   * Reads every session and lock recorded, and drops what no longer stands: a lock whose
   * session ended, an older grant of a row granted again since, a record that does not parse
   * (a checkpoint then writes only what stands). Call once, before anything is recorded.
   */
  async recover(): Promise<JournalState> {
    const records = this.#recovered ?? [];
    this.#recovered = undefined;
    let dropped = 0;
    for (const record of records) if (!this.#replay(record)) dropped++;
    const newest = new Map<string, JournalLock>();
    for (const lock of [...this.#locks.values()]) {
      const where = `${lock.table}\0${lock.row}`;
      const other = newest.get(where);
      if (!this.#sessions.has(lock.session)) {
        this.#locks.delete(lock.lockId);
        dropped++;
      } else if (other === undefined || other.token < lock.token) {
        if (other !== undefined) {
          this.#locks.delete(other.lockId);
          dropped++;
        }
        newest.set(where, lock);
      } else {
        this.#locks.delete(lock.lockId);
        dropped++;
      }
    }
    // Rewritten when the log holds more than what stands (releases, ends, dropped records) or
    // records of the first version: the next open reads one record per session and lock.
    const firstVersion = records.some((r) => r[0] !== FORMAT.charCodeAt(0));
    if (dropped > 0 || firstVersion || records.length > this.#sessions.size + this.#locks.size) {
      await this.#checkpoint();
    }
    return { sessions: [...this.#sessions.values()], locks: [...this.#locks.values()] };
  }

  /**
   * From now on a checkpoint writes the locks `live` lists, and the journal keeps no copy of
   * its own (a map entry and an object per held lock). `live` must list every lock whose grant
   * was recorded here and whose release was not, and may list a lock the moment before its
   * grant is recorded or leave it out the moment before its release is: a checkpoint then
   * writes a grant that is about to be recorded anyway, or leaves out one whose release is.
   * The server's sessions are such a list (a lock is made a session's in the same tick its
   * grant is recorded, and stops being one before its release is recorded).
   */
  followLocks(live: () => Iterable<JournalLock>): void {
    this.#liveLocks = live;
    this.#locks.clear();
  }

  /** Records a session (idempotent); resolves once it is durable. */
  opened(session: JournalSession): Promise<void> {
    this.#sessions.set(session.key, session);
    const { leaseMs, releaseOnDisconnect, client } = session;
    return this.#append(OPENED, { key: session.key, leaseMs, releaseOnDisconnect, client });
  }

  /**
   * Records a grant; resolves once it is durable. Record the session first ({@link opened}):
   * a lock whose session is not recorded is dropped by {@link recover}.
   */
  granted(lock: JournalLock): Promise<void> {
    if (this.#liveLocks === undefined) this.#locks.set(lock.lockId, lock);
    const { lockId, table, row, token, session, renew } = lock;
    return this.#append(GRANTED, { lockId, table, row, token, session, renew });
  }

  /** Records that a lock is no longer held (released, expired, its session ended). */
  released(lockId: string): Promise<void> {
    this.#locks.delete(lockId);
    return this.#append(RELEASED, { lockId });
  }

  /** Records a session's end; its locks' records go with their own {@link released}. */
  ended(key: string): Promise<void> {
    this.#sessions.delete(key);
    return this.#append(ENDED, { key });
  }

  close(): Promise<void> {
    return this.#storage.close();
  }

  #append(kind: string, fields: object): Promise<void> {
    const written = this.#storage.append(encode(kind, fields));
    const storage = this.#storage;
    if (storage.logBytes >= this.#checkpointAt && !storage.checkpointing) {
      // A failed checkpoint leaves the storage refusing appends: the next record reports it.
      this.#checkpoint().catch(() => undefined);
    }
    return written;
  }

  /** Writes what stands as one record each; the log before it is dropped. */
  async #checkpoint(): Promise<void> {
    let bytes = 0;
    await this.#storage.checkpoint(() => {
      const records: Buffer[] = [];
      for (const session of this.#sessions.values()) {
        const { key, leaseMs, releaseOnDisconnect, client } = session;
        records.push(encode(OPENED, { key, leaseMs, releaseOnDisconnect, client }));
      }
      for (const lock of this.#liveLocks?.() ?? this.#locks.values()) {
        const { lockId, table, row, token, session, renew } = lock;
        records.push(encode(GRANTED, { lockId, table, row, token, session, renew }));
      }
      for (const record of records) bytes += record.length;
      return records;
    });
    this.#checkpointAt = Math.max(CHECKPOINT_MIN_BYTES, 2 * bytes);
  }

  /** Applies one stored record; false if it does not parse (it is then dropped). */
  #replay(record: Uint8Array): boolean {
    if (record[0] !== FORMAT.charCodeAt(0)) return this.#replayRegionRecord(record);
    const text = Buffer.from(record.buffer, record.byteOffset, record.byteLength).toString('utf8');
    const fields = parse(text.slice(2));
    if (fields === undefined) return false;
    switch (text[1]) {
      case OPENED: {
        const session = sessionOf(fields.key, fields);
        if (session !== undefined) this.#sessions.set(session.key, session);
        return session !== undefined;
      }
      case GRANTED: {
        const lock = lockOf(fields.lockId, fields);
        if (lock !== undefined) this.#locks.set(lock.lockId, lock);
        return lock !== undefined;
      }
      case RELEASED:
        if (typeof fields.lockId !== 'string') return false;
        this.#locks.delete(fields.lockId);
        return true;
      case ENDED:
        if (typeof fields.key !== 'string') return false;
        this.#sessions.delete(fields.key);
        return true;
      default:
        return false;
    }
  }

  /**
   * A record of the journal's first version, a region with a row per session (`s` + key) and
   * per lock (`l` + id): a put records, a delete drops.
   */
  #replayRegionRecord(record: Uint8Array): boolean {
    let cells: ReturnType<typeof decodeCells>['cells'];
    try {
      ({ cells } = decodeCells(record));
    } catch {
      return false;
    }
    let ok = true;
    for (const cell of cells) {
      const kind = cell.row[0];
      const id = cell.row.slice(1);
      if (cell.type !== 'Put') {
        if (kind === 's') this.#sessions.delete(id);
        else this.#locks.delete(id);
        continue;
      }
      const fields = parse(cell.value.toString('utf8'));
      const session = kind === 's' && fields !== undefined ? sessionOf(id, fields) : undefined;
      const lock = kind === 'l' && fields !== undefined ? lockOf(id, fields) : undefined;
      if (session !== undefined) this.#sessions.set(session.key, session);
      else if (lock !== undefined) this.#locks.set(lock.lockId, lock);
      else ok = false;
    }
    return ok;
  }
}

function encode(kind: string, fields: object): Buffer {
  // Rows are latin1 (a byte a character) and clients any text: JSON in UTF-8 keeps both exact.
  return Buffer.from(`${FORMAT}${kind}${JSON.stringify(fields)}`, 'utf8');
}

function parse(text: string): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

function sessionOf(key: unknown, v: Record<string, unknown>): JournalSession | undefined {
  const { leaseMs, releaseOnDisconnect, client } = v;
  if (
    typeof key !== 'string' ||
    !/^[A-Za-z0-9_-]{43}$/.test(key) ||
    !Number.isSafeInteger(leaseMs) ||
    (leaseMs as number) <= 0 ||
    typeof releaseOnDisconnect !== 'boolean' ||
    typeof client !== 'string'
  ) {
    return undefined;
  }
  return { key, leaseMs: leaseMs as number, releaseOnDisconnect, client };
}

function lockOf(lockId: unknown, v: Record<string, unknown>): JournalLock | undefined {
  const { table, row, token, session, renew } = v;
  if (
    typeof lockId !== 'string' ||
    !LOCK_ID.test(lockId) ||
    typeof table !== 'string' ||
    typeof row !== 'string' ||
    row.length === 0 ||
    !Number.isSafeInteger(token) ||
    typeof session !== 'string' ||
    typeof renew !== 'boolean'
  ) {
    return undefined;
  }
  return { lockId, table, row, token: token as number, session, renew };
}
