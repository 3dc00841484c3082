import { InvalidArgumentError } from '../core/errors.js';
import { checkBoolean, checkOptionsObject } from '../core/options.js';
import type { AbstractLockerOptions } from './abstract-locker.js';
import { checkIdentifier } from './sql/identifier.js';
import { DEFAULT_LOCK_TABLE_NAME } from './sql/lock-table.js';
import type { DatabaseSource } from './sql/open-dialect.js';

/** The options {@link DatabaseLocker} and {@link LeaseDatabaseLocker} share. */
export interface DatabaseLockerCommonOptions extends AbstractLockerOptions {
  /** `sqlite:<path>`, `postgres://…`, `mysql://…`, or the user's own pool/handle. */
  database: DatabaseSource;
  /** Validated SQL identifier (`ACTIVEMQ_LOCK`). */
  lockTableName?: string | undefined;
  /** Create the table and seed row if missing (true). */
  createTablesOnStartup?: boolean | undefined;
}

/**
 * The validation both database lockers start with: `options` an object (`what` names it),
 * the table name an identifier (default `ACTIVEMQ_LOCK`), `createTablesOnStartup` a boolean
 * (default true). The database source is validated when the locker opens its dialect.
 */
export function checkDatabaseLockerOptions<T extends DatabaseLockerCommonOptions>(
  options: T,
  what: string,
): { o: T; table: string; createTablesOnStartup: boolean } {
  const o = checkOptionsObject(options, what);
  return {
    o,
    table: checkIdentifier(o.lockTableName ?? DEFAULT_LOCK_TABLE_NAME, 'lockTableName'),
    createTablesOnStartup: checkBoolean(o.createTablesOnStartup ?? true, 'createTablesOnStartup'),
  };
}

/** An SQL override: absent, or a non-empty string. */
export function checkStatement(value: unknown, what: string): string | undefined {
  if (value !== undefined && (typeof value !== 'string' || value.trim().length === 0)) {
    throw new InvalidArgumentError(`${what} must be a non-empty SQL string`);
  }
  return value;
}
