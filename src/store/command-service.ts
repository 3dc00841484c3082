import type { ChildProcess, StdioOptions } from 'node:child_process';
import { constants } from 'node:os';
import { checkDuration } from '../core/duration.js';
import { AbortedError, isErrno, LockIOError, UnsupportedOperationError } from '../core/errors.js';
import { spawnWithParentDeath, validateCommand } from '../os/parent-death.js';
import type { Service, ServiceContext } from './service.js';

export interface CommandServiceOptions {
  /** How long `stop()` waits after SIGTERM before SIGKILL, in ms (default 5000, ≥ 0). */
  graceMs?: number;
  /** The command's stdio (default `'inherit'`); `'ipc'` is not allowed. */
  stdio?: StdioOptions;
  /** The command's environment before `LOCKSMITH_FENCING_TOKEN` is added (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Who reports a command that cannot be run (default `locksmith`), e.g. `locksmith elect`. */
  name?: string;
  /**
   * Run the command in a new session and process group (default true), so that `stop()` and
   * the end of the command signal everything it started, not only its own pid. The command
   * then has no controlling terminal; keyboard signals reach the supervisor, which stops it.
   */
  processGroup?: boolean;
  /**
   * Called synchronously right after the command was spawned, with its pid (the process group
   * id too, with `processGroup`), before anything else can run: the place to put it under a
   * watch (elect's CommandWatchdog). A throw is reported as a failed start after the command
   * was killed.
   */
  onSpawn?: (pid: number) => void;
  /**
   * Called synchronously once the command was reaped and its group SIGKILLed, in the same tick:
   * the place to end a watch on its pid before the id can be reused.
   */
  onExit?: (pid: number) => void;
}

/** How a run of the command ended. */
export interface CommandExit {
  /** Exit code, or null when killed by a signal. */
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Shell-style status: `code`, or 128 + the signal number. */
  status: number;
  /** True when the command ended after `stop()` or the abort of the start signal. */
  stopped: boolean;
}

export const DEFAULT_GRACE_MS = 5000;

/** A shell-style exit status: the code, or 128 + signal number when killed by a signal. */
export function exitStatus(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  return 128 + (signal === null ? 0 : (constants.signals[signal] ?? 0));
}

interface Run {
  child: ChildProcess;
  exited: Promise<CommandExit>;
  stopping: Promise<void> | undefined;
}

/**
 * A {@link Service} that is a command: `start` runs it with the fencing token in
 * `LOCKSMITH_FENCING_TOKEN`, `stop` (or the abort of the start signal) sends SIGTERM, then
 * SIGKILL after `graceMs`, and resolves once it has exited. The command is spawned through
 * the parent-death launcher, so it is SIGKILLed if this process dies, even by `kill -9`
 * (Linux only: elsewhere `start` throws UnsupportedOperationError; see src/os/parent-death.ts
 * for the limits). Spawn it from the main thread: a command started from a worker thread dies
 * with that worker.
 *
 * Each `start` is a new run (a supervisor restarts the service at every new mastership);
 * `exited` tells a caller when the command ends on its own.
 */
export class CommandService implements Service {
  readonly command: readonly string[];
  readonly graceMs: number;
  readonly #options: CommandServiceOptions;
  #run: Run | undefined;
  /** The current run's exit; replaced by `start` once settled. */
  #exited: Promise<CommandExit>;
  #settled = false;
  #settle: (exit: CommandExit) => void = () => {};

  constructor(command: readonly string[], options: CommandServiceOptions = {}) {
    validateCommand(command);
    const graceMs = checkDuration(options.graceMs ?? DEFAULT_GRACE_MS, 'graceMs');
    this.command = [...command];
    this.graceMs = graceMs;
    this.#options = options;
    this.#exited = this.#nextExit();
  }

  /**
   * The exit of the current run (before the first `start`, of the first run). A new promise
   * replaces it at each `start`; it never rejects.
   */
  get exited(): Promise<CommandExit> {
    return this.#exited;
  }

  /** The pid of the running command, if any. */
  get pid(): number | undefined {
    return this.#run?.child.pid;
  }

