import { spawn } from 'node:child_process';
import { realpathSync, type Stats, statSync } from 'node:fs';
import { constants } from 'node:os';
import { basename, dirname, resolve } from 'node:path';
import { systemClock } from '../core/clock.js';
import { LockIOError, LockObtainFailedError, LockTimeoutError } from '../core/errors.js';
import { validateLockName } from '../core/lock-name.js';
import { waitFor } from '../core/wait.js';
import { acquireLock, WRITE_LOCK_NAME } from '../directory/acquire-lock.js';
import { FILE_FACTORY_NAMES, lockFactoryByName } from '../directory/factory-by-name.js';
import { advanceFenceTokenOf } from '../directory/fence-token-file.js';
import { FSDirectory } from '../directory/fs-directory.js';
import { inspectLock, type LockInspection } from '../directory/inspect-lock.js';
import type { Lock } from '../directory/lock.js';
import type { LockFactory } from '../directory/lock-factory.js';
import { createLockDirectory, lockPath } from '../directory/lock-file.js';
import { NativeFSLockFactory, nativeLockDescriptor } from '../directory/native-fs-lock-factory.js';
import type { FileLockMode } from '../os/file-lock.js';
import { fileWakeSource } from '../os/file-watcher.js';
import { anyWake } from '../os/in-process-releases.js';
import { KernelFileLock, kernelFileLockReleases } from '../os/kernel-file-lock.js';
import { lockHolders } from '../os/lock-holders.js';
import { durationOption, parseCommandLine, pathArgument, UsageError } from './args.js';
import { errorLine, stackOf } from './error-line.js';
import { interrupted } from './interrupted.js';
import { USAGES } from './usage.js';

export const USAGE = `locksmith ${USAGES.lock.synopsis}`;

const FORWARDED: NodeJS.Signals[] = [
  'SIGINT',
  'SIGTERM',
  'SIGHUP',
  'SIGQUIT',
  'SIGUSR1',
  'SIGUSR2',
];

/** What `locksmith lock` holds: a directory's lock through its factory, or a kernel lock on a file. */
type Target =
  | { kind: 'directory'; dirPath: string; factory: LockFactory; name: string }
  | { kind: 'file'; dir: string; path: string };

/** A lock file taken directly with a kernel lock (`--file`, or `--shared` on a directory). */
interface KernelTarget {
  /** The directory it is in, and its path: real paths, so that `/proc` names it the same. */
  dir: string;
  path: string;
  /** How the one-line messages name what is locked: `<dir>` (then `<name> is held`) or the file. */
  shown: string;
  name: string | undefined;
  /** Recreates a lock directory deleted meanwhile (directory form only). */
  createDirectory: ((dir: string) => void) | undefined;
}

/** A lock while the command runs: the descriptor the command inherits, its token, its release. */
interface Held {
  fd: number | undefined;
  /** `undefined`: no fencing token (a shared lock), LOCKSMITH_FENCING_TOKEN is unset. */
  token: number | undefined;
  close(): Promise<void>;
}

/**
 * `flock(1)` for a directory or a file: holds `write.lock` in `<dir>` (or the file `--file`
 * names) while `<command>` runs and exits with the command's code (128 + signal number if it
 * was killed by a signal). When the lock is held elsewhere it prints one line naming the
 * directory (or file) and the holders and exits 1 (or the `--conflict-exit-code`), or waits up
 * to `--wait` (a duration with its unit). A lock that cannot be taken at all (the path is a
 * file, the lock file a symlink or a directory, …) exits 1, with the reason `locksmith status`
 * gives. Every argument is checked before anything is created or taken.
 *
 * Exclusive by default; `--shared` takes a shared (read) kernel lock instead, which the
 * directory factories never do: on `<dir>/<lock>` or the file, the very lock the native
 * factory takes exclusively, so shared holders exclude it and are excluded by it. An exclusive
 * holder's command sees the fencing token in `LOCKSMITH_FENCING_TOKEN` (`<lock file>.fence`
 * keeps the counter, for `--file` too); a shared holder gets none. With a kernel lock (the
 * native factory, `--shared`, `--file`) the command also inherits the lock's descriptor (as
 * with `flock(1)`), so the lock stays held until the command ends even if this process is killed.
 */
