import { parseDuration } from '../core/duration.js';
import { LockLostError } from '../core/errors.js';
import { type CommandExit, CommandService, DEFAULT_GRACE_MS } from '../store/command-service.js';
import { describe } from '../store/describe-error.js';
import { DEFAULT_LOCK_ACQUIRE_SLEEP_INTERVAL, type Locker } from '../store/locker.js';
import { SharedFileLocker } from '../store/shared-file-locker.js';
import { Supervisor, type SupervisorEvent } from '../store/supervisor.js';
import { parseCommandLine, UsageError } from './args.js';

export const USAGE =
  'locksmith elect --locker shared-file --dir <dir> | --locker database|lease-database --db <url> [--table <name>] --id <name> [--lease <duration>] [--renew <duration>] [--acquire-interval <duration>] [--grace <duration>] [--fail-if-locked] -- <command> [args...]';

export const LOCKER_KINDS = ['shared-file', 'database', 'lease-database'] as const;
export type LockerKind = (typeof LOCKER_KINDS)[number];

/** The command line of `locksmith elect`, validated; durations in ms. */
export interface ElectOptions {
  locker: LockerKind;
  /** The store directory (shared-file only). */
  dir?: string;
  /** The database URL: `sqlite:<path>`, `postgres://…`, `mysql://…` (database lockers only). */
  db?: string;
  /** The lock table name (database lockers only). */
  table?: string;
  /** This contender's name: the prefix of its stderr lines, and the lease holder id. */
  id: string;
  /** Lease duration (lease-database only; default 10 s, ActiveMQ's lockAcquireSleepInterval). */
  leaseMs?: number;
  /** The supervisor's keep-alive (renewal) period; default the locker's own. */
  renewMs?: number;
  /**
   * Retry period while another process is master; default the locker's own (10 s). Not for
   * lease-database, which retries when the lease expires (at most one lease later).
   */
  acquireIntervalMs?: number;
  /** Time between SIGTERM and SIGKILL when the command must stop. */
  graceMs: number;
  failIfLocked: boolean;
  command: string[];
}

/** Signals that stop elect: the command is stopped (with the grace), the lock released. */
const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
const SIGNAL_STATUS: Record<(typeof STOP_SIGNALS)[number], number> = {
  SIGHUP: 129,
  SIGINT: 130,
  SIGTERM: 143,
};

/**
 * Parses and validates the command line. Every mistake is a {@link UsageError} with a
 * one-line message (the dispatcher prints it and exits 2): unknown locker, a missing or
 * misplaced `--dir`/`--db`/`--table`/`--lease`/`--acquire-interval`, a missing `--id`, a
 * malformed, negative or zero duration (only `--grace` may be 0), for lease-database a
 * `--renew` not at most 3/4 of the lease (given or default), no command.
 */
