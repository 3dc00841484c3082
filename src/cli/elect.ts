import { LockIOError, LockLostError, LockObtainFailedError } from '../core/errors.js';
import { makeDirectories } from '../directory/make-directories.js';
import { CommandWatchdog } from '../os/command-watchdog.js';
import { type CommandExit, CommandService, DEFAULT_GRACE_MS } from '../store/command-service.js';
import {
  DATABASE_QUERY_TIMEOUT_MS,
  LOCKER_KINDS,
  type LockerKind,
} from '../store/create-locker.js';
import { describe } from '../store/describe-error.js';
import type { Locker } from '../store/locker.js';
import type { StoreLogger } from '../store/logger.js';
import { type ConfirmedEvent, Supervisor, type SupervisorEvent } from '../store/supervisor.js';
import { type WatchdogDeadlines, watchdogPolicy } from '../store/watchdog-policy.js';
import { parseCommandLine, UsageError } from './args.js';
import {
  createCliLocker,
  type EtcdFlags,
  type LockerFlagNames,
  lockerDuration,
  parseLockerFlags,
  rejectNegativeDurations,
} from './locker-flags.js';
import { USAGES } from './usage.js';

export const USAGE = `locksmith ${USAGES.elect.synopsis}`;

/** The command line of `locksmith elect`, validated; durations in ms. */
export interface ElectOptions {
  locker: LockerKind;
  /** The store directory (shared-file only). */
  dir?: string;
  /** The database URL: `sqlite:<path>`, `postgres://…`, `mysql://…` (database lockers only). */
  db?: string;
  /** The lock table name (database lockers only). */
  table?: string;
  /** The etcd endpoints, election and credentials (etcd only). */
  etcd?: EtcdFlags;
  /**
   * This contender's name: the prefix of its stderr lines, the lease holder id
   * (lease-database) and the proposal, the value of its candidate key (etcd).
   */
  id: string;
  /**
   * Lease duration (lease-database and etcd; default 10 s, ActiveMQ's lockAcquireSleepInterval;
   * whole seconds for etcd).
   */
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
 * `--renew` not at most 3/8 of the lease (given or default), a lease under 1 s, no command.
 * Durations need a unit and lie within 1 ms .. 2^31−1 ms (see {@link duration}).
 */
export function parseElectOptions(args: string[]): ElectOptions {
  rejectNegativeDurations(args);
  const { values, positionals, command } = parseCommandLine(args, USAGES.elect.flags);
  const str = (name: string): string | undefined => values[name] as string | undefined;
  if (positionals.length > 0) {
    throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])} before --`);
  }
  if (command === undefined || command.length === 0) {
    throw new UsageError('expected -- and a command to run while master');
  }
  const flags = parseLockerFlags(values, ELECT_FLAG_NAMES);
  if (flags === undefined) {
    throw new UsageError(`--locker is required (${LOCKER_KINDS.join('|')})`);
  }
  const id = str('id');
  if (id === undefined || id.trim().length === 0) {
    throw new UsageError('--id <name> is required: it names this contender');
  }
  const { kind: locker, failIfLocked, ...timings } = flags;
  const options: ElectOptions = {
    locker,
    id,
    graceMs: lockerDuration(str('grace'), '--grace', true) ?? DEFAULT_GRACE_MS,
    failIfLocked,
    command,
    ...timings,
  };
  if (locker === 'shared-file') {
    const dir = str('dir');
    if (dir === undefined || dir.length === 0) {
      throw new UsageError('--locker shared-file needs --dir <dir>');
    }
    options.dir = dir;
  }
  return options;
}

/**
 * The etcd election of `elect --locker etcd` without `--election`: one fixed name, as the
 * database lockers have one default lock table. Contenders for different jobs on one etcd
 * cluster each need their own `--election`.
 */
export const DEFAULT_ELECT_ELECTION = 'locksmith/elect';

/** How elect names the locker flags (serve names two of them differently). */
const ELECT_FLAG_NAMES: LockerFlagNames = {
  kind: '--locker',
  table: '--table',
  sharedFileOnly: ['--dir'],
  defaultElection: DEFAULT_ELECT_ELECTION,
};

/**
 * The locker elect runs under (silent but for `logger`: elect reports role changes itself,
 * and listens only for the locker's first "held" line). `--id` names the lease holder of
 * lease-database and is the proposal of etcd (what `etcdctl elect -l` shows); the
 * held-transaction `database` locker has no holder column, so there it only names this
 * contender in elect's lines.
 */
function lockerOf(options: ElectOptions, logger: StoreLogger): Promise<Locker> {
  return createCliLocker({ ...options, kind: options.locker }, options.dir, options.id, logger);
}

/**
 * `locksmith elect`: runs the command only while this process is master of the store, with
 * the fencing token in `LOCKSMITH_FENCING_TOKEN`.
 *
 * - Loss of mastership: SIGTERM to the command's process group, SIGKILL after `--grace`, then
 *   back to waiting as a slave (a new mastership runs the command again, with a new token).
 * - The command watchdog: a separate process holds the command's deadline (see
 *   {@link watchdogPolicy}), which each confirmation of mastership moves on. If elect cannot
 *   confirm in time (paused by SIGSTOP, its event loop blocked, the database slow), the
 *   watchdog sends SIGTERM and then SIGKILL to the command's group before any other contender
 *   can be master; the same deadline cuts `--grace` short on a loss or a stop. If elect dies
 *   (even `kill -9`) the watchdog SIGKILLs the whole group at once (the command itself also
 *   has the parent-death signal). A command the watchdog stopped is a loss: elect demotes,
 *   gives the lock back, and waits as a slave. The watchdog process dying ends elect (exit 1).
 * - The command ending on its own ends elect with its status (128 + signal number when a
 *   signal we did not send killed it); the lock is released first.
 * - SIGINT/SIGTERM/SIGHUP to elect: the command is stopped (with the grace), the lock
 *   released, and elect exits 128 + that signal's number.
 * - One stderr line per step: trying to become master (with the database locker's takeover
 *   pause), waiting as slave (only once the locker has found another master, naming it where
 *   the store says), became master (with the token), lost mastership (with the reason),
 *   stopped. A failure that ends the supervisor
 *   (e.g. `--fail-if-locked` while another is master) is the "stopped" line and exit 1. The
 *   only other line: a warning when a keep-alive failed but mastership continues.
 * - A second stop signal while stopping changes nothing: the grace already bounds the wait.
 */
export async function run(args: string[]): Promise<number> {
  const options = parseElectOptions(args);
  const say = (line: string) => process.stderr.write(`locksmith elect [${options.id}]: ${line}\n`);
  if (options.dir !== undefined) {
    // Created before anything starts, so that a directory that cannot be created (`/proc/x`)
    // is one line with the OS's reason and exit 1, like every other bad setting.
    try {
      await makeDirectories(options.dir);
    } catch (err) {
      throw new LockIOError(
        `Cannot create lock directory ${options.dir} (${String((err as Error).message).split(',')[0]})`,
        { cause: err },
      );
    }
  }
  // The database locker pauses renew + query timeout after it got the row and before it acts
  // as master (ActiveMQ's DatabaseLocker does so, to let the old master notice); it says
  // nothing meanwhile, so elect announces the pause up front. Set once the period is known.
  let pauseNote = '';
  const locker = await lockerOf(options, {
    // The locker's first "held" line is the moment this contender has looked and found
    // another master: only then is it a slave. The rest of its log stays quiet.
    info: (message) => {
      const held = /^(.*?)\. This broker is now in slave mode/.exec(message)?.[1];
      if (held !== undefined)
        say(`waiting as slave: ${held}${pauseNote && ` (when it frees: ${pauseNote})`}`);
    },
    debug: () => {},
    warn: () => {},
  });
  // Started before anything is taken: no command ever runs unwatched.
  const watchdog = await CommandWatchdog.start();
  let deadlines: WatchdogDeadlines | undefined;
  const service = new CommandService(options.command, {
    graceMs: options.graceMs,
    name: 'locksmith elect',
    onSpawn: (pid) => {
      if (deadlines === undefined) throw new Error('no confirmed mastership to run under');
      watchdog.arm(pid, deadlines.termAt, deadlines.killAt);
    },
    onExit: () => watchdog.disarm(),
  });
  const supervisor = new Supervisor({
    locker,
    service,
    ...(options.renewMs === undefined ? {} : { keepAlivePeriodMs: options.renewMs }),
  });
  const policy = watchdogPolicy({
    kind: options.locker,
    leaseMs: options.leaseMs,
    graceMs: options.graceMs,
    renewMs: supervisor.keepAlivePeriodMs,
  });
  if (options.locker === 'database' && supervisor.keepAlivePeriodMs > 0) {
    const pauseS = (supervisor.keepAlivePeriodMs + DATABASE_QUERY_TIMEOUT_MS) / 1000;
    pauseNote = `pausing ${pauseS} s before taking over, as ActiveMQ's DatabaseLocker does`;
  }
  supervisor.on('confirmed', (confirmed: ConfirmedEvent) => {
    deadlines = policy(confirmed);
    watchdog.extend(deadlines.termAt, deadlines.killAt);
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

  const watchdogLoss = (detail: string) =>
    new LockLostError(
      `the command watchdog stopped the command: mastership was not confirmed before its deadline${detail}`,
    );
  watchdog.on('fired', ({ pgid, signal, lateMs }) => {
    if (pgid === service.pid) {
      supervisor.demote(watchdogLoss(` (${signal} ${Math.round(lateMs)} ms after it)`));
    }
  });
  watchdog.on('exit', ({ expected, code, signal }) => {
    if (!expected) finish(1, ` (the command watchdog exited unexpectedly: ${code ?? signal})`);
  });

  // Not yet a slave: the locker has not looked. It says "waiting as slave" when it finds
  // another master (above); with --fail-if-locked it never waits.
  const notes = [
    ...(options.failIfLocked ? ['--fail-if-locked: exiting if another process is master'] : []),
    ...(pauseNote ? [`once the lock is ours: ${pauseNote}`] : []),
  ];
  const trying = `trying to become master of ${locker.name}${notes.length > 0 ? ` (${notes.join('; ')})` : ''}`;
  supervisor.on('waiting', () => say(trying));
  supervisor.on('master', ({ token }: SupervisorEvent) => {
    say(`became master with token ${token}; running ${options.command.join(' ')}`);
    // The exit promise of this run: a run we stopped (loss, signal) does not end elect, nor
    // does one the watchdog stopped (a loss, though elect may hear of it only now).
    const fired = () => watchdog.fired;
    service.exited.then(
      (exit: CommandExit) => {
        if (exit.stopped) return;
        if (fired()) supervisor.demote(watchdogLoss(''));
        else finish(exit.status, ` (command exited with status ${exit.status})`);
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
        say(
          reason instanceof LockObtainFailedError && options.failIfLocked
            ? `stopped: another process is master (--fail-if-locked): ${describe(reason)}`
            : `stopped: ${describe(reason)}`,
        );
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
    await watchdog.close();
  }
}
