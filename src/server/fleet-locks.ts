import type pg from 'pg';
import { FencedError, LockIOError, UnknownRowLockError } from '../core/errors.js';
import { connectStorage, type StorageDatabase } from '../rows/postgres-storage-connection.js';
import type { Region } from '../rows/region.js';
import { type RowLock, type RowLockLossObserver, rowLockLost } from '../rows/row-lock.js';
import { describe } from '../store/describe-error.js';
import type { LockRecords } from './dispatch.js';
import type { Session } from './session.js';
import { sessionKey } from './session-journal.js';
import type { TableRegions } from './table-regions.js';

/** The claim a record is fenced by: the region serving the row here, and its claim's epoch. */
export interface RegionClaim {
  region: string;
  epoch: number;
}

/** How long a transaction of these records may wait for this server's next statement. */
const IDLE_IN_TRANSACTION_MS = 1000;
/** A lock recorded again (adopted by another session): its record names the new holder. */
const UPSERT =
  'ON CONFLICT (tbl, row, lock_id) DO UPDATE SET token = EXCLUDED.token, holder = EXCLUDED.holder, renew = EXCLUDED.renew, lease_ms = EXCLUDED.lease_ms';
/** Records per statement, at most (a larger group waits for the next). */
const MAX_GROUP = 1000;

interface Grant {
  kind: 'grant';
  table: string;
  row: Buffer;
  lockId: string;
  token: number;
  holder: string;
  renew: boolean;
  leaseMs: number;
  claim: RegionClaim | undefined;
  done: (err?: unknown) => void;
}

interface Release {
  kind: 'release';
  table: string;
  row: Buffer;
  lockId: string;
  claim: RegionClaim | undefined;
  done: (err?: unknown) => void;
}

/** A lock put back for a holder that has not come back yet (see {@link FleetLocks}). */
class Orphan implements RowLockLossObserver {
  readonly table: string;
  readonly lock: RowLock;
  /** `sessionKey` of the session that held it. */
  readonly holder: string;
  readonly renew: boolean;
  timer: NodeJS.Timeout | undefined;
  readonly #gone: (orphan: Orphan) => void;

  constructor(
    table: string,
    lock: RowLock,
    holder: string,
    renew: boolean,
    gone: (orphan: Orphan) => void,
  ) {
    this.table = table;
    this.lock = lock;
    this.holder = holder;
    this.renew = renew;
    this.#gone = gone;
  }

  /** The region closed (it moves on): the record stays for its next server. */
  [rowLockLost](): void {
    this.#gone(this);
  }
}

/**
 * The explicit row locks of a fleet's servers, recorded in PostgreSQL (`<prefix>_fleet_locks`)
 * so that a lock outlives its region's move: the region's next server puts every recorded lock
 * back before it serves the region, and the holder's client takes it over with
 * {@link adopt} (Chubby and etcd keep locks across a change of master for the same reason).
 *
 * - **Recorded before answered.** A grant is answered once its record is committed, an unlock
 *   once its record is deleted. Records made at once go in one transaction (group commit).
 * - **Fenced by the claim.** Each transaction first reads the claims of the regions it writes
 *   for, `FOR SHARE`, and writes only for those still this server's with the epoch it opened
 *   the region with (the others fail with `FENCED`). A claim that changes hands waits for such
 *   a transaction, and the claimer reads the records only after its claim committed: it sees
 *   every record written before, and none is written after.
 * - **Put back as orphans.** A lock put back holds its row, with its id and token, for the
 *   holder's session lease from the moment its region opens; it is no session's until the
 *   holder's client adopts it, proving that it held it with the id of the session that did
 *   (only its digest is recorded). One never adopted is released when that lease runs out.
 * - **Kept when a region closes.** A lock whose region closes (a move, a shutdown, a lost
 *   lease) is not recorded released: its client is told that it moved (`lockMoved`).
 */
export class FleetLocks implements LockRecords {
  readonly survivesRegionClose = true;
  readonly #db: StorageDatabase;
  readonly #locks: string;
  readonly #claimsSql: string;
  readonly #member: () => string | null;
  readonly #claimOf: (table: string, row: string) => RegionClaim | undefined;
  #client: pg.Client | undefined;
  #broken = false;
  #queue: (Grant | Release)[] = [];
  #flushing: Promise<void> | undefined;
  /** Where each recorded lock is, for its release. */
  readonly #where = new Map<string, { table: string; row: Buffer }>();
  readonly #orphans = new Map<string, Orphan>();
  /** The same, by `table\0row` (latin1): one lock per row at most. */
  readonly #orphanOn = new Map<string, Orphan>();
  #closed = false;

