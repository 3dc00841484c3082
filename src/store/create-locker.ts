import { InvalidArgumentError } from '../core/errors.js';
import { checkOptionsObject, describeValue } from '../core/options.js';
import type { Locker } from './locker.js';
import type { StoreLogger } from './logger.js';
import { SharedFileLocker } from './shared-file-locker.js';

/** The lockers {@link createLocker} makes, by name. */
export const LOCKER_KINDS = ['shared-file', 'database', 'lease-database'] as const;
export type LockerKind = (typeof LOCKER_KINDS)[number];

/**
 * The limit {@link createLocker} gives the `database` locker's keep-alive statement. The
 * command watchdog's deadline for that locker is derived from it (see
 * {@link watchdogPolicy}), and so is the takeover pause (renew + this).
 */
export const DATABASE_QUERY_TIMEOUT_MS = 2000;

/** What both kinds of locker {@link createLocker} makes take; durations in ms. */
interface CommonLockerOptions {
  /** Give up at once when another process is master, rather than wait (false). */
  failIfLocked?: boolean | undefined;
  /** Where the locker reports; silent by default. */
  logger?: StoreLogger | undefined;
}

/** A {@link SharedFileLocker} on `directory`. */
export interface SharedFileLockerSpec extends CommonLockerOptions {
  kind: 'shared-file';
  directory: string;
  /** Retry period while another process is master; default the locker's own. */
  acquireIntervalMs?: number | undefined;
}

/** A {@link DatabaseLocker} (a row lock held in an open transaction). */
export interface DatabaseLockerSpec extends CommonLockerOptions {
  kind: 'database';
  /** `sqlite:<path>`, `postgres://…`, `mysql://…`. */
  database: string;
  lockTableName?: string | undefined;
  /** Retry period while another process is master; default the locker's own. */
  acquireIntervalMs?: number | undefined;
}

/** A {@link LeaseDatabaseLocker}: a lease row with a holder and an expiry. */
export interface LeaseDatabaseLockerSpec extends CommonLockerOptions {
  kind: 'lease-database';
  /** `sqlite:<path>`, `postgres://…`, `mysql://…`. */
  database: string;
  lockTableName?: string | undefined;
  /** The lease holder written in the row. */
  leaseHolderId: string;
  /**
   * The lease; ActiveMQ's semantics: also the retry period while another holds it. Default
   * the locker's own.
   */
  leaseMs?: number | undefined;
}

/** The options {@link createLocker} takes: one of the three locker kinds and its settings. */
export type CreateLockerOptions =
  | SharedFileLockerSpec
  | DatabaseLockerSpec
  | LeaseDatabaseLockerSpec;

/**
 * The one place that turns plain options into a {@link Locker}. The database lockers are
 * imported on demand, so that `shared-file` never loads the database drivers. The lockers'
 * constructors validate their settings (the URL, the table name: an InvalidArgumentError);
 * nothing connects before `start()`. The held-transaction `database` locker has no holder
 * column, so it takes no holder id; its keep-alive statement is limited to
 * {@link DATABASE_QUERY_TIMEOUT_MS}.
 */
export async function createLocker(options: CreateLockerOptions): Promise<Locker> {
  const o = checkOptionsObject(options, 'createLocker options');
  const common = { failIfLocked: o.failIfLocked, logger: o.logger };
  switch (o.kind) {
    case 'shared-file':
      return new SharedFileLocker({
        directory: o.directory,
        lockAcquireSleepInterval: o.acquireIntervalMs,
        ...common,
      });
    case 'lease-database': {
      const { LeaseDatabaseLocker } = await import('./lease-database-locker.js');
      const { database, lockTableName, leaseHolderId } = o;
      // ActiveMQ's semantics: the lease locker's acquire interval is its lease duration.
      return new LeaseDatabaseLocker({
        ...{ database, lockTableName, leaseHolderId, lockAcquireSleepInterval: o.leaseMs },
        ...common,
      });
    }
    case 'database': {
      const { DatabaseLocker } = await import('./database-locker.js');
      const { database, lockTableName } = o;
      const queryTimeout = DATABASE_QUERY_TIMEOUT_MS;
      return new DatabaseLocker({
        ...{ database, lockTableName, lockAcquireSleepInterval: o.acquireIntervalMs, queryTimeout },
        ...common,
      });
    }
    default:
      throw new InvalidArgumentError(
        `createLocker option kind must be one of ${LOCKER_KINDS.join(', ')}, got ${describeValue((o as { kind?: unknown }).kind)}`,
      );
  }
}
