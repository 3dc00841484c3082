import { readFileSync } from 'node:fs';
import { MAX_DURATION_MS, parseDuration } from '../core/duration.js';
import { InvalidArgumentError } from '../core/errors.js';
import {
  type CreateLockerOptions,
  createLocker,
  LOCKER_KINDS,
  type LockerKind,
} from '../store/create-locker.js';
import { checkLeaseRules } from '../store/lease-rules.js';
import type { Locker } from '../store/locker.js';
import type { StoreLogger } from '../store/logger.js';
import { UsageError } from './args.js';
import { ETCD_FLAG_SPECS } from './usage.js';

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
  /** Lease duration (lease-database and etcd; default 10 s; whole seconds for etcd). */
  leaseMs?: number;
  /** The supervisor's keep-alive (renewal) period; default the locker's own. */
  renewMs?: number;
  /** Retry period while another process is master (not lease-database). */
  acquireIntervalMs?: number;
  failIfLocked: boolean;
  /** The etcd settings (etcd only). */
  etcd?: EtcdFlags;
}

/** `--etcd`, `--election` and the etcd auth/TLS flags, validated. */
export interface EtcdFlags {
  /** The members' client URLs, as given (the locker checks them). */
  endpoints: string[];
  /** The election name: `--election`, else the command's default. */
  electionName: string;
  /** `--etcd-user`, with the password read from `--etcd-password-file`. */
  auth?: { username: string; password: string };
  /** `--etcd-ca` (and `--etcd-cert` with `--etcd-key`): file paths, read by the locker. */
  tls?: { ca: string; cert?: string; key?: string };
}

/** The flags that belong to the etcd locker only (declared with both commands' usage). */
export const ETCD_ONLY_FLAGS: readonly string[] = Object.keys(ETCD_FLAG_SPECS).map((k) => `--${k}`);