  constructor(options: {
    db: StorageDatabase;
    locks: string;
    /** Reads the claims fencing the records (see `FleetStore.lockTables`): `$1` regions, `$2` member. */
    claimsSql: string;
    /** This server's member id (null while it is not a member). */
    member: () => string | null;
    /** The claim fencing a record of `row` (latin1) of `table`; undefined if not served here. */
    claimOf: (table: string, row: string) => RegionClaim | undefined;
  }) {
    this.#db = options.db;
    this.#locks = options.locks;
    this.#claimsSql = options.claimsSql;
    this.#member = options.member;
    this.#claimOf = options.claimOf;
  }

  /** Locks put back and not adopted yet. */
  get orphans(): number {
    return this.#orphans.size;
  }

  granted(session: Session, table: string, lock: RowLock): Promise<void> {
    const row = lock.row.toString('latin1');
    this.#where.set(lock.lockId, { table, row: lock.row });
    return new Promise((resolve, reject) => {
      this.#push({
        kind: 'grant',
        table,
        row: lock.row,
        lockId: lock.lockId,
        token: lock.token,
        holder: session.key,
        renew: lock.leaseRemainingMs === Number.POSITIVE_INFINITY,
        leaseMs: session.leaseMs,
        claim: this.#claimOf(table, row),
        done: (err) => (err === undefined ? resolve() : reject(err)),
      });
    });
  }

  released(lockId: string): Promise<void> {
    const where = this.#where.get(lockId);
    if (where === undefined) return Promise.resolve();
    this.#where.delete(lockId);
    return this.#release(where.table, where.row, lockId);
  }

  #release(table: string, row: Buffer, lockId: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#push({
        kind: 'release',
        table,
        row,
        lockId,
        claim: this.#claimOf(table, row.toString('latin1')),
        done: (err) => (err === undefined ? resolve() : reject(err)),
      });
    });
  }

  /** A lock of a region that closed here (it moved): its record stays, for the next server. */
  movedAway(lockId: string): void {
    this.#where.delete(lockId);
  }

  /**
   * Puts back the locks recorded on `region`'s rows (`[startKey, endKey)` of `table`), each
   * held for its holder until adopted. Call after the region's claim (`name`, `epoch`) and its
   * opening, before it serves: nobody can take a recorded row meanwhile. Where two records name
   * one row (an unlock whose record failed), the larger token stands and the other is deleted.
   */
  async restore(
    table: string,
    range: { startKey: string; endKey: string },
    region: Region,
    claim: RegionClaim,
  ): Promise<void> {
    const found = await this.#run('reading the row locks of a region', (client) =>
      client.query(
        `SELECT row, lock_id, token, holder, renew, lease_ms FROM ${this.#locks} WHERE tbl = $1 AND row >= $2 AND ($3::bytea IS NULL OR row < $3) ORDER BY row, token DESC`,
        [
          table,
          Buffer.from(range.startKey, 'latin1'),
          range.endKey === '' ? null : Buffer.from(range.endKey, 'latin1'),
        ],
      ),
    );
    const stale: Promise<void>[] = [];
    let last: Buffer | undefined;
    for (const r of found.rows as {
      row: Buffer;
      lock_id: string;
      token: string;
      holder: string;
      renew: boolean;
      lease_ms: string;
    }[]) {
      const lockId = r.lock_id;
      const older = last?.equals(r.row) === true;
      last = r.row;
      if (older || this.#orphans.has(lockId)) {
        stale.push(this.#releaseFenced(table, r.row, lockId, claim));
        continue;
      }
      let orphan: Orphan | undefined;
      // Its region closed here (it moves on, its record stays for the next server).
      const gone = (o: Orphan) => {
        this.#forget(o);
        this.#where.delete(o.lock.lockId);
      };
      try {
        const owner = {
          [rowLockLost]: () => orphan?.[rowLockLost](),
        } as RowLockLossObserver;
        const lock = region.restoreRowLock(r.row, {
          lockId,
          token: Number(r.token),
          owner,
          renew: true,
        });
        orphan = new Orphan(table, lock, r.holder, r.renew, gone);
      } catch {
        stale.push(this.#releaseFenced(table, r.row, lockId, claim));
        continue;
      }
      this.#orphans.set(lockId, orphan);
      this.#orphanOn.set(`${table}\0${r.row.toString('latin1')}`, orphan);
      this.#where.set(lockId, { table, row: r.row });
      const o = orphan;
      o.timer = setTimeout(() => this.#expire(o), Number(r.lease_ms));
      o.timer.unref();
    }
    await Promise.allSettled(stale);
  }

  /**
   * Gives the lock `lockId` put back here to `session`, whose client proves with `holderId`
   * (the id of the session that held it before) that it is the holder (`row`: the checked
   * latin1 key); `UNKNOWN_ROW_LOCK` when
   * no such lock waits here for that holder (released, expired, or never granted). A lock the
   * session holds already (an adoption sent again) is answered again. `lockId` null: the lock
   * of that holder on `row`, if one waits here (a grant whose answer its client never got).
   */
  adopt(
    session: Session,
    table: string,
    regions: TableRegions,
    row: string,
    lockId: string | null,
    holderId: string,
  ): RowLock {
    const key = Buffer.from(row, 'latin1');
    const held = lockId === null ? undefined : session.locks.get(lockId);
    if (held !== undefined && held.table === table && held.lock.row.equals(key)) return held.lock;
    regions.checkServed(row);
    const orphan =
      lockId === null ? this.#orphanOn.get(`${table}\0${row}`) : this.#orphans.get(lockId);
    if (
      orphan === undefined ||
      orphan.table !== table ||
      !orphan.lock.row.equals(key) ||
      orphan.holder !== sessionKey(holderId)
    ) {
      throw new UnknownRowLockError(
        `Unknown row lock ${lockId ?? '(any)'}: no lock of that holder on that row waits here to be adopted (released, expired, or never granted)`,
      );
    }
    regions.transferRowLock(orphan.lock, session, orphan.renew);
    this.#forget(orphan);
    return orphan.lock;
  }

  /** Forgets every record of `table` (dropped, or created anew: nothing of before stands). */
  async tableGone(table: string): Promise<void> {
    await this.#run(`forgetting the row locks of table ${table}`, (client) =>
      client.query(`DELETE FROM ${this.#locks} WHERE tbl = $1`, [table]),
    );
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const orphan of [...this.#orphans.values()]) this.#forget(orphan);
    await this.#flushing?.catch(() => undefined);
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => undefined);
  }

  /** Its holder did not come back within its session lease: released, record and row. */
  #expire(orphan: Orphan): void {
    if (this.#orphans.get(orphan.lock.lockId) !== orphan) return;
    this.#forget(orphan);
    // Through the handle: a split since may have moved it to another region.
    orphan.lock.close().catch(() => undefined);
    this.released(orphan.lock.lockId).catch(() => undefined);
  }

  #forget(orphan: Orphan): void {
    clearTimeout(orphan.timer);
    if (this.#orphans.get(orphan.lock.lockId) === orphan) this.#orphans.delete(orphan.lock.lockId);
    const on = `${orphan.table}\0${orphan.lock.row.toString('latin1')}`;
    if (this.#orphanOn.get(on) === orphan) this.#orphanOn.delete(on);
  }

  #releaseFenced(table: string, row: Buffer, lockId: string, claim: RegionClaim): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#push({
        kind: 'release',
        table,
        row,
        lockId,
        claim,
        done: (err) => (err === undefined ? resolve() : reject(err)),
      });
    });
  }

  #push(op: Grant | Release): void {
    if (this.#closed) {
      op.done(new LockIOError('The server is closing: the row lock record was not written'));
      return;
    }
    this.#queue.push(op);
    this.#flushing ??= this.#flush();
  }

  /** Writes what is queued, one transaction at a time, each taking everything queued so far. */
  async #flush(): Promise<void> {
    try {
      while (this.#queue.length > 0) {
        const group = this.#queue.splice(0, MAX_GROUP);
        await this.#write(group);
      }
    } finally {
      this.#flushing = undefined;
      if (this.#queue.length > 0) this.#flushing = this.#flush();
    }
  }

  async #write(group: (Grant | Release)[]): Promise<void> {
    const me = this.#member();
    const claimed = [...new Set(group.flatMap((op) => (op.claim ? [op.claim.region] : [])))];
    const grants = group.filter((op): op is Grant => op.kind === 'grant');
    const releases = group.filter((op): op is Release => op.kind === 'release');
    let mine: Map<string, number>;
    try {
      mine = await this.#run('recording row locks', (client) => {
        const granted = new Set(grants.map((g) => g.lockId));
        // One statement (one round trip, one commit), unless a lock is granted and released in
        // the same group: a statement's DELETE does not see the rows its own INSERT made.
        return releases.some((r) => granted.has(r.lockId))
          ? this.#writeInSteps(client, me, claimed, grants, releases)
          : this.#writeAtOnce(client, me, claimed, grants, releases);
      });
    } catch (err) {
      for (const op of group) op.done(err);
      return;
    }
    for (const op of group) {
      if (op.claim !== undefined && mine.get(op.claim.region) === op.claim.epoch) op.done();
      else
        op.done(
          new FencedError(
            `The row lock record of ${op.lockId} was not written: its region is no longer this server's (another server claimed it, or this server's lease ran out)`,
          ),
        );
    }
  }

  /**
   * The claims read `FOR SHARE` and the records written for those still this server's, in one
   * statement; resolves with the claims held (region → epoch).
   */
  async #writeAtOnce(
    client: pg.Client,
    me: string | null,
    claimed: string[],
    grants: Grant[],
    releases: Release[],
  ): Promise<Map<string, number>> {
    const r = await client.query({
      name: 'fleet-locks-write',
      text: `WITH c AS (${this.#claimsSql}), g AS (SELECT * FROM unnest($3::text[], $4::bytea[], $5::text[], $6::bigint[], $7::text[], $8::boolean[], $9::bigint[], $10::text[], $11::bigint[]) AS g(tbl, row, lock_id, token, holder, renew, lease_ms, region, epoch)), ins AS (INSERT INTO ${this.#locks} (tbl, row, lock_id, token, holder, renew, lease_ms) SELECT g.tbl, g.row, g.lock_id, g.token, g.holder, g.renew, g.lease_ms FROM g JOIN c ON c.region = g.region AND c.epoch = g.epoch ${UPSERT}), del AS (DELETE FROM ${this.#locks} l USING unnest($12::text[], $13::bytea[], $14::text[], $15::text[], $16::bigint[]) AS d(tbl, row, lock_id, region, epoch) JOIN c ON c.region = d.region AND c.epoch = d.epoch WHERE l.tbl = d.tbl AND l.row = d.row AND l.lock_id = d.lock_id) SELECT region, epoch FROM c`,
      values: [
        claimed,
        me,
        ...grantColumns(grants),
        grants.map((g) => g.claim?.region ?? ''),
        grants.map((g) => String(g.claim?.epoch ?? 0)),
        releases.map((g) => g.table),
        releases.map((g) => g.row),
        releases.map((g) => g.lockId),
        releases.map((g) => g.claim?.region ?? ''),
        releases.map((g) => String(g.claim?.epoch ?? 0)),
      ],
    });
    return claimsOf(r.rows);
  }

  /** The same in a transaction of several statements: the grants, then the releases. */
  async #writeInSteps(
    client: pg.Client,
    me: string | null,
    claimed: string[],
    grants: Grant[],
    releases: Release[],
  ): Promise<Map<string, number>> {
    await client.query('BEGIN');
    try {
      const held = claimsOf((await client.query(this.#claimsSql, [claimed, me])).rows);
      const ok = (op: Grant | Release) =>
        op.claim !== undefined && held.get(op.claim.region) === op.claim.epoch;
      const g = grants.filter(ok);
      const d = releases.filter(ok);
      await client.query(
        `INSERT INTO ${this.#locks} (tbl, row, lock_id, token, holder, renew, lease_ms) SELECT * FROM unnest($1::text[], $2::bytea[], $3::text[], $4::bigint[], $5::text[], $6::boolean[], $7::bigint[]) ${UPSERT}`,
        grantColumns(g),
      );
      await client.query(
        `DELETE FROM ${this.#locks} l USING unnest($1::text[], $2::bytea[], $3::text[]) AS d(tbl, row, lock_id) WHERE l.tbl = d.tbl AND l.row = d.row AND l.lock_id = d.lock_id`,
        [d.map((x) => x.table), d.map((x) => x.row), d.map((x) => x.lockId)],
      );
      await client.query('COMMIT');
      return held;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }

  async #run<T>(what: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
    try {
      if (this.#client === undefined || this.#broken) {
        const old = this.#client;
        this.#client = undefined;
        await old?.end().catch(() => undefined);
        const client = await connectStorage(this.#db, 'fleet locks');
        this.#broken = false;
        client.on('error', () => {
          this.#broken = true;
        });
        // A server stopped inside a transaction (SIGSTOP) holds claims `FOR SHARE`, which a
        // claimer waits for: the database ends that transaction after a moment.
        await client.query(`SET idle_in_transaction_session_timeout = ${IDLE_IN_TRANSACTION_MS}`);
        this.#client = client;
      }
      return await work(this.#client);
    } catch (err) {
      if ((err as { code?: string }).code === undefined) this.#broken = true;
      throw err instanceof LockIOError
        ? err
        : new LockIOError(`Fleet in ${this.#db.where}: ${what} failed: ${describe(err)}`, {
            cause: err,
          });
    }
  }
}

function claimsOf(rows: { region: string; epoch: string }[]): Map<string, number> {
  return new Map(rows.map((c) => [c.region, Number(c.epoch)]));
}

/** The columns of grant records, in the table's order (tbl, row, lock_id, token, holder, renew, lease_ms). */
function grantColumns(grants: readonly Grant[]): unknown[][] {
  return [
    grants.map((g) => g.table),
    grants.map((g) => g.row),
    grants.map((g) => g.lockId),
    grants.map((g) => String(g.token)),
    grants.map((g) => g.holder),
    grants.map((g) => g.renew),
    grants.map((g) => String(g.leaseMs)),
  ];
}
