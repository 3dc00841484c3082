import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { InvalidArgumentError, LockIOError } from '../core/errors.js';
import { parseDescriptor } from '../rows/postgres-catalog-store.js';
import {
  connectStorage,
  type StorageDatabase,
  storageDatabase,
} from '../rows/postgres-storage-connection.js';
import {
  ensureStorageSchema,
  type StorageTables,
  tablesOf,
} from '../rows/postgres-storage-schema.js';
import type { TableDescriptor } from '../rows/table-descriptor.js';
import { describe } from '../store/describe-error.js';
import type { FleetSplit } from './table-catalog.js';

/** The fleet's tables beside the region storage's (same prefix), and their version. */
export const FLEET_SCHEMA_VERSION = 1;
/**
 * Where the fleet's leases and claims are: in these tables, or in etcd (`EtcdFleetStore`). The
 * prefix is marked with the name of its kind (`'fleet'` or `'fleet-etcd'`): two kinds of
 * fleet on one prefix would each claim regions the other serves.
 */
export type FleetLeases = 'postgres' | 'etcd';
const SCHEMA_NAMES: Record<FleetLeases, string> = { postgres: 'fleet', etcd: 'fleet-etcd' };
/** The database's clock, in ms and µs: leases are decided on it alone (no two machines' clocks are compared). */
const NOW_MS = 'CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)';
const NOW_US = 'CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000) AS BIGINT)';
/** How long a transaction of the fleet may wait for its member's next statement. */
const IDLE_IN_TRANSACTION_MS = 1000;
/** A member whose lease ran out this long ago is forgotten (its row would otherwise stay forever). */
const PRUNE_AFTER_MS = 60_000;
const PRUNE_EVERY_MS = 10_000;

/** A server of the fleet as the database has it. */
export interface FleetMemberRow {
  id: string;
  address: string;
  /** When it joined, on the database's clock (ms since the epoch). */
  joinedMs: number;
  /** Its lease is live on the database's clock now. */
  live: boolean;
  /** It is leaving (SIGTERM): it takes no region and hands over what it serves. */
  leaving: boolean;
}

/** A region's claim: the member serving it (`null`: nobody) and the claim's epoch. */
export interface FleetRegionRow {
  region: string;
  owner: string | null;
  /** The storage epoch of the current (or last) claim; it only grows. */
  epoch: number;
}

/** One read of the whole fleet, at one moment of the database. */
export interface FleetView {
  members: FleetMemberRow[];
  regions: FleetRegionRow[];
}

/**
 * What a fleet member needs of the fleet's state: {@link FleetStore} (leases and claims in
 * PostgreSQL) or `EtcdFleetStore` (in etcd, the tables still in PostgreSQL).
 */
export type FleetCoordination = Pick<
  FleetStore,
  | 'leases'
  | 'join'
  | 'renew'
  | 'leave'
  | 'view'
  | 'descriptors'
  | 'freshEpoch'
  | 'addRegions'
  | 'forgetRegions'
  | 'claim'
  | 'claimDaughter'
  | 'commitSplit'
  | 'lockTables'
  | 'fence'
  | 'release'
  | 'close'
>;

/**
 * The fleet's state in PostgreSQL (HBase keeps it in ZooKeeper and `hbase:meta`):
 *
 * - `<prefix>_fleet_members (id, address, joined_ms, expires_ms, leaving)`: one row per
 *   server; its lease ends at `expires_ms` on the database's clock. A join inserts a new id
 *   (a restarted server is a new member); a renewal moves `expires_ms` only while it is still
 *   in the future, so a member whose lease ran out can never come back to life: it must join
 *   again, by which time its regions may be someone else's.
 * - `<prefix>_fleet_regions (region, owner, epoch)`: who serves each region. A claim succeeds
 *   only while the claimer's lease is live and the region has no owner, or an owner whose lease
 *   ran out; it raises `epoch` to `max(epoch + 1, database time in µs)`, which is the epoch the
 *   claimer opens the region's storage with: the storage refuses every write of the earlier
 *   owner from then on (its fence is in the write's own statement).
 * - `<prefix>_fleet_locks (tbl, row, lock_id, token, holder, renew, lease_ms)`: the explicit
 *   row locks granted by the fleet's servers (see `FleetLocks`), so that a region's next
 *   server holds them too.
 *
 * A region's lease is its owner's: one renewal per server keeps all its regions (HBase region
 * servers, too, hold one ZooKeeper session, not one per region).
 */
