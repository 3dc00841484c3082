import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { Clock } from '../core/clock.js';
import { LOCK_ID } from '../rows/lock-id.js';
import { Delete, Put } from '../rows/mutation.js';
import { Scan } from '../rows/query.js';
import { Region } from '../rows/region.js';
import type { OpenRegionStorage } from '../rows/region-storage.js';

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

const SESSION = 's';
const LOCK = 'l';
const VALUE = 'v';

/**
 * The durable record of a server's sessions and their explicit row locks, so that both
 * survive a restart and a failover (Chubby kept sessions and locks in its database for the
 * same reason). It is a region of its own under `<data>/sessions`, written through the same
 * write-ahead log, group commit, checkpoints and epoch fencing as the tables: a deposed
 * master's records fail with `FENCED` like its data writes, and a new master reads what every
 * earlier master acknowledged.
 *
 * A session is one row (`s` + its key), a lock one row (`l` + its id), so records of
 * different sessions and locks never wait for each other's row. A session is recorded when it
 * opens, a grant once its session's record is durable and before the grant is answered, a
 * release before it is answered; a session's end deletes its row. Records of different locks
 * need no order among themselves: where a release was not recorded before the row's next
 * grant was, the next grant's larger token tells which holds ({@link recover}), and a lock
 * whose session is gone is dropped. Renewals are not recorded: whoever opens the journal
 * starts every lease afresh.
 */
export class SessionJournal {
  readonly #region: Region;

  private constructor(region: Region) {
    this.#region = region;
  }

  static async open(dataDir: string, options: SessionJournalOptions): Promise<SessionJournal> {
    const region = await Region.open({
      families: [
        { name: SESSION, maxVersions: 1 },
        { name: LOCK, maxVersions: 1 },
      ],
      dir: join(dataDir, 'sessions'),
      durability: options.durability,
      clock: options.clock,
      ...(options.epoch === undefined ? {} : { epoch: options.epoch }),
      ...(options.openStorage === undefined ? {} : { openStorage: options.openStorage }),
    });
    return new SessionJournal(region);
  }

  /**
   * Reads every session and lock recorded, and deletes what no longer stands: a lock whose
   * session ended, an older grant of a row granted again since, a record that does not parse.
   * Call once, before anything is recorded.
   */
  async recover(): Promise<JournalState> {
    const sessions = new Map<string, JournalSession>();
    const locks: JournalLock[] = [];
    const doomed: string[] = [];
    for await (const result of this.#region.scan(new Scan())) {
      const row = result.row.toString('latin1');
      const value = result.cells.find((c) => c.qualifier === VALUE)?.value;
      const parsed = value === undefined ? undefined : parse(value);
      if (row[0] === SESSION) {
        const session = parsed === undefined ? undefined : sessionOf(row.slice(1), parsed);
        if (session === undefined) doomed.push(row);
        else sessions.set(session.key, session);
      } else {
        const lock = parsed === undefined ? undefined : lockOf(row.slice(1), parsed);
        if (row[0] !== LOCK || lock === undefined) doomed.push(row);
        else locks.push(lock);
      }
    }
    const newest = new Map<string, JournalLock>();
    for (const lock of locks) {
      if (!sessions.has(lock.session)) {
        doomed.push(LOCK + lock.lockId);
        continue;
      }
      const where = `${lock.table}\0${lock.row}`;
      const other = newest.get(where);
      if (other === undefined || other.token < lock.token) {
        if (other !== undefined) doomed.push(LOCK + other.lockId);
        newest.set(where, lock);
      } else {
        doomed.push(LOCK + lock.lockId);
      }
    }
    if (doomed.length > 0) {
      await this.#region.mutateRows(doomed.map((row) => new Delete(Buffer.from(row, 'latin1'))));
    }
    return { sessions: [...sessions.values()], locks: [...newest.values()] };
  }

  /** Records a session (idempotent); resolves once it is durable. */
  opened(session: JournalSession): Promise<void> {
    return this.#region.put(sessionPut(session));
  }

  /**
   * Records a grant; resolves once it is durable. Record the session first ({@link opened}):
   * a lock whose session is not recorded is dropped by {@link recover}.
   */
  granted(lock: JournalLock): Promise<void> {
    return this.#region.put(lockPut(lock));
  }

  /** Records that a lock is no longer held (released, expired, its session ended). */
  released(lockId: string): Promise<void> {
    return this.#region.delete(new Delete(LOCK + lockId));
  }

  /** Records a session's end; its locks' records go with their own {@link released}. */
  ended(key: string): Promise<void> {
    return this.#region.delete(new Delete(SESSION + key));
  }

  close(): Promise<void> {
    return this.#region.close();
  }
}

function sessionPut(session: JournalSession): Put {
  const { leaseMs, releaseOnDisconnect, client } = session;
  return new Put(SESSION + session.key).add(
    SESSION,
    VALUE,
    JSON.stringify({ leaseMs, releaseOnDisconnect, client }),
  );
}

function lockPut(lock: JournalLock): Put {
  const { table, token, session, renew } = lock;
  // The row is latin1 (a byte a character): JSON keeps it exactly.
  return new Put(LOCK + lock.lockId).add(
    LOCK,
    VALUE,
    JSON.stringify({ table, row: lock.row, token, session, renew }),
  );
}

function parse(value: Buffer): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(value.toString('utf8'));
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

function sessionOf(key: string, v: Record<string, unknown>): JournalSession | undefined {
  const { leaseMs, releaseOnDisconnect, client } = v;
  if (
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

function lockOf(lockId: string, v: Record<string, unknown>): JournalLock | undefined {
  const { table, row, token, session, renew } = v;
  if (
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
