import type pg from 'pg';
import { InvalidArgumentError, LockIOError } from '../core/errors.js';
import { describe } from '../store/describe-error.js';
import { parseDatabaseUrl, redactUrl } from '../store/sql/database-url.js';

/** A checked `postgres://` URL of the PostgreSQL storage, and how messages name it. */
export interface StorageDatabase {
  url: string;
  /** The URL without its password. */
  where: string;
}

export function storageDatabase(value: unknown): StorageDatabase {
  const url = parseDatabaseUrl(value);
  if (url.kind !== 'postgres') {
    throw new InvalidArgumentError(
      `database must be a postgres:// URL for the PostgreSQL storage, got a ${url.kind} one`,
    );
  }
  return { url: url.url, where: redactUrl(url.url) };
}

/**
 * A connection of the PostgreSQL storage, named `locksmith <what>` in `pg_stat_activity`.
 * `pg` is loaded on the first call: a row store on files never loads the driver. Until the
 * caller listens, an 'error' event is swallowed (it surfaces through the failing query).
 */
export async function connectStorage(
  db: StorageDatabase,
  what: string,
  durability: 'fsync' | 'none' = 'fsync',
): Promise<pg.Client> {
  const { default: Pg } = await import('pg');
  const client = new Pg.Client({
    connectionString: db.url,
    application_name: `locksmith ${what}`.slice(0, 60),
  });
  client.on('error', () => {});
  try {
    await client.connect();
    if (durability === 'none') await client.query('SET synchronous_commit = off');
  } catch (err) {
    await client.end().catch(() => undefined);
    throw new LockIOError(`locksmith ${what}: cannot connect to ${db.where}: ${describe(err)}`, {
      cause: err,
    });
  }
  return client;
}