export class FleetStore {
  readonly #db: StorageDatabase;
  /** The connection; after it failed, the next statement opens another. */
  #client: pg.Client | undefined;
  readonly #t: {
    members: string;
    regions: string;
    locks: string;
    schema: string;
    storage: StorageTables;
  };
  #failure: unknown;
  #closed = false;
  /** When the next look forgets members long gone (performance.now()). */
  #pruneAt = 0;
  /** Where the claims are: with `'etcd'`, only the storage's own rows fence (see {@link fence}). */
  readonly leases: FleetLeases;

  private constructor(
    client: pg.Client,
    tables: StorageTables,
    db: StorageDatabase,
    leases: FleetLeases,
  ) {
    this.#db = db;
    this.leases = leases;
    this.#watch(client);
    const p = tables.regions.slice(0, -'_regions'.length);
    this.#t = {
      members: `${p}_fleet_members`,
      regions: `${p}_fleet_regions`,
      locks: `${p}_fleet_locks`,
      schema: tables.schema,
      storage: tables,
    };
  }

  #watch(client: pg.Client): void {
    this.#client = client;
    this.#failure = undefined;
    client.on('error', (err) => {
      this.#failure ??= err;
    });
  }

  /** Connects and creates the fleet's tables if missing (the region storage's must exist). */
  static async open(options: {
    database: string;
    tablePrefix?: string | undefined;
    leases?: FleetLeases | undefined;
  }): Promise<FleetStore> {
    const tables = tablesOf(options.tablePrefix ?? 'locksmith');
    const db: StorageDatabase = storageDatabase(options.database);
    const client = await connectStorage(db, 'fleet');
    const store = new FleetStore(client, tables, db, options.leases ?? 'postgres');
    try {
      await ensureStorageSchema(client, tables);
      await store.#ensureSchema();
    } catch (err) {
      await client.end().catch(() => undefined);
      if (err instanceof InvalidArgumentError) throw err;
      throw store.#ioError('creating the fleet tables', err);
    }
    return store;
  }

  async #ensureSchema(): Promise<void> {
    const { members, regions, schema } = this.#t;
    const client = this.#client as pg.Client;
    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [members]);
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${members} (id TEXT PRIMARY KEY, address TEXT NOT NULL, joined_ms BIGINT NOT NULL, expires_ms BIGINT NOT NULL, leaving BOOLEAN NOT NULL DEFAULT FALSE)`,
      );
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${regions} (region TEXT PRIMARY KEY, owner TEXT, epoch BIGINT NOT NULL DEFAULT 0)`,
      );
      // Added to version 1 (a table more, nothing changed): a fleet made before has none yet.
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${this.#t.locks} (tbl TEXT NOT NULL, row BYTEA NOT NULL, lock_id TEXT NOT NULL, token BIGINT NOT NULL, holder TEXT NOT NULL, renew BOOLEAN NOT NULL, lease_ms BIGINT NOT NULL, PRIMARY KEY (tbl, row, lock_id))`,
      );
      const mine = SCHEMA_NAMES[this.leases];
      const other = SCHEMA_NAMES[this.leases === 'etcd' ? 'postgres' : 'etcd'];
      const marks = new Set(
        (
          await client.query(`SELECT name FROM ${schema} WHERE name = ANY($1::text[])`, [
            [mine, other],
          ])
        ).rows.map((r: { name: string }) => r.name),
      );
      const prefix = members.slice(0, -'_fleet_members'.length);
      if (marks.has(other)) {
        throw new InvalidArgumentError(
          `The tables of prefix ${prefix} belong to a fleet whose leases are in ${this.leases === 'etcd' ? 'PostgreSQL' : 'etcd'}: its members and this server would each claim regions the other serves. Start this server ${this.leases === 'etcd' ? 'without' : 'with'} --ha etcd, or give it a --storage-prefix of its own. To move the fleet, stop every member, then run: UPDATE ${schema} SET name = '${mine}' WHERE name = '${other}'`,
        );
      }
      const used = await client.query(
        `SELECT 1 FROM ${this.#t.storage.regions} WHERE region = 'catalog' UNION ALL SELECT 1 FROM ${this.#t.storage.tables} LIMIT 1`,
      );
      if (!marks.has(mine) && used.rowCount !== 0) {
        // Servers without --fleet (standalone, master/slave) have used these tables: a fleet's
        // opens would fence theirs, and theirs the fleet's.
        throw new InvalidArgumentError(
          `The tables of prefix ${prefix} were made by servers without --fleet: a fleet would take them from those servers. Give the fleet a --storage-prefix of its own, or, to turn these tables over to a fleet, stop every server that uses them, then run: INSERT INTO ${schema} (name, version) VALUES ('${mine}', ${FLEET_SCHEMA_VERSION})`,
        );
      }
      await client.query(
        `INSERT INTO ${schema} (name, version) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
        [mine, FLEET_SCHEMA_VERSION],
      );
      const found = Number(
        (await client.query(`SELECT version FROM ${schema} WHERE name = $1`, [mine])).rows[0]
          ?.version,
      );
      if (found !== FLEET_SCHEMA_VERSION) {
        throw new LockIOError(
          `The fleet tables ${members}, ${regions} have schema version ${found}; this locksmith reads version ${FLEET_SCHEMA_VERSION} only`,
        );
      }
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }

  /** Joins as a new member with a lease of `leaseMs`; its id is unguessable and never reused. */
  async join(address: string, leaseMs: number): Promise<string> {
    const id = randomBytes(9).toString('base64url');
    await this.#query(
      'joining',
      `INSERT INTO ${this.#t.members} (id, address, joined_ms, expires_ms) VALUES ($1, $2, ${NOW_MS}, ${NOW_MS} + $3)`,
      [id, address, leaseMs],
    );
    return id;
  }

  /** Extends `id`'s lease to `leaseMs` from now; false when it had run out (the member must join again). */
  async renew(id: string, leaseMs: number, leaving = false): Promise<boolean> {
    const r = await this.#query(
      'renewing the lease',
      `UPDATE ${this.#t.members} SET expires_ms = ${NOW_MS} + $2, leaving = leaving OR $3 WHERE id = $1 AND expires_ms > ${NOW_MS}`,
      [id, leaseMs, leaving],
    );
    return r.rowCount === 1;
  }

  /** Leaves: gives back every region `id` holds and forgets it. */
  async leave(id: string): Promise<void> {
    const { members, regions } = this.#t;
    await this.#query(
      'leaving',
      `WITH r AS (UPDATE ${regions} SET owner = NULL WHERE owner = $1) DELETE FROM ${members} WHERE id = $1`,
      [id],
    );
  }

  /**
   * Every member and region claim, as of one statement; forgets members long gone (every
   * {@link PRUNE_EVERY_MS} at most: a look comes every second, a gone member is rare).
   */
  async view(): Promise<FleetView> {
    const { members, regions } = this.#t;
    if (performance.now() >= this.#pruneAt) {
      await this.#query(
        'forgetting members long gone',
        `DELETE FROM ${members} WHERE expires_ms < ${NOW_MS} - $1`,
        [PRUNE_AFTER_MS],
      );
      this.#pruneAt = performance.now() + PRUNE_EVERY_MS;
    }
    const r = await this.#query(
      'reading the fleet',
      `SELECT 'm' AS kind, id AS a, address AS b, joined_ms AS c, (expires_ms > ${NOW_MS}) AS live, leaving FROM ${members}
       UNION ALL SELECT 'r', region, owner, epoch, NULL, NULL FROM ${regions}`,
    );
    const view: FleetView = { members: [], regions: [] };
    for (const row of r.rows as {
      kind: string;
      a: string;
      b: string | null;
      c: string;
      live: boolean | null;
      leaving: boolean | null;
    }[]) {
      if (row.kind === 'm') {
        view.members.push({
          id: row.a,
          address: row.b ?? '',
          joinedMs: Number(row.c),
          live: row.live === true,
          leaving: row.leaving === true,
        });
      } else {
        view.regions.push({ region: row.a, owner: row.b, epoch: Number(row.c) });
      }
    }
    return view;
  }

  /** Every table's descriptor in the storage's catalog (read, not claimed). */
  async descriptors(): Promise<TableDescriptor[]> {
    const t = this.#t.storage;
    const r = await this.#query(
      'reading the table catalog',
      `SELECT name, descriptor FROM ${t.tables} ORDER BY name`,
    );
    return (r.rows as { name: string; descriptor: string }[]).map((row) =>
      parseDescriptor(row.name, row.descriptor, t),
    );
  }

  /**
   * An epoch above every one the storage has seen (the catalog's and every region's) and not
   * below the database's time in µs: what an administrative change claims the catalog with.
   */
  async freshEpoch(): Promise<number> {
    const r = await this.#query(
      'reading the epochs',
      `SELECT GREATEST(COALESCE(MAX(epoch), 0) + 1, ${NOW_US}) AS epoch FROM ${this.#t.storage.regions}`,
    );
    return Number(r.rows[0]?.epoch);
  }

  /** Records regions the fleet must serve (no owner yet); known ones are left as they are. */
  async addRegions(names: readonly string[]): Promise<void> {
    if (names.length === 0) return;
    await this.#query(
      'recording regions',
      `INSERT INTO ${this.#t.regions} (region) SELECT unnest($1::text[]) ON CONFLICT (region) DO NOTHING`,
      [names],
    );
  }

  /** Forgets regions nobody serves (their table was dropped); a served one stays. */
  async forgetRegions(names: readonly string[]): Promise<void> {
    if (names.length === 0) return;
    await this.#query(
      'forgetting regions',
      `DELETE FROM ${this.#t.regions} WHERE region = ANY($1::text[]) AND owner IS NULL`,
      [names],
    );
  }

  /**
   * SQL: member `who` (a column or parameter) holds a live lease on the database's clock; with
   * `taking`, it is not leaving either (a member that may take regions).
   */
  #live(who: string, taking = false): string {
    return `EXISTS (SELECT 1 FROM ${this.#t.members} m WHERE m.id = ${who} AND m.expires_ms > ${NOW_MS}${taking ? ' AND NOT m.leaving' : ''})`;
  }

  /**
   * Claims `region` for member `id`: only while `id`'s lease is live and the region has no
   * owner, or one whose lease ran out. Resolves with the claim's epoch (the storage epoch to
   * open the region with), or `undefined` when the claim was refused.
   */
  async claim(id: string, region: string): Promise<number | undefined> {
    const { regions } = this.#t;
    const r = await this.#query(
      `claiming region ${region}`,
      `UPDATE ${regions} SET owner = $1, epoch = GREATEST(epoch + 1, ${NOW_US}) WHERE region = $2
         AND ${this.#live('$1', true)}
         AND (owner IS NULL OR NOT ${this.#live('owner')})
       RETURNING epoch`,
      [id, region],
    );
    const epoch = r.rows[0]?.epoch;
    return epoch === undefined ? undefined : Number(epoch);
  }

  /**
   * Claims `region`, a daughter a live split of one of `id`'s regions is making, for `id`:
   * recorded if new, else taken only while nobody live owns it (what an earlier split that did
   * not commit left). Its epoch is above every one the storage has seen. Resolves with the
   * epoch, or `undefined` when refused. Nobody else claims it while `id` lives, and no table
   * describes it until the split commits; if `id` dies first, it is a dropped table's region
   * to every member, and the first to get to it deletes what its storage keeps.
   */
  async claimDaughter(id: string, region: string): Promise<number | undefined> {
    const { regions, storage } = this.#t;
    const r = await this.#query(
      `claiming region ${region}`,
      `INSERT INTO ${regions} AS f (region, owner, epoch)
         SELECT $2, $1, GREATEST((SELECT COALESCE(MAX(epoch), 0) + 1 FROM ${storage.regions}), ${NOW_US})
         WHERE ${this.#live('$1', true)}
       ON CONFLICT (region) DO UPDATE SET owner = $1, epoch = GREATEST(f.epoch + 1, EXCLUDED.epoch)
         WHERE f.owner IS NULL OR f.owner = $1 OR NOT ${this.#live('f.owner')}
       RETURNING epoch`,
      [id, region],
    );
    const epoch = r.rows[0]?.epoch;
    return epoch === undefined ? undefined : Number(epoch);
  }

  /**
   * The commit point of a live split, one transaction: table `split.table`'s descriptor gains
   * split key `split.key`, only while member `id` is live and still holds the region being
   * split (`parent`, with `parentEpoch`) and its daughter (with `daughterEpoch`), and the
   * catalog still gives the parent the range `[startKey, endKey)` (another member may have
   * split another region of the table meanwhile: that stays). A member claiming either region
   * after this sees the split: it reads the catalog after its claim. Resolves with the
   * descriptor recorded, or with why it was refused (nothing changed); throws `LOCK_IO` when
   * the outcome is unknown.
   */
  async commitSplit(
    id: string,
    split: FleetSplit & { parentEpoch: number; daughterEpoch: number },
  ): Promise<{ recorded: TableDescriptor } | { refused: string }> {
    return this.#transaction('recording a split', async (client) => {
      const { regions, storage } = this.#t;
      const etcd = this.leases === 'etcd';
      // With leases in etcd the claims are not here: the storage's rows of both regions fence
      // instead. A claimer raises a region's epoch there (`fence`) before it reads the catalog,
      // so either this commit waits for it and is refused, or it sees the split.
      const claims = new Map(
        (
          await client.query(
            etcd
              ? `SELECT region, $2::text AS owner, epoch FROM ${storage.regions} WHERE region = ANY($1::text[]) ORDER BY region FOR UPDATE`
              : `SELECT region, owner, epoch FROM ${regions} WHERE region = ANY($1::text[]) FOR UPDATE`,
            etcd ? [[split.parent, split.daughter], id] : [[split.parent, split.daughter]],
          )
        ).rows.map((r: { region: string; owner: string | null; epoch: string }) => [r.region, r]),
      );
      for (const [name, epoch] of [
        [split.parent, split.parentEpoch],
        [split.daughter, split.daughterEpoch],
      ] as const) {
        const claim = claims.get(name);
        if (claim?.owner !== id || Number(claim.epoch) !== epoch)
          return { refused: `region ${name} is no longer this server's` };
      }
      if (!etcd) {
        const live = await client.query(`SELECT ${this.#live('$1')} AS live`, [id]);
        if (live.rows[0]?.live !== true) return { refused: "this server's fleet lease ran out" };
      }
      const row = (
        await client.query(`SELECT descriptor FROM ${storage.tables} WHERE name = $1 FOR UPDATE`, [
          split.table,
        ])
      ).rows[0] as { descriptor: string } | undefined;
      if (row === undefined) return { refused: `table ${split.table} was dropped` };
      const descriptor = parseDescriptor(split.table, row.descriptor, storage);
      const starts = ['', ...descriptor.splits];
      const i = starts.indexOf(split.startKey);
      if (i < 0 || (starts[i + 1] ?? '') !== split.endKey)
        return { refused: 'the region was split meanwhile' };
      const recorded: TableDescriptor = {
        ...descriptor,
        splits: [...descriptor.splits.slice(0, i), split.key, ...descriptor.splits.slice(i)],
      };
      await client.query(`UPDATE ${storage.tables} SET descriptor = $2 WHERE name = $1`, [
        split.table,
        JSON.stringify(recorded),
      ]);
      return { recorded };
    });
  }

  /**
   * Where the fleet's row locks are recorded (see `FleetLocks`), and the statement reading the
   * claims that fence them (`$1` the regions, `$2` the member; region and epoch of those still
   * the member's, locked against a claim until the transaction ends). With leases in etcd the
   * storage's own row of each region fences: a claimer raises its epoch (`fence`, `FOR UPDATE`)
   * before it reads the records; `FOR KEY SHARE` leaves the region's own appends free.
   */
  get lockTables(): { db: StorageDatabase; locks: string; claimsSql: string } {
    return {
      db: this.#db,
      locks: this.#t.locks,
      claimsSql:
        this.leases === 'etcd'
          ? `SELECT region, epoch FROM ${this.#t.storage.regions} WHERE region = ANY($1::text[]) AND $2::text IS NOT NULL FOR KEY SHARE`
          : `SELECT region, epoch FROM ${this.#t.regions} WHERE region = ANY($1::text[]) AND owner = $2 FOR SHARE`,
    };
  }

  /**
   * Leases in etcd: raises region `region`'s epoch in the storage to `epoch` (a claim's), which
   * fences its earlier server's writes, lock records and split there from now on. A claimer
   * calls it after its claim and before it reads the catalog or the lock records (an etcd claim
   * and a PostgreSQL commit share no transaction; this row is where they meet). False when the
   * storage has a newer epoch already (the claim is stale). With leases here, the claim itself
   * fences: nothing to do.
   */
  async fence(region: string, epoch: number): Promise<boolean> {
    if (this.leases !== 'etcd') return true;
    return this.#transaction(`fencing region ${region}`, async (client) => {
      const { regions } = this.#t.storage;
      await client.query(
        `INSERT INTO ${regions} (region) VALUES ($1) ON CONFLICT (region) DO NOTHING`,
        [region],
      );
      const found = Number(
        (await client.query(`SELECT epoch FROM ${regions} WHERE region = $1 FOR UPDATE`, [region]))
          .rows[0]?.epoch,
      );
      if (found > epoch) return { refused: `epoch ${found} is newer` };
      await client.query(
        `UPDATE ${regions} SET epoch = $2, generation = generation + 1 WHERE region = $1`,
        [region, epoch],
      );
      return true;
    }).then((out) => out === true);
  }

  /** The largest epoch the storage has seen (the catalog's and every region's), 0 if none. */
  async maxEpoch(): Promise<number> {
    const r = await this.#query(
      'reading the epochs',
      `SELECT GREATEST(COALESCE(MAX(epoch), 0), ${NOW_US}) AS epoch FROM ${this.#t.storage.regions}`,
    );
    return Number(r.rows[0]?.epoch);
  }

  /** Gives `region` back if `id` still holds it with `epoch`; true when it did. */
  async release(id: string, region: string, epoch: number): Promise<boolean> {
    const r = await this.#query(
      `giving region ${region} back`,
      `UPDATE ${this.#t.regions} SET owner = NULL WHERE region = $1 AND owner = $2 AND epoch = $3`,
      [region, id, epoch],
    );
    return r.rowCount === 1;
  }

  async close(): Promise<void> {
    const client = this.#client;
    this.#client = undefined;
    this.#closed = true;
    await client?.end().catch(() => undefined);
  }

  async #query(what: string, sql: string, args: unknown[] = []): Promise<pg.QueryResult> {
    return this.#run(what, (client) => client.query(sql, args));
  }

  /**
   * `work` between BEGIN and COMMIT (ROLLBACK when it throws, or returns a refusal), on a
   * connection of its own: the shared one's renewals and looks must never land inside it.
   */
  async #transaction<T>(what: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
    const failed = (err: unknown) =>
      new LockIOError(`Fleet in ${this.#db.where}: ${what} failed: ${describe(err)}`, {
        cause: err,
      });
    if (this.#closed) throw failed(new Error('the fleet store is closed'));
    let client: pg.Client;
    try {
      client = await connectStorage(this.#db, 'fleet');
    } catch (err) {
      throw failed(err);
    }
    client.on('error', () => undefined);
    try {
      // A member stopped inside the transaction (SIGSTOP) holds its row locks, which the
      // others' claims wait for: the database ends such a transaction after a moment (rolled
      // back; to the member, an unknown outcome).
      await client.query(`SET idle_in_transaction_session_timeout = ${IDLE_IN_TRANSACTION_MS}`);
      await client.query('BEGIN');
      const out = await work(client);
      await client.query(
        typeof out === 'object' && out !== null && 'refused' in out ? 'ROLLBACK' : 'COMMIT',
      );
      return out;
    } catch (err) {
      throw err instanceof LockIOError ? err : failed(err);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  async #run<T>(what: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
    try {
      if (this.#closed) throw new Error('the fleet store is closed');
      if (this.#client === undefined || this.#failure !== undefined) {
        const old = this.#client;
        this.#client = undefined;
        await old?.end().catch(() => undefined);
        this.#watch(await connectStorage(this.#db, 'fleet'));
      }
      return await work(this.#client as pg.Client);
    } catch (err) {
      // A statement that failed on a connection that broke: the next one reconnects.
      if (this.#failure === undefined && (err as { code?: string }).code === undefined)
        this.#failure = err;
      throw this.#ioError(what, err);
    }
  }

  #ioError(what: string, err: unknown): LockIOError {
    if (err instanceof LockIOError) return err;
    const cause = this.#failure ?? err;
    return new LockIOError(`Fleet in ${this.#db.where}: ${what} failed: ${describe(cause)}`, {
      cause,
    });
  }
}
