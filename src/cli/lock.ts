import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { LockIOError, LockObtainFailedError } from '../core/errors.js';
import { validateLockName } from '../core/lock-name.js';
import { acquireLock, WRITE_LOCK_NAME } from '../directory/acquire-lock.js';
import { FILE_FACTORY_NAMES, lockFactoryByName } from '../directory/factory-by-name.js';
import { FSDirectory } from '../directory/fs-directory.js';
import { inspectLock, type LockInspection } from '../directory/inspect-lock.js';
import type { Lock } from '../directory/lock.js';
import { nativeLockDescriptor } from '../directory/native-fs-lock-factory.js';
import { durationOption, parseCommandLine, pathArgument, UsageError } from './args.js';
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

/**
 * `flock(1)` for a directory: holds `write.lock` in `<dir>` while `<command>` runs and exits
 * with the command's code (128 + signal number if it was killed by a signal). When the lock is
 * held elsewhere it prints one line naming the directory and the holder and exits 1, or waits
 * up to `--wait` (a duration with its unit). A lock that cannot be taken at all (the path is a
 * file, the lock file a symlink or a directory, …) also exits 1, with the reason
 * `locksmith status` gives. Every argument is checked before the directory is touched.
 * The command sees the fencing token in `LOCKSMITH_FENCING_TOKEN`. With the native factory
 * the command also inherits the lock's descriptor (as with `flock(1)`), so the lock stays held
 * until the command ends even if this process is killed.
 */
export async function run(args: string[]): Promise<number> {
  const { values, positionals, command } = parseCommandLine(args, USAGES.lock.flags);
  if (positionals.length !== 1 || command === undefined || command.length === 0) {
    throw new UsageError(`expected a directory, then -- and a command; usage: ${USAGE}`);
  }
  const dirPath = pathArgument('the directory', positionals[0]);
  const factory = lockFactoryByName(
    (values.factory as string | undefined) ?? 'native',
    FILE_FACTORY_NAMES,
  );
  const name = validateLockName((values.name as string | undefined) ?? WRITE_LOCK_NAME, '--name');
  const waitText = values.wait as string | undefined;
  const waitMs = waitText === undefined ? undefined : durationOption('--wait', waitText);
  // Everything is checked: only now is the directory opened (and created if missing).
  const directory = await FSDirectory.open(dirPath, factory);

  const giveUp = new AbortController();
  let received: NodeJS.Signals | undefined;
  const onSignal = (sig: NodeJS.Signals) => {
    received ??= sig;
    giveUp.abort();
  };
  for (const sig of FORWARDED) process.on(sig, onSignal);
  let lock: Lock;
  try {
    lock =
      waitMs === undefined
        ? await directory.obtainLock(name)
        : await acquireLock(directory, { name, timeoutMs: waitMs, signal: giveUp.signal });
  } catch (err) {
    if (received !== undefined) return interrupted('lock', received, directory.path);
    if (err instanceof LockObtainFailedError) {
      throw explainNotObtained(directory, name, err, waitText);
    }
    throw err;
  } finally {
    for (const sig of FORWARDED) process.off(sig, onSignal);
  }
  try {
    return await runCommand(command, lock);
  } finally {
    await lock.close();
  }
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

function runCommand(command: string[], lock: Lock): Promise<number> {
  const [file, ...rest] = command as [string, ...string[]];
  const fd = nativeLockDescriptor(lock);
  const child = spawn(file, rest, {
    stdio: fd === undefined ? 'inherit' : ['inherit', 'inherit', 'inherit', fd],
    env: { ...process.env, LOCKSMITH_FENCING_TOKEN: String(lock.token) },
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