/** How the command names the flags that differ between commands. */
export interface LockerFlagNames {
  /** The option choosing the locker: `--locker` (elect) or `--ha` (serve). */
  kind: string;
  /** The lock table option: `--table` (elect) or `--lock-table` (serve). */
  table: string;
  /** Flags that belong to shared-file only (elect's `--dir`); refused with a database locker. */
  sharedFileOnly: string[];
  /** The etcd election name when `--election` is absent. */
  defaultElection: string;
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
  const flags: LockerFlags = { kind, failIfLocked: values['fail-if-locked'] === true };
  const tableKey = names.table.slice(2);
  if (kind !== 'etcd') {
    for (const only of ETCD_ONLY_FLAGS) {
      if (values[only.slice(2)] !== undefined) {
        throw new UsageError(`${only} applies only to ${flag} etcd`);
      }
    }
  }
  if (kind === 'shared-file') {
    for (const other of ['db', tableKey, 'lease']) {
      if (values[other] !== undefined) {
        throw new UsageError(`--${other} does not apply to ${flag} shared-file`);
      }
    }
  } else if (kind === 'etcd') {
    for (const other of ['--db', names.table, ...names.sharedFileOnly]) {
      if (values[other.slice(2)] !== undefined) {
        throw new UsageError(`${other} does not apply to ${flag} etcd; use --etcd <urls>`);
      }
    }
    if (values['acquire-interval'] !== undefined) {
      throw new UsageError(
        `--acquire-interval does not apply to ${flag} etcd: a waiting candidate watches the leader's key`,
      );
    }
    flags.etcd = etcdFlags(values, flag, names.defaultElection);
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
      throw new UsageError(`--lease applies only to ${flag} lease-database and ${flag} etcd`);
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
  if (lease !== undefined && kind === 'etcd' && lease % 1000 !== 0) {
    // The locker's own rule, in the command line's words.
    throw new UsageError(
      `Invalid --lease ${JSON.stringify(str('lease'))}: must be a whole number of seconds (etcd lease TTLs are seconds), e.g. --lease ${Math.ceil(lease / 1000)}s`,
    );
  }
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
 * The etcd flags: `--etcd` (comma-separated member URLs) is required, `--election` defaults to
 * `defaultElection`, `--etcd-user` goes with `--etcd-password-file` (a password is never a
 * command-line argument: `ps` shows those), `--etcd-cert` with `--etcd-key`, and both need
 * `--etcd-ca`. The URLs and the TLS files are checked by the locker itself
 * (see {@link createCliLocker}).
 */
export function etcdFlags(
  values: Record<string, string | boolean | undefined>,
  flag: string,
  defaultElection: string,
): EtcdFlags {
  const str = (name: string): string | undefined => values[name] as string | undefined;
  const list = str('etcd');
  if (list === undefined || list.trim().length === 0) {
    throw new UsageError(
      `${flag} etcd needs --etcd <url>[,<url>...] (the members' client URLs, e.g. http://127.0.0.1:2379)`,
    );
  }
  const endpoints = list.split(',').map((u) => u.trim());
  if (endpoints.some((u) => u.length === 0)) {
    throw new UsageError(
      `--etcd ${JSON.stringify(list)}: an empty URL; separate the members' URLs with single commas`,
    );
  }
  const election = str('election');
  if (election !== undefined && election.trim().length === 0) {
    throw new UsageError('--election must not be empty');
  }
  const out: EtcdFlags = { endpoints, electionName: election ?? defaultElection };
  const user = str('etcd-user');
  const passwordFile = str('etcd-password-file');
  if ((user === undefined) !== (passwordFile === undefined)) {
    throw new UsageError('--etcd-user and --etcd-password-file go together');
  }
  if (user !== undefined && passwordFile !== undefined) {
    if (user.length === 0) throw new UsageError('--etcd-user must not be empty');
    out.auth = { username: user, password: readPasswordFile(passwordFile) };
  }
  const [ca, cert, key] = [str('etcd-ca'), str('etcd-cert'), str('etcd-key')];
  if ((cert === undefined) !== (key === undefined)) {
    throw new UsageError('--etcd-cert and --etcd-key go together (mutual TLS)');
  }
  if (ca === undefined && cert !== undefined) {
    throw new UsageError('--etcd-cert and --etcd-key need --etcd-ca (the CA of the etcd members)');
  }
  if (ca !== undefined) {
    out.tls = {
      ca,
      ...(cert === undefined ? {} : { cert }),
      ...(key === undefined ? {} : { key }),
    };
  }
  return out;
}

/** The password: the file's first line (without its line end); an unreadable file is a usage error. */
function readPasswordFile(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new UsageError(
      `--etcd-password-file ${path}: cannot read it (${code ?? describeOf(err)})`,
    );
  }
  const password = text.split('\n')[0]?.replace(/\r$/, '') ?? '';
  if (password.length === 0) throw new UsageError(`--etcd-password-file ${path} is empty`);
  return password;
}

const describeOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** How the etcd locker names the options the command line sets, and the flags that set them. */
const ETCD_OPTION_FLAGS: [RegExp, string][] = [
  [/^(?:EtcdLocker options\.)?endpoints\b/, '--etcd'],
  [/^(?:EtcdLocker options\.)?holderId\b/, 'the holder id (--id)'],
  [/^(?:EtcdLocker options\.)?electionName\b/, '--election'],
  [/^(?:EtcdLocker options\.)?tls\.ca\b/, '--etcd-ca'],
  [/^(?:EtcdLocker options\.)?tls\.cert\b/, '--etcd-cert'],
  [/^(?:EtcdLocker options\.)?tls\.key\b/, '--etcd-key'],
];

/**
 * {@link createLocker} for a command line: a setting the locker refuses (an etcd URL that is
 * not `http(s)://host:port`, a TLS file it cannot read, a holder id too long) is a one-line
 * {@link UsageError} naming the flag, with the locker's own reason.
 */
export async function createCliLocker(
  flags: LockerFlags,
  directory: string | undefined,
  holderId: string,
  logger: StoreLogger,
): Promise<Locker> {
  try {
    return await createLocker(lockerOptionsOf(flags, directory, holderId, logger));
  } catch (err) {
    if (flags.kind !== 'etcd' || !(err instanceof InvalidArgumentError)) throw err;
    let message = err.message;
    for (const [pattern, name] of ETCD_OPTION_FLAGS) message = message.replace(pattern, name);
    throw new UsageError(message, { cause: err });
  }
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
  if (kind === 'etcd') {
    const etcd = flags.etcd as EtcdFlags;
    return {
      kind,
      endpoints: etcd.endpoints,
      electionName: etcd.electionName,
      leaseMs: flags.leaseMs,
      holderId,
      auth: etcd.auth,
      tls: etcd.tls,
      failIfLocked,
      logger,
    };
  }
  const database = { database: flags.db as string, lockTableName: flags.table };
  return kind === 'database'
    ? { kind, ...database, acquireIntervalMs, failIfLocked, logger }
    : { kind, ...database, leaseHolderId: holderId, leaseMs: flags.leaseMs, failIfLocked, logger };
}
