import { InvalidArgumentError } from '../core/errors.js';
import {
  booleanOption,
  customOption,
  durationOption,
  type OptionSpec,
  oneOfOption,
  readOptions,
  type SpecOf,
  stringOption,
} from '../core/option-spec.js';
import { checkOptionsObject, describeValue } from '../core/options.js';
import type { DatabaseLockerOptions } from './database-locker.js';
import type { EtcdLockerOptions, EtcdTlsOptions } from './etcd-locker.js';
import type { LeaseDatabaseLockerOptions } from './lease-database-locker.js';
import type { Locker } from './locker.js';
import { LOGGER_OPTION, type StoreLogger } from './logger.js';
import { SharedFileLocker, type SharedFileLockerOptions } from './shared-file-locker.js';

/** The lockers {@link createLocker} makes, by name. */
export const LOCKER_KINDS = ['shared-file', 'database', 'lease-database', 'etcd'] as const;
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

/** An {@link EtcdLocker}: etcd's election recipe (interoperates with `etcdctl elect`). */
export interface EtcdLockerSpec extends CommonLockerOptions {
  kind: 'etcd';
  /** The etcd members' client URLs, `http://host:port`. */
  endpoints: readonly string[];
  /** The election's name (the key prefix, as `etcdctl elect <name>`). */
  electionName: string;
  /** The session lease, ms, whole seconds; default the locker's own (10 s). */
  leaseMs?: number | undefined;
  /** The proposal (this candidate's key's value); default the locker's own. */
  holderId?: string | undefined;
  auth?: { username: string; password: string } | undefined;
  tls?: EtcdTlsOptions | undefined;
}

/** The options {@link createLocker} takes: one of the locker kinds and its settings. */
export type CreateLockerOptions =
  | SharedFileLockerSpec
  | DatabaseLockerSpec
  | LeaseDatabaseLockerSpec
  | EtcdLockerSpec;

const COMMON_SPEC = {
  kind: oneOfOption(LOCKER_KINDS),
  failIfLocked: booleanOption(),
  // Undefined when absent: the locker made applies its own default.
  logger: { ...LOGGER_OPTION, default: undefined },
} as const;

/** Each kind's options, declared once: a name another kind takes is refused, not ignored. */
const SPECS = {
  'shared-file': {
    ...COMMON_SPEC,
    directory: customOption('a directory path', (value) => value as string),
    acquireIntervalMs: durationOption(),
  } satisfies SpecOf<SharedFileLockerSpec>,
  database: {
    ...COMMON_SPEC,
    database: stringOption(),
    lockTableName: stringOption(),
    acquireIntervalMs: durationOption(),
  } satisfies SpecOf<DatabaseLockerSpec>,
  'lease-database': {
    ...COMMON_SPEC,
    database: stringOption(),
    lockTableName: stringOption(),
    leaseHolderId: stringOption(250),
    leaseMs: durationOption(),
  } satisfies SpecOf<LeaseDatabaseLockerSpec>,
  // The etcd locker checks these values itself (URLs, whole seconds, TLS files).
  etcd: {
    ...COMMON_SPEC,
    endpoints: customOption(
      'a non-empty array of http://host:port URLs',
      (value) => value as readonly string[],
    ),
    electionName: stringOption(),
    leaseMs: durationOption(),
    holderId: stringOption(250),
    auth: customOption('{ username, password }', (value) => value as EtcdLockerSpec['auth']),
    tls: customOption('{ ca, cert?, key? }', (value) => value as EtcdTlsOptions),
  } satisfies SpecOf<EtcdLockerSpec>,
} as const satisfies Record<LockerKind, OptionSpec>;

/**
 * The one place that turns plain options into a {@link Locker}. The database lockers are
 * imported on demand, so that `shared-file` never loads the database drivers (nor `etcd`
 * the etcd client). The lockers'
 * constructors validate their settings (the URL, the table name: an InvalidArgumentError);
 * nothing connects before `start()`. Each kind takes only its own options (an unknown name,
 * or one of another kind such as `leaseMs` on `database`, is an InvalidArgumentError). The
 * held-transaction `database` locker has no holder column, so it takes no holder id; its
 * keep-alive statement is limited to {@link DATABASE_QUERY_TIMEOUT_MS}.
 */
export async function createLocker(options: CreateLockerOptions): Promise<Locker> {
  const kind = checkOptionsObject(options, 'createLocker options').kind;
  if (!(LOCKER_KINDS as readonly unknown[]).includes(kind)) {
    throw new InvalidArgumentError(
      `createLocker option kind must be one of ${LOCKER_KINDS.join(', ')}, got ${describeValue(kind)}`,
    );
  }
  const what = `createLocker options (kind ${kind})`;
  // Absent options stay undefined, so each locker applies its own defaults and checks.
  switch (kind) {
    case 'shared-file': {
      const { kind: _, ...o } = readOptions(options, what, SPECS[kind]);
      return new SharedFileLocker(o as SharedFileLockerOptions);
    }
    case 'lease-database': {
      const { kind: _, ...o } = readOptions(options, what, SPECS[kind]);
      const { LeaseDatabaseLocker } = await import('./lease-database-locker.js');
      return new LeaseDatabaseLocker(o as LeaseDatabaseLockerOptions);
    }
    case 'database': {
      const { kind: _, ...o } = readOptions(options, what, SPECS[kind]);
      const { DatabaseLocker } = await import('./database-locker.js');
      return new DatabaseLocker({
        ...o,
        queryTimeoutMs: DATABASE_QUERY_TIMEOUT_MS,
      } as DatabaseLockerOptions);
    }
    case 'etcd': {
      const { kind: _, ...o } = readOptions(options, what, SPECS[kind]);
      // Loads the locker only; it loads etcd3 (and gRPC) on its first start().
      const { EtcdLocker } = await import('./etcd-locker.js');
      return new EtcdLocker(o as EtcdLockerOptions);
    }
  }
}