export function parseElectOptions(args: string[]): ElectOptions {
  rejectNegativeDurations(args);
  const { values, positionals, command } = parseCommandLine(args, {
    locker: { type: 'string' },
    dir: { type: 'string' },
    db: { type: 'string' },
    table: { type: 'string' },
    id: { type: 'string' },
    lease: { type: 'string' },
    renew: { type: 'string' },
    'acquire-interval': { type: 'string' },
    grace: { type: 'string' },
    'fail-if-locked': { type: 'boolean' },
  });
  const str = (name: string): string | undefined => values[name] as string | undefined;
  if (positionals.length > 0) {
    throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])} before --`);
  }
  if (command === undefined || command.length === 0) {
    throw new UsageError('expected -- and a command to run while master');
  }
  const kind = str('locker');
  if (kind === undefined) throw new UsageError(`--locker is required (${LOCKER_KINDS.join('|')})`);
  if (!(LOCKER_KINDS as readonly string[]).includes(kind)) {
    throw new UsageError(
      `unknown locker ${JSON.stringify(kind)}: expected ${LOCKER_KINDS.join(', ')}`,
    );
  }
  const locker = kind as LockerKind;
  const id = str('id');
  if (id === undefined || id.trim().length === 0) {
    throw new UsageError('--id <name> is required: it names this contender');
  }
  const options: ElectOptions = {
    locker,
    id,
    graceMs: duration(str('grace'), '--grace', true) ?? DEFAULT_GRACE_MS,
    failIfLocked: values['fail-if-locked'] === true,
    command,
  };
  if (locker === 'shared-file') {
    const dir = str('dir');
    if (dir === undefined || dir.length === 0) {
      throw new UsageError('--locker shared-file needs --dir <dir>');
    }
    for (const other of ['db', 'table', 'lease'] as const) {
      if (values[other] !== undefined) {
        throw new UsageError(`--${other} does not apply to --locker shared-file`);
      }
    }
    options.dir = dir;
  } else {
    const db = str('db');
    if (db === undefined || db.length === 0) {
      throw new UsageError(
        `--locker ${locker} needs --db <url> (sqlite:<path>, postgres://…, mysql://…)`,
      );
    }
    if (values.dir !== undefined) {
      throw new UsageError(`--dir does not apply to --locker ${locker}; use --db <url>`);
    }
    if (locker === 'database' && values.lease !== undefined) {
      throw new UsageError('--lease applies only to --locker lease-database');
    }
    if (locker === 'lease-database' && values['acquire-interval'] !== undefined) {
      throw new UsageError(
        '--acquire-interval does not apply to --locker lease-database: it retries when the lease expires (--lease)',
      );
    }
    options.db = db;
    const table = str('table');
    if (table !== undefined) options.table = table;
  }
  const lease = duration(str('lease'), '--lease', false);
  const renew = duration(str('renew'), '--renew', false);
  const interval = duration(str('acquire-interval'), '--acquire-interval', false);
  if (lease !== undefined) options.leaseMs = lease;
  if (renew !== undefined) options.renewMs = renew;
  if (interval !== undefined) options.acquireIntervalMs = interval;
  if (locker === 'lease-database' && renew !== undefined) {
    // The lease locker self-fences when no renewal succeeded for lease − lease/4: a renewal
    // period above that makes every mastership end between two renewals.
    const leaseMs = lease ?? DEFAULT_LOCK_ACQUIRE_SLEEP_INTERVAL;
    const leaseText = lease === undefined ? `${leaseMs}ms, the default` : str('lease');
    if (renew >= leaseMs) {
      throw new UsageError(
        `--renew (${str('renew')}) must be shorter than --lease (${leaseText}): a lease renewed no faster than it expires lapses between renewals`,
      );
    }
    if (renew > leaseMs - leaseMs / 4) {
      throw new UsageError(
        `--renew (${str('renew')}) must be at most 3/4 of --lease (${leaseText}): the master self-fences when it has not renewed for lease − lease/4`,
      );
    }
  }
  return options;
}

const DURATION_OPTIONS = ['--lease', '--renew', '--acquire-interval', '--grace'];

/**
 * `--renew -1s` would otherwise surface as parseArgs' three-line "argument is ambiguous"
 * message; name the actual mistake instead, in one line.
 */
function rejectNegativeDurations(args: string[]): void {
  const end = args.indexOf('--');
  const options = end === -1 ? args : args.slice(0, end);
  for (const [i, arg] of options.entries()) {
    const next = options[i + 1];
    if (DURATION_OPTIONS.includes(arg) && next !== undefined && /^-\d/.test(next)) {
      throw new UsageError(`Invalid ${arg} ${JSON.stringify(next)}: durations cannot be negative`);
    }
  }
}

