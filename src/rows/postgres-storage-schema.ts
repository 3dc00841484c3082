import type pg from 'pg';
import { FencedError, InvalidArgumentError, LockIOError } from '../core/errors.js';
import { checkIdentifier } from '../store/sql/identifier.js';

/**
 * The tables of the PostgreSQL region storage (schema version 1), all named after one prefix
 * (`locksmith` by default: `locksmith_regions`, …; a schema-qualified prefix such as
 * `ops.locksmith` puts them in that schema):
 *
 * - `<prefix>_schema (name, version)`: one row, `('region-storage', 1)`. A storage refuses a
 *   database whose version is newer than its own, and never changes an older one silently.
 * - `<prefix>_regions (region, epoch, generation, next_seq, snapshot_id, snapshot_seq,
 *   token_ceiling)`: one row per region. `epoch` is the fencing token of the owner's mastership and `generation`
 *   counts opens, so the newest open fences every earlier one, even of the same epoch (a
 *   standalone server restarted, or started twice by mistake). `next_seq` is the sequence
 *   number of the next log record. The current snapshot is `snapshot_id`; it covers every log
 *   record below `snapshot_seq`. `token_ceiling` is the highest row-lock token reserved, so a
 *   region's tokens keep increasing whichever server opens it next.
 * - `<prefix>_log (region, seq, record)`: the log, one row per record.
 * - `<prefix>_snapshots (region, snapshot_id, part, record)`: snapshot records in order.
 * - `<prefix>_tables (name, descriptor)`: the server's table catalog (a table's descriptor as
 *   JSON), fenced through the `catalog` row of `<prefix>_regions` like a region's writes.
 *
 * Every write by an owner goes through a statement that updates the region's row only if
 * `epoch` and `generation` are still the owner's (the fence), in the same transaction as the
 * data it writes: a deposed owner's write never commits.
 */
export const SCHEMA_VERSION = 1;
const SCHEMA_NAME = 'region-storage';

/** The table names of one prefix. */
export interface StorageTables {
  schema: string;
  regions: string;
  log: string;
  snapshots: string;
  tables: string;
}

/** Checks `prefix` (an SQL identifier, optionally schema-qualified, short enough for the suffixes). */
export function tablesOf(prefix: unknown): StorageTables {
  const p = checkIdentifier(prefix, 'tablePrefix');
  const last = p.slice(p.lastIndexOf('.') + 1);
  if (last.length > 50) {
    throw new InvalidArgumentError(
      `tablePrefix ${JSON.stringify(p)} is too long: at most 50 characters after the schema, so that "${last}_snapshots" stays within PostgreSQL's 63`,
    );
  }
  return {
    schema: `${p}_schema`,
    regions: `${p}_regions`,
    log: `${p}_log`,
    snapshots: `${p}_snapshots`,
    tables: `${p}_tables`,
  };
}

/**
 * Checks the schema version, creating the tables first if they are missing: under a
 * transaction-level advisory lock, so that servers starting together do not race on the DDL.
 * Tables that exist at the right version are only read, so a user without `CREATE` on the
 * schema can use tables an administrator created.
 */
export async function ensureStorageSchema(client: pg.ClientBase, t: StorageTables): Promise<void> {
  const stored = await storedVersion(client, t);
  if (stored === SCHEMA_VERSION) return;
  if (stored !== undefined) throw versionRefused(t, stored);
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [t.regions]);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${t.schema} (name TEXT PRIMARY KEY, version INTEGER NOT NULL)`,
    );
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${t.regions} (region TEXT PRIMARY KEY, epoch BIGINT NOT NULL DEFAULT 0, generation BIGINT NOT NULL DEFAULT 0, next_seq BIGINT NOT NULL DEFAULT 1, snapshot_id BIGINT NOT NULL DEFAULT 0, snapshot_seq BIGINT NOT NULL DEFAULT 1, token_ceiling BIGINT NOT NULL DEFAULT 0)`,
    );
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${t.log} (region TEXT NOT NULL, seq BIGINT NOT NULL, record BYTEA NOT NULL, PRIMARY KEY (region, seq))`,
    );
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${t.snapshots} (region TEXT NOT NULL, snapshot_id BIGINT NOT NULL, part INTEGER NOT NULL, record BYTEA NOT NULL, PRIMARY KEY (region, snapshot_id, part))`,
    );
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${t.tables} (name TEXT PRIMARY KEY, descriptor TEXT NOT NULL)`,
    );
    await client.query(
      `INSERT INTO ${t.schema} (name, version) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
      [SCHEMA_NAME, SCHEMA_VERSION],
    );
    const found = Number(
      (await client.query(`SELECT version FROM ${t.schema} WHERE name = $1`, [SCHEMA_NAME])).rows[0]
        ?.version,
    );
    if (found !== SCHEMA_VERSION) throw versionRefused(t, found);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/** The version the tables record, or undefined when they are missing (or unreadable). */
async function storedVersion(client: pg.ClientBase, t: StorageTables): Promise<number | undefined> {
  const present = (await client.query('SELECT to_regclass($1) IS NOT NULL AS present', [t.schema]))
    .rows[0]?.present;
  if (present !== true) return undefined;
  const row = (await client.query(`SELECT version FROM ${t.schema} WHERE name = $1`, [SCHEMA_NAME]))
    .rows[0];
  return row === undefined ? undefined : Number(row.version);
}

function versionRefused(t: StorageTables, found: number): LockIOError {
  return new LockIOError(
    `The region storage tables ${t.regions}, … have schema version ${found}; this locksmith reads version ${SCHEMA_VERSION} only`,
  );
}

/** A region's row as an open reads it. */
export interface RegionRow {
  epoch: string;
  next_seq: string;
  snapshot_id: string;
  snapshot_seq: string;
}

/**
 * Inside the caller's transaction: creates `region`'s row if missing, locks it, refuses
 * (`FencedError`, nothing changed once the caller rolls back) a newer epoch than `epoch` (0:
 * standalone, which any epoch refuses), then records `epoch` and a new generation. The caller
 * commits after reading what it needs: from then on the previous owner's fenced statements
 * change nothing.
 */
export async function claimRegion(
  client: pg.ClientBase,
  t: StorageTables,
  region: string,
  epoch: number,
): Promise<{ row: RegionRow; generation: string }> {
  await client.query(
    `INSERT INTO ${t.regions} (region) VALUES ($1) ON CONFLICT (region) DO NOTHING`,
    [region],
  );
  const row = (
    await client.query(
      `SELECT epoch, next_seq, snapshot_id, snapshot_seq FROM ${t.regions} WHERE region = $1 FOR UPDATE`,
      [region],
    )
  ).rows[0] as RegionRow;
  const found = Number(row.epoch);
  if (found > epoch) {
    throw new FencedError(
      `Region storage ${region} belongs to epoch ${found}, newer than ${epoch === 0 ? 'a standalone open (no epoch)' : `this open's ${epoch}`}: refused, nothing changed`,
    );
  }
  const generation = String(
    (
      await client.query(
        `UPDATE ${t.regions} SET epoch = $2, generation = generation + 1 WHERE region = $1 RETURNING generation`,
        [region, epoch],
      )
    ).rows[0]?.generation,
  );
  return { row, generation };
}
