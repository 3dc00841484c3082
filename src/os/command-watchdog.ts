import { type ChildProcess, spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError, LockIOError, UnsupportedOperationError } from '../core/errors.js';

/**
 * A process that stops a command's process group at a deadline its owner keeps extending, so
 * that the command cannot outlive a mastership even when the owner cannot act: its event loop
 * is blocked, it is stopped with SIGSTOP, or it was killed with `kill -9`.
 *
 * - The owner arms it with the group id and two deadlines: SIGTERM to the group at `termAt`,
 *   SIGKILL at `killAt` (then it disarms itself). `extend` moves both; once the SIGTERM went
 *   out, extensions are ignored (the command is on its way down).
 * - Owner gone (its end of the pipe closed: exit, crash, `kill -9`): SIGKILL to an armed
 *   group at once, and the watchdog exits.
 * - Deadlines are in ms of {@link sharedNow} (CLOCK_MONOTONIC, the same in every process of
 *   the machine), so a deadline means the same instant on both sides of the pipe, however long
 *   a message takes to arrive.
 * - It ignores SIGINT/SIGTERM/SIGHUP and runs in its own session: only its owner ends it.
 *
 * What it cannot do: act when it is itself stopped or killed (the owner sees an `exit` event
 * and must then stop the command itself), or tell a reused group id from the command's (the
 * owner disarms it in the same tick it reaps the command, which leaves microseconds).
 */