/** A duration option: undefined when absent; 0 only where `zeroAllowed`. */
function duration(
  value: string | undefined,
  what: string,
  zeroAllowed: boolean,
): number | undefined {
  if (value === undefined) return undefined;
  let ms: number;
  try {
    ms = parseDuration(value, what);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (ms === 0 && !zeroAllowed) {
    throw new UsageError(`Invalid ${what} ${JSON.stringify(value)}: must be greater than 0`);
  }
  return ms;
}

/**
 * The one place that turns the options into a {@link Locker} (silent: elect reports role
 * changes itself). The database lockers are imported on demand, so that `shared-file` never
 * loads the database drivers. Their constructors validate the URL and the table name (an
 * InvalidArgumentError: exit 2); nothing connects before `start()`. `--id` names the lease
 * holder of lease-database; the held-transaction `database` locker has no holder column, so
 * there it only names this contender in elect's lines.
 */
export async function createLocker(options: ElectOptions): Promise<Locker> {
  switch (options.locker) {
    case 'shared-file':
      return new SharedFileLocker({
        directory: options.dir as string,
        lockAcquireSleepInterval: options.acquireIntervalMs,
        failIfLocked: options.failIfLocked,
      });
    case 'lease-database': {
      const { LeaseDatabaseLocker } = await import('../store/lease-database-locker.js');
      return new LeaseDatabaseLocker({
        database: options.db as string,
        lockTableName: options.table,
        leaseHolderId: options.id,
        // ActiveMQ's semantics: the lease locker's acquire interval is its lease duration.
        lockAcquireSleepInterval: options.leaseMs,
        failIfLocked: options.failIfLocked,
      });
    }
    case 'database': {
      const { DatabaseLocker } = await import('../store/database-locker.js');
      return new DatabaseLocker({
        database: options.db as string,
        lockTableName: options.table,
        lockAcquireSleepInterval: options.acquireIntervalMs,
        failIfLocked: options.failIfLocked,
      });
    }
  }
}

/**
 * `locksmith elect`: runs the command only while this process is master of the store, with
 * the fencing token in `LOCKSMITH_FENCING_TOKEN`.
 *
 * - Loss of mastership: SIGTERM to the command's process group, SIGKILL after `--grace`, then
 *   back to waiting as a slave (a new mastership runs the command again, with a new token).
 * - The command ending on its own ends elect with its status (128 + signal number when a
 *   signal we did not send killed it); the lock is released first.
 * - SIGINT/SIGTERM/SIGHUP to elect: the command is stopped (with the grace), the lock
 *   released, and elect exits 128 + that signal's number.
 * - elect dying, even by `kill -9`: the command is SIGKILLed by the kernel (CommandService
 *   spawns it with PR_SET_PDEATHSIG), so an orphan can never act as a second master.
 * - Exactly one stderr line per role change: waiting as slave, became master (with the
 *   token), lost mastership (with the reason), stopped. A failure that ends the supervisor
 *   (e.g. `--fail-if-locked` while another is master) is the "stopped" line and exit 1. The
 *   only other line: a warning when a keep-alive failed but mastership continues.
 * - A second stop signal while stopping changes nothing: the grace already bounds the wait.
 */
export async function run(args: string[]): Promise<number> {
  const options = parseElectOptions(args);
  const say = (line: string) => process.stderr.write(`locksmith elect [${options.id}]: ${line}\n`);
  const locker = await createLocker(options);
  const service = new CommandService(options.command, { graceMs: options.graceMs });
  const supervisor = new Supervisor({
    locker,
    service,
    ...(options.renewMs === undefined ? {} : { lockKeepAlivePeriod: options.renewMs }),
  });

  // The exit status, fixed by whichever ends elect first: the command, a signal, a failure.
  let status: number | undefined;
  let stopDetail = '';
  const finish = (code: number, detail: string) => {
    if (status !== undefined) return;
    status = code;
    stopDetail = detail;
    supervisor.stop().catch(() => {
      // stop() never rejects; the 'stopped' event below reports the outcome.
    });
  };
  const onSignal = (sig: (typeof STOP_SIGNALS)[number]) =>
    finish(SIGNAL_STATUS[sig], ` (received ${sig})`);
  for (const sig of STOP_SIGNALS) process.on(sig, onSignal);

  supervisor.on('waiting', () => say(`waiting as slave for ${locker.name}`));
  supervisor.on('master', ({ token }: SupervisorEvent) => {
    say(`became master with token ${token}; running ${options.command.join(' ')}`);
    // The exit promise of this run: a run we stopped (loss, signal) does not end elect.
    service.exited.then(
      (exit: CommandExit) => {
        if (!exit.stopped) finish(exit.status, ` (command exited with status ${exit.status})`);
      },
      () => {},
    );
  });
  // A keep-alive that failed without ending mastership (ownership unknown, still master) is
  // no role change but deserves a line; a failure that demotes is told by 'demoted'.
  supervisor.on('keepalive-failed', ({ reason }: SupervisorEvent) => {
    if (!(reason instanceof LockLostError)) {
      say(`warning: keep-alive failed, still master: ${describe(reason)}`);
    }
  });
  supervisor.on('demoted', ({ reason }: SupervisorEvent) =>
    say(`lost mastership: ${describe(reason)}`),
  );
  const stopped = new Promise<number>((resolve) => {
    supervisor.once('stopped', ({ reason }: SupervisorEvent) => {
      if (reason !== undefined && status === undefined) {
        say(`stopped: ${describe(reason)}`);
        resolve(1);
        return;
      }
      say(`stopped${stopDetail}`);
      resolve(status ?? 1);
    });
  });
  try {
    // Its rejection (stopped before mastership, failure to start) is reported by 'stopped'.
    supervisor.start().catch(() => {});
    return await stopped;
  } finally {
    for (const sig of STOP_SIGNALS) process.off(sig, onSignal);
  }
}
