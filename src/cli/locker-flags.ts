import { MAX_DURATION_MS, parseDuration } from '../core/duration.js';
import { type CreateLockerOptions, LOCKER_KINDS, type LockerKind } from '../store/create-locker.js';
import { checkLeaseRules } from '../store/lease-rules.js';
import type { StoreLogger } from '../store/logger.js';
import { UsageError } from './args.js';

/**
 * The store locker chosen on a command line (`elect --locker …`, `serve --ha …`), validated;
 * durations in ms. One parser for both commands, so a flag means the same in each.
 */
export interface LockerFlags {
  kind: LockerKind;
  /** The database URL (database lockers only). */
  db?: string;
  /** The lock table name (database lockers only). */
  table?: string;
  /** Lease duration (lease-database only; default 10 s). */
  leaseMs?: number;
  /** The supervisor's keep-alive (renewal) period; default the locker's own. */
  renewMs?: number;
  /** Retry period while another process is master (not lease-database). */
  acquireIntervalMs?: number;
  failIfLocked: boolean;
}

/** How the command names the flags that differ between commands. */
export interface LockerFlagNames {
  /** The option choosing the locker: `--locker` (elect) or `--ha` (serve). */
  kind: string;
  /** The lock table option: `--table` (elect) or `--lock-table` (serve). */
  table: string;
  /** Flags that belong to shared-file only (elect's `--dir`); refused with a database locker. */
  sharedFileOnly: string[];
}

const DURATION_FLAGS = ['--lease', '--renew', '--acquire-interval', '--grace'];

/**
 * `--renew -1s` would otherwise surface as parseArgs' three-line "argument is ambiguous"
 * message; name the actual mistake instead, in one line.
 */
export function rejectNegativeDurations(args: string[]): void {
  const end = args.indexOf('--');
  const options = end === -1 ? args : args.slice(0, end);
  for (const [i, arg] of options.entries()) {
    const next = options[i + 1];
    if (DURATION_FLAGS.includes(arg) && next !== undefined && /^-\d/.test(next)) {
      throw new UsageError(`Invalid ${arg} ${JSON.stringify(next)}: durations cannot be negative`);
    }
  }
}

/**
 * A duration option: undefined when absent. It needs a unit (`10` is refused with an example:
 * 10 ms and 10 s are both plausible readings, and picking one flipped masters hundreds of
 * times in seconds), lies within 1 ms .. {@link MAX_DURATION_MS} (Node's longest timer: a
 * longer one fires at once), and is 0 only where `zeroAllowed`.
 */
export function lockerDuration(
  value: string | undefined,
  what: string,
  zeroAllowed: boolean,
): number | undefined {
  if (value === undefined) return undefined;
  const text = JSON.stringify(value);
  if (/^\s*\d+(?:\.\d+)?\s*$/.test(value)) {
    throw new UsageError(
      `Invalid ${what} ${text}: a duration needs a unit (ms, s, m, h), e.g. ${what} ${value.trim()}s`,
    );
  }
  let ms: number;
  try {
    ms = parseDuration(value, what);
  } catch (err) {
    if (/longest duration/.test((err as Error).message)) {
      throw new UsageError(
        `Invalid ${what} ${text}: longer than the longest duration allowed, ${MAX_DURATION_MS}ms (about 24.8 days)`,
      );
    }
    throw new UsageError((err as Error).message);
  }
  if (ms === 0 && !zeroAllowed) {
    throw new UsageError(`Invalid ${what} ${text}: must be greater than 0`);
  }
  if (ms > 0 && ms < 1) {
    throw new UsageError(`Invalid ${what} ${text}: shorter than 1ms, the shortest duration`);
  }
  return ms;
}

/**
 * The locker flags of a parsed command line: the kind (required when `required`, else
 * undefined when absent), then for shared-file no `--db`/table/`--lease`, for the database
 * lockers a `--db` and none of `names.sharedFileOnly`, `--lease` only with lease-database,
 * `--acquire-interval` not with lease-database (it retries when the lease expires), and the
 * lease/renew rules of {@link checkLeaseRules}. Every mistake is a one-line {@link UsageError}.
 */