export async function run(args: string[]): Promise<number> {
  const { values, positionals, command } = parseCommandLine(args, USAGES.lock.flags);
  const fileText = values.file as string | undefined;
  if (fileText !== undefined && positionals.length > 0) {
    throw new UsageError(
      `expected a directory or --file <path>, not both (got ${JSON.stringify(positionals[0])} and --file ${JSON.stringify(fileText)}); usage: ${USAGE}`,
    );
  }
  if (
    (fileText === undefined && positionals.length !== 1) ||
    command === undefined ||
    command.length === 0
  ) {
    const what = fileText === undefined ? 'a directory (or --file <path>)' : '--file <path>';
    throw new UsageError(`expected ${what}, then -- and a command; usage: ${USAGE}`);
  }
  const mode: FileLockMode = values.shared === true ? 'shared' : 'exclusive';
  const factoryName = values.factory as string | undefined;
  const nameText = values.name as string | undefined;
  if (fileText !== undefined && (factoryName !== undefined || nameText !== undefined)) {
    throw new UsageError(
      `--file locks the file it names: --name and --factory are for a directory (--file ${fileText} ${nameText === undefined ? '--factory' : '--name'})`,
    );
  }
  const factory = lockFactoryByName(factoryName ?? 'native', FILE_FACTORY_NAMES);
  if (mode === 'shared' && !(factory instanceof NativeFSLockFactory)) {
    throw new UsageError(
      '--shared takes a shared kernel lock, which --factory simple (a lock file that exists or not) cannot: use the native factory',
    );
  }
  const name = validateLockName(nameText ?? WRITE_LOCK_NAME, '--name');
  const waitText = values.wait as string | undefined;
  const waitMs = waitText === undefined ? undefined : durationOption('--wait', waitText);
  const conflictExit = exitCodeOption(values['conflict-exit-code'] as string | undefined);
  const target: Target =
    fileText === undefined
      ? { kind: 'directory', dirPath: pathArgument('the directory', positionals[0]), factory, name }
      : { kind: 'file', ...lockFileArgument(fileText) };

  // Everything is checked: only now is the directory opened (and created if missing).
  let directory: FSDirectory | undefined;
  let kernelTarget: KernelTarget | undefined;
  if (target.kind === 'file') {
    kernelTarget = { ...target, shown: target.path, name: undefined, createDirectory: undefined };
  } else {
    directory = await FSDirectory.open(target.dirPath, target.factory);
    if (mode === 'shared') {
      kernelTarget = {
        dir: directory.path,
        path: lockPath(directory.path, name),
        shown: directory.path,
        name,
        createDirectory: createLockDirectory,
      };
    }
  }

  const giveUp = new AbortController();
  let received: NodeJS.Signals | undefined;
  const onSignal = (sig: NodeJS.Signals) => {
    received ??= sig;
    giveUp.abort();
  };
  for (const sig of FORWARDED) process.on(sig, onSignal);
  let held: Held;
  try {
    if (kernelTarget !== undefined) {
      held = await obtainKernel(kernelTarget, mode, waitMs, waitText, giveUp.signal);
    } else {
      const dir = directory as FSDirectory;
      const lock: Lock =
        waitMs === undefined
          ? await dir.obtainLock(name)
          : await acquireLock(dir, { name, timeoutMs: waitMs, signal: giveUp.signal });
      held = { fd: nativeLockDescriptor(lock), token: lock.token, close: () => lock.close() };
    }
  } catch (err) {
    if (received !== undefined) {
      return interrupted('lock', received, kernelTarget?.shown ?? (directory as FSDirectory).path);
    }
    if (!(err instanceof LockObtainFailedError)) throw err;
    const why =
      kernelTarget !== undefined
        ? err
        : explainNotObtained(directory as FSDirectory, name, err, waitText);
    // A lock that cannot be taken at all is a failure (exit 1), not a conflict.
    if (!(why instanceof LockObtainFailedError)) throw why;
    return conflict(why, conflictExit);
  } finally {
    for (const sig of FORWARDED) process.off(sig, onSignal);
  }
  try {
    return await runCommand(command, held.fd, held.token);
  } finally {
    await held.close();
  }
}

/** The one line of a lock held elsewhere, and `-E`'s exit code (1 unless given). */
function conflict(err: LockObtainFailedError, exitCode: number): number {
  process.stderr.write(`${errorLine('lock', err)}\n`);
  if (process.env.LOCKSMITH_DEBUG === '1') process.stderr.write(`${stackOf(err)}\n`);
  return exitCode;
}

