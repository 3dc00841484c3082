import { LockIOError } from '../../core/errors.js';
import { describe } from '../describe-error.js';
import { column, type Dialect, type SqlConnection, toNumber } from './dialect.js';

/** ActiveMQ's default lock table name (`Statements.lockTableName`). */
export const DEFAULT_LOCK_TABLE_NAME = 'ACTIVEMQ_LOCK';

/**
 * Makes sure `table` exists with the seed row `ID = 1` and an `EPOCH` column: ActiveMQ's
 * schema (`ID` BIGINT NOT NULL PRIMARY KEY, `TIME` BIGINT, `BROKER_NAME` VARCHAR(250)) plus
 * `EPOCH` BIGINT DEFAULT 0, our fencing counter (nullable with a default, so an ActiveMQ
 * broker inserting or updating the row without it still works).
 *
 * Idempotent and safe under concurrent start-up: every step is "if missing" and its failure
 * is ignored (as ActiveMQ ignores creation errors: a contender may have created it first);
 * what counts is the final check that the row is readable, retried a few times. When that
 * check keeps failing (database unreachable, no permission, a table of another shape), a
 * {@link LockIOError} naming the table and the database is thrown.
 *
 * Never waits long on another session: a master holds the seed row in a transaction for as
 * long as it is master, and a contender that read "no table" just before the master created
 * and claimed it would otherwise wait forever in its seeding INSERT (PostgreSQL waits for the
 * updating transaction of a conflicting row), or in the ALTER that adds EPOCH.
 */
export async function ensureLockTable(dialect: Dialect, table: string): Promise<void> {
  let last: unknown;
  let noEpoch = false;
  for (let attempt = 0; attempt < 5; attempt++) {
    // Read first: the creating statements are writes, and a master holding the row (a held
    // transaction, a SQLite write lock) would make them wait; a plain read never waits.
    let rows = -1;
    try {
      rows = (await dialect.query(`SELECT ID, TIME, BROKER_NAME FROM ${table} WHERE ID = 1`)).rows
        .length;
    } catch (err) {
      last = err;
      if (isUnreachable(err)) throw unreachable(dialect, table, err);
    }
    let statements = dialect.createTableStatements(table);
    if (rows === 1) {
      try {
        await dialect.query(`SELECT EPOCH FROM ${table} WHERE ID = 1`);
        return;
      } catch (err) {
        last = err;
        noEpoch = true;
        statements = [dialect.addEpochColumnStatement(table)];
      }
    }
    const failed = await runWithShortLockWaits(dialect, statements);
    if (failed !== undefined) {
      last = failed;
      if (isUnreachable(failed)) throw unreachable(dialect, table, failed);
    }
    if (attempt > 0) await new Promise<void>((r) => setTimeout(r, 20 * attempt));
  }
  if (noEpoch) {
    throw new LockIOError(
      `Lock table ${table} in ${dialect.description} has no EPOCH column (our fencing counter) and it could not be added: ${describe(last)}. Another session may hold the table (an ActiveMQ broker's DatabaseLocker does while it is master); add the column once with: ${dialect.addEpochColumnStatement(table)}`,
      { cause: last },
    );
  }
  throw new LockIOError(
    `Cannot create or read lock table ${table} (seed row ID=1) in ${dialect.description}: ${describe(last)}`,
    { cause: last },
  );
}

/** How long a creating statement may wait for another session's lock (ms). */
const CREATE_LOCK_WAIT_MS = 1_000;

/**
 * Runs `statements` in order on a connection of their own whose lock waits are bounded by
 * {@link CREATE_LOCK_WAIT_MS}, then drops it (the bound is a session setting). Resolves with
 * the last failure, if any: each statement may fail harmlessly.
 */
async function runWithShortLockWaits(
  dialect: Dialect,
  statements: string[],
): Promise<unknown | undefined> {
  let conn: SqlConnection;
  try {
    conn = await dialect.connect();
  } catch (err) {
    return err;
  }
  let failed: unknown;
  try {
    await dialect.limitLockWaits(conn, CREATE_LOCK_WAIT_MS);
    for (const sql of statements) {
      try {
        await conn.query(sql);
      } catch (err) {
        failed = err;
      }
    }
  } catch (err) {
    failed = err;
  } finally {
    conn.destroy();
  }
  return failed;
}

/**
 * The statement that locks the lock row inside a transaction: `SELECT … FOR UPDATE`; on
 * SQLite a plain read, the lock being the database write lock `BEGIN IMMEDIATE` took.
 */
export function rowLockStatement(dialect: Dialect, table: string): string {
  return dialect.kind === 'sqlite'
    ? `SELECT ID FROM ${table} WHERE ID = 1`
    : `SELECT ID FROM ${table} WHERE ID = 1 FOR UPDATE`;
}

/**
 * How long a DatabaseLocker's hold looks alive to a lease reader: while its transaction holds
 * the row it sets TIME this far ahead (ms, one day), and resets it when it gives the row back.
 */
export const DATABASE_HOLD_MS = 86_400_000;

/** The lock row as stored. */
export interface LockRow {
  holder: string | undefined;
  time: number | undefined;
  epoch: number | undefined;
  /** The database's time when read (ms). */
  now: number | undefined;
}

export function readLockRow(row: Record<string, unknown> | undefined): LockRow {
  const holder = column(row, 'BROKER_NAME');
  return {
    holder: typeof holder === 'string' ? holder : undefined,
    time: toNumber(column(row, 'TIME')),
    epoch: toNumber(column(row, 'EPOCH')),
    now: toNumber(column(row, 'NOW_MS')),
  };
}

const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  '28P01', // pg: password authentication failed
  '3D000', // pg: database does not exist
  'ER_ACCESS_DENIED_ERROR',
  'ER_BAD_DB_ERROR',
  'SQLITE_CANTOPEN',
]);

export function isUnreachable(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && UNREACHABLE.has(code)) return true;
  const errors = (err as { errors?: unknown } | null)?.errors;
  return Array.isArray(errors) && errors.some(isUnreachable);
}

function unreachable(dialect: Dialect, table: string, err: unknown): LockIOError {
  return new LockIOError(
    `Database ${dialect.description} is unreachable (lock table ${table}): ${describe(err)}`,
    { cause: err },
  );
}
