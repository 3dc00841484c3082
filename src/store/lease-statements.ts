/**
 * The lease locker's SQL (as ActiveMQ keeps a `Statements` class): the five statements
 * {@link LeaseDatabaseLocker} runs, their defaults for a dialect and table, and the check of
 * the user's `statements` overrides. Nothing here runs a statement; the locker does.
 * Contract: the defaults take the lease on the database's clock only, and an override is
 * taken as is (a non-empty string, for a known statement name).
 */
import { InvalidArgumentError } from '../core/errors.js';
import { checkOptionsObject } from '../core/options.js';
import { checkStatement } from './database-locker-options.js';
import type { Dialect } from './sql/dialect.js';

/**
 * The lease locker's statements, all with `?` placeholders in the order given. Override any of
 * them through `statements` (they are the user's SQL, taken as is; only `lockTableName` is
 * spliced into the defaults, and it is validated).
 */
export interface LeaseStatements {
  /** Take a free or expired lease, bumping EPOCH. Params: holder, lease ms. 1 row = taken. */
  acquire: string;
  /** Renew while we hold it (same holder, same EPOCH). Params: lease ms, holder, epoch. */
  renew: string;
  /** Give it back. Params: holder, epoch. */
  release: string;
  /** The row: columns BROKER_NAME, TIME, EPOCH and NOW_MS (the database's time in ms). */
  select: string;
  /** The database's time: column NOW_MS. */
  dbTime: string;
}

/**
 * The default statements. Expiry and renewal use the database's clock inside the statement
 * (`TIME < now`, `TIME = now + lease`), so no two machines' clocks are ever compared. EPOCH
 * becomes `max(EPOCH + 1, database time in µs)` at every takeover: +1 keeps it strictly
 * increasing while the row survives, the time floor keeps it increasing across a dropped and
 * recreated table. An ActiveMQ lease locker on the same table writes the same TIME/BROKER_NAME
 * (in its local time, which must then agree with the database's) and leaves EPOCH alone.
 */
export function defaultLeaseStatements(dialect: Dialect, table: string): LeaseStatements {
  const now = dialect.nowMs;
  return {
    acquire: `UPDATE ${table} SET BROKER_NAME = ?, TIME = ${now} + ?, EPOCH = ${dialect.greatest('COALESCE(EPOCH, 0) + 1', dialect.nowUs)} WHERE ID = 1 AND (TIME IS NULL OR TIME < ${now})`,
    renew: `UPDATE ${table} SET TIME = ${now} + ? WHERE ID = 1 AND BROKER_NAME = ? AND EPOCH = ?`,
    release: `UPDATE ${table} SET BROKER_NAME = NULL, TIME = 0 WHERE ID = 1 AND BROKER_NAME = ? AND EPOCH = ?`,
    select: `SELECT BROKER_NAME, TIME, EPOCH, ${now} AS NOW_MS FROM ${table} WHERE ID = 1`,
    dbTime: `SELECT ${now} AS NOW_MS`,
  };
}

/** The `statements` option's check: known names only, each a non-empty SQL string. */
export function checkLeaseStatements(value: unknown, label: string): Partial<LeaseStatements> {
  const overrides = checkOptionsObject(value as Partial<LeaseStatements>, label);
  for (const [key, sql] of Object.entries(overrides)) {
    if (!['acquire', 'renew', 'release', 'select', 'dbTime'].includes(key)) {
      throw new InvalidArgumentError(`Unknown statement ${JSON.stringify(key)}`);
    }
    checkStatement(sql, `Statement ${key}`);
  }
  return overrides;
}

/** The defaults for `dialect` and `table`, with each override that is not undefined. */
export function leaseStatements(
  dialect: Dialect,
  table: string,
  overrides: Partial<LeaseStatements>,
): LeaseStatements {
  return { ...defaultLeaseStatements(dialect, table), ...definedOnly(overrides) };
}

function definedOnly<T extends object>(o: Partial<T>): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