  /**
   * Spawns the command; resolves once it is spawned. Rejects with {@link AbortedError} (and
   * spawns nothing) if `signal` is already aborted, and when a run is still going.
   */
  async start({ signal, token }: ServiceContext): Promise<void> {
    if (this.#run !== undefined) {
      throw new UnsupportedOperationError(
        `${this.command[0]} is still running (pid ${this.#run.child.pid}); stop() it first`,
      );
    }
    if (signal.aborted) {
      throw new AbortedError(`${this.command[0]} not started: the service was already stopped`, {
        cause: signal.reason,
      });
    }
    const group = this.#options.processGroup ?? true;
    const child = spawnWithParentDeath(this.command, {
      stdio: this.#options.stdio ?? 'inherit',
      env: { ...(this.#options.env ?? process.env), LOCKSMITH_FENCING_TOKEN: String(token) },
      detached: group,
      ...(this.#options.cwd === undefined ? {} : { cwd: this.#options.cwd }),
      name: this.#options.name,
    });
    // The run exists from here on, before the spawn is confirmed, so that a stop() or an
    // abort that comes meanwhile still reaches the command instead of finding nothing to stop.
    if (this.#settled) this.#exited = this.#nextExit();
    const onAbort = () => {
      this.#stopRun(run).catch(() => {});
    };
    const run: Run = {
      child,
      stopping: undefined,
      exited: new Promise<CommandExit>((resolve) => {
        child.once('exit', (code, sig) => {
          // Whatever the command left in its group must not keep acting after it.
          if (group && child.pid !== undefined) kill(-child.pid, 'SIGKILL');
          if (child.pid !== undefined) this.#options.onExit?.(child.pid);
          signal.removeEventListener('abort', onAbort);
          if (this.#run === run) this.#run = undefined;
          resolve({
            code,
            signal: sig,
            status: exitStatus(code, sig),
            stopped: run.stopping !== undefined,
          });
        });
      }),
    };
    this.#run = run;
    run.exited.then(this.#settle, () => {});
    signal.addEventListener('abort', onAbort, { once: true });
    if (child.pid !== undefined && this.#options.onSpawn !== undefined) {
      try {
        this.#options.onSpawn(child.pid);
      } catch (err) {
        // Unwatched, the command must not run: kill it and report the start as failed.
        await this.#stopRun(run).catch(() => {});
        throw new LockIOError(`cannot watch ${this.command[0]}`, { cause: err });
      }
    }
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      // Only a failed spawn rejects (and ends the run: no 'exit' follows it); a later 'error'
      // (a failed kill) must not crash the process.
      child.on('error', (err) => {
        if (child.pid === undefined && this.#run === run) {
          this.#run = undefined;
          signal.removeEventListener('abort', onAbort);
        }
        reject(new LockIOError(`cannot spawn ${this.command[0]}`, { cause: err }));
      });
    });
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the command has exited. Idempotent. */
  async stop(): Promise<void> {
    const run = this.#run;
    if (run !== undefined) await this.#stopRun(run);
  }

  #stopRun(run: Run): Promise<void> {
    if (run.stopping !== undefined) return run.stopping;
    const pid = run.child.pid;
    const group = this.#options.processGroup ?? true;
    const send = (sig: NodeJS.Signals) => {
      if (pid === undefined) return;
      if (group) kill(-pid, sig);
      else run.child.kill(sig);
    };
    run.stopping = (async () => {
      send('SIGTERM');
      const timer = setTimeout(() => send('SIGKILL'), this.graceMs);
      try {
        await run.exited;
      } finally {
        clearTimeout(timer);
      }
    })();
    return run.stopping;
  }

  #nextExit(): Promise<CommandExit> {
    this.#settled = false;
    return new Promise<CommandExit>((resolve) => {
      this.#settle = (exit) => {
        this.#settled = true;
        resolve(exit);
      };
    });
  }
}

/**
 * `process.kill` for our own process group: ESRCH means it is already gone, and EPERM can only
 * mean the group id now names someone else's processes. Neither is ours to act on.
 */
function kill(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if (!isErrno(err, 'ESRCH', 'EPERM')) throw err;
  }
}
