import { InvalidArgumentError } from '../core/errors.js';
import { booleanOption, customOption, type SpecOf, withDefault } from '../core/option-spec.js';
import { ABSTRACT_LOCKER_SPEC, type AbstractLockerOptions } from './abstract-locker.js';
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
 * The options both database lockers declare: the table name an SQL identifier (default
 * `ACTIVEMQ_LOCK`), `createTablesOnStartup` a boolean (default true). The database source is
 * validated when the locker opens its dialect.
 */
export const DATABASE_LOCKER_COMMON_SPEC = {
  ...ABSTRACT_LOCKER_SPEC,
  database: customOption<DatabaseSource>(
    'a database URL (sqlite:, postgres://, mysql://) or a pool',
    (value) => value as DatabaseSource,
  ),
  lockTableName: withDefault(
    customOption('an SQL identifier', (value, label) => checkIdentifier(value as string, label)),
    DEFAULT_LOCK_TABLE_NAME,
  ),
  createTablesOnStartup: withDefault(booleanOption(), true),
} as const satisfies SpecOf<DatabaseLockerCommonOptions>;

/** An SQL override: absent, or a non-empty string. */
export function checkStatement(value: unknown, what: string): string | undefined {
  if (value !== undefined && (typeof value !== 'string' || value.trim().length === 0)) {
    throw new InvalidArgumentError(`${what} must be a non-empty SQL string`);
  }
  return value;
}
