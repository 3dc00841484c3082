import type { DialectKind } from './database-url.js';

export type { DialectKind } from './database-url.js';

/** One statement's outcome: the rows of a query, the affected (matched) rows of an update. */
export interface SqlResult {
  rows: Record<string, unknown>[];
  affected: number;
}

/**
 * One database connection (a session). Statements use `?` placeholders in every dialect (the
 * PostgreSQL dialect rewrites them to `$n`), so the statements of the lockers, and the
 * overrides a user supplies, are written once.
 */
export interface SqlConnection {
  query(sql: string, params?: readonly unknown[]): Promise<SqlResult>;
  /** The server's id of this session (PostgreSQL backend pid, MySQL connection id), if any. */
  readonly sessionId: number | undefined;
  /** True once the driver reported this connection dead (killed, network gone, closed). */
  readonly broken: boolean;
  /** Called once when the connection dies; at once if it already has. */
  onBroken(listener: (error: unknown) => void): void;
  /** Returns the connection (to the pool, or closes it). Harmless twice. */
  release(): Promise<void>;
  /** Drops the connection now, without any statement (ends a blocked one). Harmless twice. */
  destroy(): void;
}

/**
 * What the lockers need from a database, in three implementations (SQLite through
 * better-sqlite3, PostgreSQL through pg, MariaDB/MySQL through mysql2).
 *
 * - `nowMs`/`nowUs` are SQL expressions for the DATABASE's current time (epoch ms / µs),
 *   evaluated at the statement's execution (not at the transaction's start), so lease expiry is
 *   judged on one clock, the database's.
 * - `greatest(a, b)` is the two-argument maximum.
 * - `connect()` gives a connection (from the pool when there is one); `query()` runs one
 *   autocommitted statement on a pooled connection.
 * - `beginRowLock()` opens a transaction on `conn` and locks the lock row (SELECT … FOR
 *   UPDATE; on SQLite `BEGIN IMMEDIATE`, the database write lock), waiting at most `waitMs`
 *   in the database (SQLite never waits: the event loop must not block). Resolves true when
 *   held, false when another session holds it (the transaction is then rolled back).
 * - `close()` ends what the dialect opened itself; a pool or handle the user passed stays open.
 */
export interface Dialect {
  readonly kind: DialectKind;
  /** For messages: the URL without password, or a description of the user's handle. */
  readonly description: string;
  readonly nowMs: string;
  readonly nowUs: string;
  greatest(a: string, b: string): string;
  connect(): Promise<SqlConnection>;
  query(sql: string, params?: readonly unknown[]): Promise<SqlResult>;
  /**
   * `query()` limited to `ms` (0: no limit), rejecting with `onTimeout()` past it. The
   * connection that ran it is then dropped, so a statement blocked in the database (behind
   * another session's row lock) holds neither a pooled connection nor a later `close()`.
   */
  queryWithin(
    sql: string,
    params: readonly unknown[],
    ms: number,
    onTimeout: () => Error,
  ): Promise<SqlResult>;
  beginRowLock(conn: SqlConnection, lockStatement: string, waitMs: number): Promise<boolean>;
  /**
   * From now on, a statement on `conn` that waits for another session's lock (a row, or the
   * table for DDL) fails after about `ms` (whole seconds on MySQL) instead of waiting for as
   * long as the other transaction lasts. The caller destroys `conn` afterwards: the setting
   * belongs to the session.
   */
  limitLockWaits(conn: SqlConnection, ms: number): Promise<void>;
  /** Statements that create the lock table and seed row if missing (each may fail harmlessly). */
  createTableStatements(table: string): string[];
  /** Adds the EPOCH column to a table created without it (an ActiveMQ table); may fail harmlessly. */
  addEpochColumnStatement(table: string): string;
  close(): Promise<void>;
}

/** Rejects with `onTimeout()` if `promise` takes longer than `ms` (0: no limit). */
export function withTimeout<T>(
  promise: Promise<T>,
  ms: number,
  onTimeout: () => Error,
): Promise<T> {
  if (ms <= 0) return promise;
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(onTimeout()), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/** Integer columns come back as number, bigint or string depending on the driver. */
export function toNumber(value: unknown): number | undefined {
  if (value === null || value === undefined) return undefined;
  const n = typeof value === 'number' ? value : Number(value);
  return Number.isFinite(n) ? n : undefined;
}

/** Looks a column up case-insensitively (PostgreSQL folds unquoted names to lower case). */
export function column(row: Record<string, unknown> | undefined, name: string): unknown {
  if (row === undefined) return undefined;
  if (name in row) return row[name];
  const lower = name.toLowerCase();
  for (const key of Object.keys(row)) if (key.toLowerCase() === lower) return row[key];
  return undefined;
}
