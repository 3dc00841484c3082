import type pg from 'pg';
import {
  FencedError,
  InvalidArgumentError,
  LockIOError,
  LocksmithError,
  TableError,
} from '../core/errors.js';
import { describe } from '../store/describe-error.js';
import { connectStorage, storageDatabase } from './postgres-storage-connection.js';
import {
  claimRegion,
  ensureStorageSchema,
  type StorageTables,
  tablesOf,
} from './postgres-storage-schema.js';
import type { TableCatalogStore } from './table-catalog-store.js';
import { descriptorFromJson, type TableDescriptor } from './table-descriptor.js';

/** The row of `<prefix>_regions` that fences the catalog's writes. */
const CATALOG_REGION = 'catalog';

/**
 * A server's table catalog in PostgreSQL, beside the regions of the PostgreSQL storage: one
 * row per table in `<prefix>_tables`. Opening it claims the `catalog` row of
 * `<prefix>_regions` as a region open does (a newer epoch is refused, the newest open fences
 * every earlier one); each `add` and `remove` is one statement that goes through that row only
 * while it is still this owner's. One prefix is one catalog: servers sharing a database and a
 * prefix see the same tables.
 */
export class PostgresCatalogStore implements TableCatalogStore {
  readonly #client: pg.Client;
  readonly #tables: StorageTables;
  readonly #epoch: number;
  readonly #generation: string;
  readonly #loaded: TableDescriptor[];
  #failure: unknown;

  private constructor(
    client: pg.Client,
    tables: StorageTables,
    epoch: number,
    generation: string,
    loaded: TableDescriptor[],
  ) {
    this.#client = client;
    this.#tables = tables;
    this.#epoch = epoch;
    this.#generation = generation;
    this.#loaded = loaded;
    client.on('error', (err) => {
      this.#failure ??= err;
    });
  }

  /**
   * `fleet`: opened by a fleet member for one change. Any other server refuses a prefix a
   * fleet has used (`INVALID_ARGUMENT`): its opens would fence the fleet's, and the fleet's its.
   */
  static async open(options: {
    database: string;
    tablePrefix?: string | undefined;
    epoch?: number | undefined;
    fleet?: boolean | undefined;
  }): Promise<PostgresCatalogStore> {
    const tables = tablesOf(options.tablePrefix ?? 'locksmith');
    const db = storageDatabase(options.database);
    const epoch = options.epoch ?? 0;
    const client = await connectStorage(db, 'catalog');
    try {
      await ensureStorageSchema(client, tables);
      if (options.fleet !== true) await refuseFleetPrefix(client, tables);
      await client.query('BEGIN');
      try {
        const { generation } = await claimRegion(client, tables, CATALOG_REGION, epoch);
        const rows = (
          await client.query(`SELECT name, descriptor FROM ${tables.tables} ORDER BY name`)
        ).rows as { name: string; descriptor: string }[];
        const loaded = rows.map((r) => parseDescriptor(r.name, r.descriptor, tables));
        await client.query('COMMIT');
        return new PostgresCatalogStore(client, tables, epoch, generation, loaded);
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      }
    } catch (err) {
      await client.end().catch(() => undefined);
      if (err instanceof LocksmithError) throw err;
      throw new LockIOError(`Table catalog in ${db.where}: open failed: ${describe(err)}`, {
        cause: err,
      });
    }
  }

  async load(): Promise<TableDescriptor[]> {
    return [...this.#loaded];
  }

  async add(descriptor: TableDescriptor): Promise<void> {
    let inserted: number;
    try {
      inserted =
        (
          await this.#asOwner(
            `INSERT INTO ${this.#tables.tables} (name, descriptor) SELECT $4, $5 FROM r`,
            [descriptor.name, JSON.stringify(descriptor)],
          )
        ).rowCount ?? 0;
    } catch (err) {
      if ((err as { code?: string }).code === '23505') {
        throw new TableError('TABLE_EXISTS', `Table ${descriptor.name} already exists`);
      }
      throw this.#ioError(`recording table ${descriptor.name}`, err);
    }
    if (inserted !== 1) throw this.#fenced(`table ${descriptor.name} not created`);
  }

