import Database from 'better-sqlite3';
import pg from 'pg';
import { InvalidArgumentError } from '../../core/errors.js';
import { parseDatabaseUrl, redactUrl } from './database-url.js';
import type { Dialect } from './dialect.js';
import { MysqlDialect } from './mysql-dialect.js';
import { PostgresDialect } from './postgres-dialect.js';
import { SqliteDialect } from './sqlite-dialect.js';

/**
 * Where a database locker finds its database: a URL (`sqlite:<path>`, `postgres://…`,
 * `mysql://…`; the locker opens and closes its own pool), or the user's own handle, tagged
 * with its kind (the locker uses it and never closes it):
 * `{ sqlite: new Database(path) }`, `{ postgres: new pg.Pool(…) }`,
 * `{ mysql: mysql2.createPool(…) }` (a `mysql2/promise` pool).
 */
export type DatabaseSource =
  | string
  | { sqlite: Database.Database }
  | { postgres: pg.Pool }
  | { mysql: import('mysql2/promise').Pool };

/** Validates `source` and makes its dialect; nothing connects until the first statement. */
export function openDialect(source: unknown): Dialect {
  if (typeof source === 'string') {
    const url = parseDatabaseUrl(source);
    switch (url.kind) {
      case 'sqlite':
        return new SqliteDialect({ path: url.path });
      case 'postgres':
        return new PostgresDialect({ url: url.url, description: redactUrl(url.url) });
      case 'mysql':
        return new MysqlDialect({ url: url.url, description: redactUrl(url.url) });
    }
  }
  if (typeof source === 'object' && source !== null) {
    const s = source as Record<string, unknown>;
    if (s.sqlite instanceof Database) {
      if (s.sqlite.memory) {
        throw new InvalidArgumentError('an in-memory SQLite database cannot be shared by lockers');
      }
      return new SqliteDialect({ database: s.sqlite });
    }
    if (s.postgres instanceof pg.Pool) return new PostgresDialect({ pool: s.postgres });
    const m = s.mysql as { getConnection?: unknown; query?: unknown } | undefined;
    if (typeof m === 'object' && m !== null && typeof m.getConnection === 'function') {
      return new MysqlDialect({ pool: m as import('mysql2/promise').Pool });
    }
  }
  throw new InvalidArgumentError(
    'database must be a URL (sqlite:<path>, postgres://…, mysql://…) or { sqlite: Database } | { postgres: pg.Pool } | { mysql: mysql2/promise Pool }',
  );
}