export class CommandWatchdog extends EventEmitter<{
  /** The watchdog sent `signal` to group `pgid`, `lateMs` after its deadline. */
  fired: [{ pgid: number; signal: 'SIGTERM' | 'SIGKILL'; lateMs: number }];
  /** The watchdog process ended (by {@link close}, or unexpectedly). */
  exit: [{ code: number | null; signal: NodeJS.Signals | null; expected: boolean }];
}> {
  readonly #child: ChildProcess;
  #armed: { pgid: number; termAt: number; killAt: number } | undefined;
  #termSent = false;
  /** Whether the last armed group's SIGTERM deadline had passed when it was disarmed. */
  #firedBeforeDisarm = false;
  #closing = false;
  #exited = false;

  private constructor(child: ChildProcess) {
    super();
    this.#child = child;
  }

  /** The watchdog's pid. */
  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** Whether the watchdog process still runs. */
  get alive(): boolean {
    return !this.#exited;
  }

  /**
   * Spawns the watchdog and resolves once it is ready. Rejects with {@link LockIOError} when it
   * cannot start; {@link UnsupportedOperationError} off POSIX (process groups are needed).
   */
  static async start(): Promise<CommandWatchdog> {
    if (process.platform === 'win32') {
      throw new UnsupportedOperationError('A command watchdog needs POSIX process groups');
    }
    const child = spawn(process.execPath, [COMMAND_WATCHDOG_PROCESS], {
      stdio: ['pipe', 'pipe', 'inherit'],
      detached: true,
    });
    const watchdog = new CommandWatchdog(child);
    // The owner must never hang on its watchdog: neither keeps the other's event loop alive.
    child.unref();
    await new Promise<void>((resolve, reject) => {
      let partial = '';
      let ready = false;
      child.stdout?.on('data', (chunk: Buffer) => {
        const lines = (partial + chunk.toString('utf8')).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) {
          if (line === 'ready') {
            ready = true;
            resolve();
          } else watchdog.#report(line);
        }
      });
      child.once('error', (err) =>
        reject(new LockIOError('cannot start the command watchdog', { cause: err })),
      );
      child.once('exit', (code, signal) => {
        watchdog.#exited = true;
        if (!ready) {
          reject(new LockIOError(`the command watchdog exited at start (${code ?? signal})`));
        }
        watchdog.emit('exit', { code, signal, expected: watchdog.#closing });
      });
    });
    (child.stdout as unknown as { unref?: () => void }).unref?.();
    (child.stdin as unknown as { unref?: () => void }).unref?.();
    // A write after the watchdog died: the 'exit' event tells the owner; nothing to throw.
    child.stdin?.on('error', () => {});
    return watchdog;
  }

  #report(line: string): void {
    const [verb, pgid, late] = line.split(' ');
    if (verb === 'term' || verb === 'kill') {
      if (verb === 'term') this.#termSent = true;
      if (verb === 'kill' && this.#armed?.pgid === Number(pgid)) this.#armed = undefined;
      this.emit('fired', {
        pgid: Number(pgid),
        signal: verb === 'term' ? 'SIGTERM' : 'SIGKILL',
        lateMs: Number(late),
      });
    }
  }

  #send(line: string): void {
    if (this.#exited || this.#closing) return;
    this.#child.stdin?.write(`${line}\n`);
  }

  /**
   * Watches group `pgid`: SIGTERM at `termAt`, SIGKILL at `killAt` ({@link sharedNow} ms,
   * `Infinity` for never; `termAt` ≤ `killAt`).
   */
  arm(pgid: number, termAt: number, killAt: number): void {
    if (!Number.isSafeInteger(pgid) || pgid <= 1) {
      throw new InvalidArgumentError(`pgid must be a process group id > 1, got ${pgid}`);
    }
    checkDeadlines(termAt, killAt);
    this.#armed = { pgid, termAt, killAt };
    this.#termSent = false;
    this.#firedBeforeDisarm = false;
    this.#send(`arm ${pgid} ${time(termAt)} ${time(killAt)}`);
  }

  /** Moves the deadlines of the armed group (ignored once its SIGTERM went out). */
  extend(termAt: number, killAt: number): void {
    checkDeadlines(termAt, killAt);
    if (this.#armed === undefined) return;
    this.#armed.termAt = termAt;
    this.#armed.killAt = killAt;
    this.#send(`extend ${time(termAt)} ${time(killAt)}`);
  }

  /** Forgets the group: call it as soon as the command has been reaped. */
  disarm(): void {
    this.#firedBeforeDisarm = this.fired;
    this.#armed = undefined;
    this.#termSent = false;
    this.#send('disarm');
  }

  /**
   * Whether the watchdog has (or, by its deadline, must have) signalled the armed group: its
   * report came, or `sharedNow()` is past the SIGTERM deadline. True means the command's end
   * is the watchdog's doing, not the command's own. After {@link disarm}, it tells about the
   * group that was disarmed, until the next {@link arm}.
   */
  get fired(): boolean {
    if (this.#termSent || this.#firedBeforeDisarm) return true;
    const a = this.#armed;
    return a !== undefined && sharedNow() >= a.termAt;
  }

  /** The armed deadlines, if any. */
  get deadlines(): { termAt: number; killAt: number } | undefined {
    const a = this.#armed;
    return a === undefined ? undefined : { termAt: a.termAt, killAt: a.killAt };
  }

  /**
   * Ends the watchdog: disarms it (the caller has stopped the command) and closes the pipe,
   * then resolves once the process exited. Idempotent.
   */
  async close(): Promise<void> {
    if (this.#exited) return;
    if (!this.#closing) {
      this.#send('disarm');
      this.#closing = true;
      this.#armed = undefined;
      this.#child.stdin?.end();
    }
    // Unref'd so far: keep this process alive until the watchdog has gone.
    this.#child.ref();
    await new Promise<void>((resolve) => {
      if (this.#exited) resolve();
      else this.#child.once('exit', () => resolve());
    });
  }
}

/** The compiled watchdog script, next to this module. */
export const COMMAND_WATCHDOG_PROCESS = fileURLToPath(
  new URL('./command-watchdog-process.js', import.meta.url),
);

/** Now, in ms of CLOCK_MONOTONIC: the clock every process of this machine shares. */
export function sharedNow(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

function time(t: number): string {
  return t === Number.POSITIVE_INFINITY ? 'inf' : t.toFixed(3);
}

function checkDeadlines(termAt: number, killAt: number): void {
  for (const [name, t] of [
    ['termAt', termAt],
    ['killAt', killAt],
  ] as const) {
    if (typeof t !== 'number' || Number.isNaN(t) || t === Number.NEGATIVE_INFINITY) {
      throw new InvalidArgumentError(`${name} must be a time in ms or Infinity, got ${t}`);
    }
  }
  if (termAt > killAt) {
    throw new InvalidArgumentError(`termAt (${termAt}) must not be after killAt (${killAt})`);
  }
}
