import { type ChildProcess, type SpawnOptions, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError, UnsupportedOperationError } from '../core/errors.js';

/**
 * Spawning a command that cannot outlive this process, even when this process is killed with
 * `kill -9` (for `locksmith elect`, an orphaned command would be a second master).
 *
 * How (Linux only): `process.execPath` runs the launcher `exec-with-parent-death.js` with our
 * pid; it sets `prctl(PR_SET_PDEATHSIG, SIGKILL)`, gives up if its parent already changed (we
 * died between fork and prctl), and then `execvp`s the command in place, so the command has
 * the child's pid and keeps the death signal (execve preserves it).
 *
 * Limits, all from the kernel's contract for PR_SET_PDEATHSIG:
 * - The signal fires when the *thread* that forked the child exits, not the process. libuv
 *   forks from the thread that calls `spawn` (checked with strace on Node 20 / libuv 1.46: the
 *   `clone(…SIGCHLD)` comes from the main thread's tid). From the main thread that is the
 *   process's lifetime, since Node's main thread only exits with the process. Called from a
 *   `worker_threads` Worker, the command is killed when that worker ends (tested).
 * - A set-user-ID / set-group-ID command, or one with file capabilities, has the death signal
 *   cleared by execve: such commands are not protected.
 * - Only the command itself is signalled; processes it forks are not (use a process group, as
 *   CommandService does, to stop them on the graceful path).
 * - Stdio is inherited through the launcher: Node marks fds 0-2 (and inherited extra fds)
 *   close-on-exec at start-up, so the launcher clears that flag on the fds the caller passed.
 *   An `'ipc'` channel cannot be passed through (the launcher would consume it).
 *
 * Other platforms: no watchdog fallback — a watchdog process can itself be `kill -9`ed, which
 * would bring the orphan problem back. {@link spawnWithParentDeath} throws
 * {@link UnsupportedOperationError} there. (FreeBSD's `procctl(PROC_PDEATHSIG_CTL)` would fit
 * this launcher; macOS has no equivalent.)
 */

/** The compiled launcher, next to this module in `dist/os/`. */
export const PARENT_DEATH_LAUNCHER = fileURLToPath(
  new URL('./exec-with-parent-death.js', import.meta.url),
);

/** Exit status of the launcher when the command is not found (as in sh). */
export const EXIT_NOT_FOUND = 127;
/** Exit status of the launcher when the command was found but could not be executed. */
export const EXIT_CANNOT_EXECUTE = 126;
/** Exit status of the launcher when its parent died before the death signal was armed. */
export const EXIT_PARENT_GONE = 1;

/** Whether {@link spawnWithParentDeath} works on this platform. */
export function parentDeathSupported(): boolean {
  return process.platform === 'linux';
}

export type ParentDeathSpawnOptions = Omit<SpawnOptions, 'shell' | 'argv0' | 'serialization'> & {
  /**
   * Who reports a command that cannot be run, at the start of that one line (default
   * `locksmith`; the commands pass `locksmith elect`, `locksmith rows lock`).
   */
  name?: string | undefined;
};

/** Carries {@link ParentDeathSpawnOptions.name} to the launcher, which removes it before exec. */
export const LAUNCHER_NAME_ENV = 'LOCKSMITH_LAUNCHER_NAME';

/**
 * Spawns `command` (`[file, ...args]`, looked up in `PATH` like `execvp`) so that it receives
 * SIGKILL when the calling thread (normally: this process) dies. The returned child's pid is
 * the command's pid once the launcher has exec'd. A command that cannot be run does not emit
 * `'error'`: the child exits with {@link EXIT_NOT_FOUND} or {@link EXIT_CANNOT_EXECUTE} after
 * one line on its stderr. `options.env` is the command's environment (default `process.env`).
 */
export function spawnWithParentDeath(
  command: readonly string[],
  options: ParentDeathSpawnOptions = {},
): ChildProcess {
  if (!parentDeathSupported()) {
    throw new UnsupportedOperationError(
      `Tying a child's life to its parent needs PR_SET_PDEATHSIG, which ${process.platform} lacks`,
    );
  }
  validateCommand(command);
  const fds = inheritedFds(options.stdio);
  const { name, ...spawnOptions } = options;
  const env = { ...(options.env ?? process.env), [LAUNCHER_NAME_ENV]: name ?? 'locksmith' };
  return spawn(
    process.execPath,
    [PARENT_DEATH_LAUNCHER, String(process.pid), fds.join(','), ...command],
    { ...spawnOptions, env, shell: false },
  );
}

/** Throws {@link InvalidArgumentError} unless `command` is a non-empty array of strings. */
export function validateCommand(command: unknown): asserts command is readonly string[] {
  if (!Array.isArray(command) || command.length === 0) {
    throw new InvalidArgumentError('command must be a non-empty array of strings');
  }
  for (const [i, part] of command.entries()) {
    if (typeof part !== 'string') {
      throw new InvalidArgumentError(`command[${i}] must be a string, not ${typeof part}`);
    }
    if (part.includes('\0')) {
      throw new InvalidArgumentError(`command[${i}] must not contain a NUL character`);
    }
  }
  if (command[0] === '') throw new InvalidArgumentError('command[0] must not be empty');
}

/** The child fds that carry something the command must keep (see the close-on-exec note). */
function inheritedFds(stdio: SpawnOptions['stdio']): number[] {
  const entries: unknown[] =
    stdio === undefined || typeof stdio === 'string' ? [stdio, stdio, stdio] : [...stdio];
  while (entries.length < 3) entries.push(undefined);
  const fds: number[] = [];
  for (const [fd, entry] of entries.entries()) {
    if (entry === 'ipc') {
      throw new InvalidArgumentError("stdio 'ipc' cannot be passed through the launcher");
    }
    // Below 3 libuv always opens something (/dev/null for 'ignore'); above, null is 'ignore'.
    if (fd < 3 || (entry !== 'ignore' && entry !== null && entry !== undefined)) fds.push(fd);
  }
  return fds;
}