/** `-E`/`--conflict-exit-code`: a whole number from 0 to 255 (default 1). */
function exitCodeOption(text: string | undefined): number {
  if (text === undefined) return 1;
  if (!/^\d{1,3}$/.test(text) || Number(text) > 255) {
    throw new UsageError(
      `--conflict-exit-code (-E) ${JSON.stringify(text)} is not an exit status: write a whole number from 0 to 255, like -E 75`,
    );
  }
  return Number(text);
}

/**
 * `--file <path>`: the file to lock, as real paths (a symbolic link to an existing file is
 * followed, as flock(1) does; the file's directory is resolved too). A directory, anything
 * but a regular file, or a missing directory is a usage error; nothing is created here.
 */
function lockFileArgument(text: string): { dir: string; path: string } {
  const given = pathArgument('--file', text);
  const absolute = resolve(given);
  let st: Stats | undefined;
  try {
    st = statSync(absolute);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTDIR') {
      throw new UsageError(`--file ${given}: ${dirname(absolute)} is not a directory`);
    }
    if (code !== 'ENOENT') throw new LockIOError(`Cannot access ${absolute}`, { cause: err });
  }
  if (st?.isDirectory()) {
    throw new UsageError(
      `--file ${given} is a directory: --file locks a file (to lock a directory, "locksmith lock ${given} -- …" holds its write.lock)`,
    );
  }
  if (st !== undefined && !st.isFile()) {
    throw new UsageError(`--file ${given} is not a regular file`);
  }
  if (st !== undefined) {
    const path = realpathSync(absolute);
    return { dir: dirname(path), path };
  }
  // Missing: created when locked, in its directory, which must exist.
  let dir: string;
  try {
    dir = realpathSync(dirname(absolute));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw new UsageError(
        `--file ${given}: its directory ${dirname(absolute)} does not exist (the file is created, its directory is not)`,
      );
    }
    throw new LockIOError(`Cannot access ${dirname(absolute)}`, { cause: err });
  }
  return { dir, path: lockPath(dir, basename(absolute)) };
}

/**
 * The kernel lock on `target.path` in `mode`, at once or waiting up to `waitMs` (woken by a
 * release in this process or a close of the file by a holder elsewhere, polling as a safety
 * net); an exclusive lock on a `--file` issues a fencing token from `<file>.fence`. Not
 * obtained: a {@link LockObtainFailedError} naming the holders (`LOCK_TIMEOUT` after a wait).
 */
async function obtainKernel(
  target: KernelTarget,
  mode: FileLockMode,
  waitMs: number | undefined,
  waitText: string | undefined,
  signal: AbortSignal,
): Promise<Held> {
  const options = { mode, probeFirst: true, createDirectory: target.createDirectory };
  const attempt = (): KernelFileLock | undefined => {
    const got = KernelFileLock.tryAcquire(target.dir, target.path, options);
    return typeof got === 'string' ? undefined : got;
  };
  let kernel: KernelFileLock | undefined;
  try {
    kernel =
      waitMs === undefined
        ? attempt()
        : await waitFor(attempt, {
            resource: target.path,
            wake: anyWake(kernelFileLockReleases(target.path), fileWakeSource(target.path)),
            signal,
            timeoutMs: waitMs,
            minPollMs: 2,
            maxPollMs: 1000,
          });
  } catch (err) {
    if (!(err instanceof LockTimeoutError)) throw err;
  }
  if (kernel === undefined) throw heldElsewhere(target, waitText);
  const lock = kernel;
  let token: number | undefined;
  if (mode === 'exclusive') {
    try {
      token = advanceFenceTokenOf(lock.path, systemClock.wall());
    } catch (err) {
      lock.release();
      throw err;
    }
  }
  return {
    fd: lock.fd,
    token,
    close: () => {
      const { closeError } = lock.release();
      if (closeError !== undefined) {
        throw new LockIOError(`Cannot close lock file ${lock.path}`, { cause: closeError });
      }
      return Promise.resolve();
    },
  };
}

