import Database from 'better-sqlite3';
import { type Dialect, type SqlConnection, type SqlResult, withTimeout } from './dialect.js';

/** How long a statement retries a busy database (asynchronously, never blocking the loop). */
const BUSY_RETRY_MS = 1_000;
const BUSY_STEP_MS = 5;

function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

function run(db: Database.Database, sql: string, params: readonly unknown[]): SqlResult {
  const statement = db.prepare(sql);
  if (statement.reader)
    return { rows: statement.all(...params) as Record<string, unknown>[], affected: 0 };
  return { rows: [], affected: statement.run(...params).changes };
}

/** Runs `sql`, retrying SQLITE_BUSY every few ms for up to a second, off the event loop's back. */
async function runRetrying(
  db: Database.Database,
  sql: string,
  params: readonly unknown[],
): Promise<SqlResult> {
  const deadline = performance.now() + BUSY_RETRY_MS;
  for (;;) {
    try {
      return run(db, sql, params);
    } catch (err) {
      if (!isBusy(err) || performance.now() > deadline) throw err;
      await new Promise<void>((r) => setTimeout(r, BUSY_STEP_MS));
    }
  }
}

/**
 * Opens a connection with busy timeout 0: better-sqlite3 is synchronous, and a busy timeout
 * would block the event loop while it waits; we retry asynchronously instead.
 */
function open(path: string): Database.Database {
  return new Database(path, { timeout: 0, fileMustExist: false });
}

class SqliteConnection implements SqlConnection {
  readonly #db: Database.Database;
  readonly sessionId = undefined;
  #listeners: ((error: unknown) => void)[] = [];

  constructor(db: Database.Database) {
    this.#db = db;
  }

  get broken(): boolean {
    return !this.#db.open;
  }

  onBroken(listener: (error: unknown) => void): void {
    if (this.broken) listener(new Error('connection closed'));
    else this.#listeners.push(listener);
  }

  /** Statements inside a held transaction are not retried: a held write lock is never busy. */
  async query(sql: string, params: readonly unknown[] = []): Promise<SqlResult> {
    if (/^\s*(BEGIN|COMMIT|ROLLBACK)/i.test(sql)) {
      this.#db.exec(sql);
      return { rows: [], affected: 0 };
    }
    return runRetrying(this.#db, sql, params);
  }

  get db(): Database.Database {
    return this.#db;
  }

  async release(): Promise<void> {
    this.destroy();
  }

  destroy(): void {
    if (!this.#db.open) return;
    // Closing a connection rolls back its open transaction, which frees the write lock.
    this.#db.close();
    for (const l of this.#listeners.splice(0)) l(new Error('connection closed'));
  }
}

/** SQLite through better-sqlite3: a file path (we open it) or the user's `Database`. */
export class SqliteDialect implements Dialect {
  readonly kind = 'sqlite';
  readonly description: string;
  readonly nowMs = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";
  readonly nowUs = "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)";
  readonly #path: string;
  #shared: Database.Database | undefined;
  readonly #owned: boolean;

  constructor(source: { path: string } | { database: Database.Database }) {
    if ('database' in source) {
      this.#shared = source.database;
      this.#path = source.database.name;
      this.#owned = false;
      this.description = `SQLite ${this.#path} (user handle)`;
    } else {
      this.#path = source.path;
      this.#owned = true;
      this.description = `SQLite ${this.#path}`;
    }
  }

  greatest(a: string, b: string): string {
    return `MAX(${a}, ${b})`;
  }

  /** A new connection of its own (a held transaction must not share the user's handle). */
  async connect(): Promise<SqlConnection> {
    return new SqliteConnection(open(this.#path));
  }

  async query(sql: string, params: readonly unknown[] = []): Promise<SqlResult> {
    this.#shared ??= open(this.#path);
    return runRetrying(this.#shared, sql, params);
  }

  /** better-sqlite3 is synchronous: a statement never stays blocked, only busy-retried. */
  queryWithin(
    sql: string,
    params: readonly unknown[],
    ms: number,
    onTimeout: () => Error,
  ): Promise<SqlResult> {
    return withTimeout(this.query(sql, params), ms, onTimeout);
  }

  async beginRowLock(conn: SqlConnection, lockStatement: string): Promise<boolean> {
    const db = (conn as SqliteConnection).db;
    try {
      db.exec('BEGIN IMMEDIATE');
    } catch (err) {
      if (isBusy(err)) return false;
      throw err;
    }
    try {
      run(db, lockStatement, []);
      return true;
    } catch (err) {
      db.exec('ROLLBACK');
      throw err;
    }
  }

  /** Nothing to set: a busy statement gives up after BUSY_RETRY_MS already. */
  async limitLockWaits(): Promise<void> {}

  createTableStatements(table: string): string[] {
    return [
      `CREATE TABLE IF NOT EXISTS ${table} (ID BIGINT NOT NULL PRIMARY KEY, TIME BIGINT, BROKER_NAME VARCHAR(250), EPOCH BIGINT DEFAULT 0)`,
      `INSERT OR IGNORE INTO ${table} (ID, TIME, BROKER_NAME, EPOCH) VALUES (1, 0, NULL, 0)`,
    ];
  }

  addEpochColumnStatement(table: string): string {
    return `ALTER TABLE ${table} ADD COLUMN EPOCH BIGINT DEFAULT 0`;
  }

  async close(): Promise<void> {
    if (this.#owned && this.#shared?.open) this.#shared.close();
    if (this.#owned) this.#shared = undefined;
  }
}