export function parseLockerFlags(
  values: Record<string, string | boolean | undefined>,
  names: LockerFlagNames,
): LockerFlags | undefined {
  const str = (name: string): string | undefined => values[name] as string | undefined;
  const flag = names.kind;
  const text = str(flag.slice(2));
  if (text === undefined) return undefined;
  if (!(LOCKER_KINDS as readonly string[]).includes(text)) {
    throw new UsageError(
      `unknown locker ${JSON.stringify(text)}: expected ${LOCKER_KINDS.join(', ')}`,
    );
  }
  const kind = text as LockerKind;
  if (kind === 'etcd') {
    throw new UsageError(
      `${flag} etcd is not available on the command line yet; use createLocker({ kind: 'etcd', … }) from locksmith-locks/store`,
    );
  }
  const flags: LockerFlags = { kind, failIfLocked: values['fail-if-locked'] === true };
  const tableKey = names.table.slice(2);
  if (kind === 'shared-file') {
    for (const other of ['db', tableKey, 'lease']) {
      if (values[other] !== undefined) {
        throw new UsageError(`--${other} does not apply to ${flag} shared-file`);
      }
    }
  } else {
    const db = str('db');
    if (db === undefined || db.length === 0) {
      throw new UsageError(
        `${flag} ${kind} needs --db <url> (sqlite:<path>, postgres://…, mysql://…)`,
      );
    }
    for (const only of names.sharedFileOnly) {
      if (values[only.slice(2)] !== undefined) {
        throw new UsageError(`${only} does not apply to ${flag} ${kind}; use --db <url>`);
      }
    }
    if (kind === 'database' && values.lease !== undefined) {
      throw new UsageError(`--lease applies only to ${flag} lease-database`);
    }
    if (kind === 'lease-database' && values['acquire-interval'] !== undefined) {
      throw new UsageError(
        `--acquire-interval does not apply to ${flag} lease-database: it retries when the lease expires (--lease)`,
      );
    }
    flags.db = db;
    const table = str(tableKey);
    if (table !== undefined) flags.table = table;
  }
  const lease = lockerDuration(str('lease'), '--lease', false);
  const renew = lockerDuration(str('renew'), '--renew', false);
  const interval = lockerDuration(str('acquire-interval'), '--acquire-interval', false);
  if (lease !== undefined) flags.leaseMs = lease;
  if (renew !== undefined) flags.renewMs = renew;
  if (interval !== undefined) flags.acquireIntervalMs = interval;
  try {
    checkLeaseRules(
      { kind, leaseMs: flags.leaseMs, renewMs: flags.renewMs },
      { lease: '--lease', renew: '--renew', leaseText: str('lease'), renewText: str('renew') },
    );
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  return flags;
}

/**
 * The {@link createLocker} options of parsed flags: `directory` is the shared-file store
 * directory, `holderId` names the lease holder of lease-database (the held-transaction
 * `database` locker has no holder column, so it takes none).
 */
export function lockerOptionsOf(
  flags: LockerFlags,
  directory: string | undefined,
  holderId: string,
  logger: StoreLogger,
): CreateLockerOptions {
  const { kind, acquireIntervalMs, failIfLocked } = flags;
  if (kind === 'shared-file') {
    return { kind, directory: directory as string, acquireIntervalMs, failIfLocked, logger };
  }
  const database = { database: flags.db as string, lockTableName: flags.table };
  if (kind === 'etcd') throw new Error('--locker etcd is refused by parseLockerFlags');
  return kind === 'database'
    ? { kind, ...database, acquireIntervalMs, failIfLocked, logger }
    : { kind, ...database, leaseHolderId: holderId, leaseMs: flags.leaseMs, failIfLocked, logger };
}