/** `<dir> is locked: <name> is held by pid …`, or `<file> is locked: held by pid …`. */
function heldElsewhere(target: KernelTarget, waitText: string | undefined): LockObtainFailedError {
  let pids: number[] = [];
  try {
    pids = (lockHolders(target.path) ?? []).flatMap((h) => (h.pid === undefined ? [] : [h.pid]));
  } catch {
    // Gone or replaced meanwhile: still held a moment ago.
  }
  const by =
    pids.length > 0 ? `held by pid ${[...new Set(pids)].join(', ')}` : 'held by another process';
  const after = waitText === undefined ? '' : ` after waiting ${waitText}`;
  const what = target.name === undefined ? by : `${target.name} is ${by}`;
  return new LockObtainFailedError(`${target.shown} is locked${after}: ${what}`, {
    code: waitText === undefined ? 'LOCK_OBTAIN_FAILED' : 'LOCK_TIMEOUT',
  });
}

/**
 * The one-line reason an obtain failed, as `locksmith status` would tell it: who holds the
 * lock, or why it cannot be taken at all (SimpleFS reports a directory or a symlink at the
 * lock's name as "held", since its exclusive create fails the same way).
 */
function explainNotObtained(
  directory: FSDirectory,
  name: string,
  err: LockObtainFailedError,
  waitText: string | undefined,
): LockIOError {
  let seen: LockInspection | undefined;
  try {
    seen = inspectLock(directory.path, { name, lockFactory: directory.lockFactory });
  } catch {
    seen = undefined; // The failure is still worth reporting without the detail.
  }
  if (seen?.state === 'cannot-lock') {
    return new LockIOError(`cannot lock: ${seen.message}`, { cause: err });
  }
  const after = waitText === undefined ? '' : ` after waiting ${waitText}`;
  const nameFlag = name === WRITE_LOCK_NAME ? '' : ` --name ${name}`;
  const code = err.code === 'LOCK_TIMEOUT' ? 'LOCK_TIMEOUT' : 'LOCK_OBTAIN_FAILED';
  if (seen?.state === 'held' && seen.mayBeStale) {
    // A SimpleFS lock is the file's existence: nobody may hold it (a native lock's file, or
    // one left by a holder that died). Only a person can tell; say how to look.
    const created = seen.since === undefined ? '' : ` (created ${seen.since.toISOString()})`;
    const dir = directory.path;
    return new LockObtainFailedError(
      `${directory.path} is locked${after}: ${name} exists${created}; it may be a leftover (a holder that died, or the file a native lock leaves behind): check with "locksmith status ${dir}${nameFlag}" (is a native lock held on it?) and "locksmith status --factory simple ${dir}${nameFlag}", and remove it only if no holder is alive`,
      { cause: err, code },
    );
  }
  const holders = seen?.state === 'held' ? (seen.holders ?? []) : [];
  const pids = holders.flatMap((h) => (h.pid === undefined ? [] : [h.pid]));
  const by = pids.length > 0 ? `held by pid ${pids.join(', ')}` : 'held by another process';
  return new LockObtainFailedError(`${directory.path} is locked${after}: ${name} is ${by}`, {
    cause: err,
    code,
  });
}

function runCommand(
  command: string[],
  fd: number | undefined,
  token: number | undefined,
): Promise<number> {
  const [file, ...rest] = command as [string, ...string[]];
  // A shared holder has no token; one inherited from an outer lock is not this lock's.
  const { LOCKSMITH_FENCING_TOKEN: _outer, ...inherited } = process.env;
  const env =
    token === undefined ? inherited : { ...inherited, LOCKSMITH_FENCING_TOKEN: String(token) };
  const child = spawn(file, rest, {
    stdio: fd === undefined ? 'inherit' : ['inherit', 'inherit', 'inherit', fd],
    env,
  });
  const forward = (sig: NodeJS.Signals) => {
    child.kill(sig);
  };
  for (const sig of FORWARDED) process.on(sig, forward);
  return new Promise<number>((resolve) => {
    child.once('error', (err: NodeJS.ErrnoException) => {
      process.stderr.write(`locksmith lock: cannot run ${file} (${err.code ?? 'INTERNAL'})\n`);
      resolve(err.code === 'ENOENT' ? 127 : 126);
    });
    child.once('exit', (code, signal) => {
      for (const sig of FORWARDED) process.off(sig, forward);
      resolve(code ?? 128 + (signal === null ? 0 : (constants.signals[signal] ?? 0)));
    });
  });
}