  async replace(descriptor: TableDescriptor): Promise<void> {
    let updated: number;
    try {
      updated =
        (
          await this.#asOwner(
            `UPDATE ${this.#tables.tables} SET descriptor = $5 WHERE name = $4 AND EXISTS (SELECT 1 FROM r)`,
            [descriptor.name, JSON.stringify(descriptor)],
          )
        ).rowCount ?? 0;
    } catch (err) {
      throw this.#ioError(`recording table ${descriptor.name}`, err);
    }
    if (updated !== 1) throw this.#fenced(`table ${descriptor.name} not changed`);
  }

  async remove(name: string): Promise<void> {
    let owned: number;
    try {
      owned = Number(
        (
          await this.#asOwner(
            `, d AS (DELETE FROM ${this.#tables.tables} WHERE name = $4 AND EXISTS (SELECT 1 FROM r) RETURNING 1) SELECT (SELECT count(*) FROM r) AS owned`,
            [name],
          )
        ).rows[0]?.owned,
      );
    } catch (err) {
      throw this.#ioError(`forgetting table ${name}`, err);
    }
    if (owned !== 1) throw this.#fenced(`table ${name} not dropped`);
  }

  async close(): Promise<void> {
    await this.#client.end().catch(() => undefined);
  }

  /**
   * Runs `statement` after `WITH r AS (...)`, the catalog row's update that succeeds (one row
   * in `r`) only while this owner's epoch and generation are still the catalog's: the fence,
   * in the same statement as the change. `$1`–`$3` are taken; `args` are `$4` on.
   */
  #asOwner(statement: string, args: unknown[]): Promise<pg.QueryResult> {
    const { regions } = this.#tables;
    return this.#client.query(
      `WITH r AS (UPDATE ${regions} SET generation = generation WHERE region = $1 AND epoch = $2 AND generation = $3 RETURNING 1) ${statement}`,
      [CATALOG_REGION, this.#epoch, this.#generation, ...args],
    );
  }

  #fenced(what: string): FencedError {
    return new FencedError(
      `Table catalog ${this.#tables.tables} is owned by a newer server (epoch ${this.#epoch} is no longer its owner): ${what}`,
    );
  }

  #ioError(what: string, err: unknown): LockIOError {
    const cause = this.#failure ?? err;
    return new LockIOError(
      `Table catalog ${this.#tables.tables}: ${what} failed: ${describe(cause)}`,
      {
        cause,
      },
    );
  }
}

/** A recorded descriptor, checked: an unreadable one is an I/O error naming its table. */
export function parseDescriptor(name: string, text: string, t: StorageTables): TableDescriptor {
  try {
    const descriptor = descriptorFromJson(text);
    if (descriptor.name !== name) throw new Error(`it names table ${descriptor.name}`);
    return descriptor;
  } catch (err) {
    throw new LockIOError(
      `Unreadable descriptor of table ${name} in ${t.tables}: ${describe(err)}`,
      {
        cause: err,
      },
    );
  }
}

/**
 * Refuses (`INVALID_ARGUMENT`) the prefix of a fleet to a server that is not one of its members,
 * at its start: a server that cannot reach the database yet is let through (its catalog's open
 * checks again).
 */
export async function refuseFleetPrefixAtStart(options: {
  database: string;
  tablePrefix?: string | undefined;
}): Promise<void> {
  const tables = tablesOf(options.tablePrefix ?? 'locksmith');
  let client: pg.Client;
  try {
    client = await connectStorage(storageDatabase(options.database), 'catalog');
  } catch {
    return;
  }
  try {
    const present = await client.query('SELECT to_regclass($1) IS NOT NULL AS present', [
      tables.schema,
    ]);
    if (present.rows[0]?.present === true) await refuseFleetPrefix(client, tables);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Refuses the prefix of a fleet to a server that is not one of its members (see `open`). */
async function refuseFleetPrefix(client: pg.Client, tables: StorageTables): Promise<void> {
  // 'fleet': leases in PostgreSQL; 'fleet-etcd': leases in etcd.
  const fleet = await client.query(
    `SELECT name FROM ${tables.schema} WHERE name IN ('fleet', 'fleet-etcd') LIMIT 1`,
  );
  const name = (fleet.rows[0] as { name: string } | undefined)?.name;
  if (name === undefined) return;
  throw new InvalidArgumentError(
    `The tables of prefix ${tables.tables.slice(0, -'_tables'.length)} belong to a fleet (servers started with --fleet): start this server with --fleet too, or give it a --storage-prefix of its own. To serve them without a fleet instead, stop every server of the fleet, then run: DELETE FROM ${tables.schema} WHERE name = '${name}'`,
  );
}
