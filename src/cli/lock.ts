import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { parseDuration } from '../core/duration.js';
import { LockObtainFailedError } from '../core/errors.js';
import { acquireLock, WRITE_LOCK_NAME } from '../directory/acquire-lock.js';
import { FSDirectory } from '../directory/fs-directory.js';
import type { Lock } from '../directory/lock.js';
import { NativeFSLockFactory, nativeLockDescriptor } from '../directory/native-fs-lock-factory.js';
import { SimpleFSLockFactory } from '../directory/simple-fs-lock-factory.js';
import { parseCommandLine, UsageError } from './args.js';

export const USAGE =
  'locksmith lock <dir> [--factory native|simple] [--wait <duration>] -- <command> [args...]';

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
 * held elsewhere it prints one line naming the directory and exits 1, or waits with `--wait`.
 * The command sees the fencing token in `LOCKSMITH_FENCING_TOKEN`. With the native factory
 * the command also inherits the lock's descriptor (as with `flock(1)`), so the lock stays held
 * until the command ends even if this process is killed.
 */
export async function run(args: string[]): Promise<number> {
  const { values, positionals, command } = parseCommandLine(args, {
    factory: { type: 'string' },
    wait: { type: 'string' },
  });
  if (positionals.length !== 1 || command === undefined || command.length === 0) {
    throw new UsageError(`expected a directory, then -- and a command\nUsage: ${USAGE}`);
  }
  const dirPath = positionals[0] as string;
  const factoryName = (values.factory as string | undefined) ?? 'native';
  if (factoryName !== 'native' && factoryName !== 'simple') {
    throw new UsageError(`--factory must be native or simple, not ${JSON.stringify(factoryName)}`);
  }
  const waitMs =
    values.wait === undefined ? undefined : parseDuration(values.wait as string, '--wait');
  const factory =
    factoryName === 'simple' ? SimpleFSLockFactory.INSTANCE : NativeFSLockFactory.INSTANCE;
  const directory = await FSDirectory.open(dirPath, factory);

  const giveUp = new AbortController();
  const onSignal = () => giveUp.abort();
  for (const sig of FORWARDED) process.on(sig, onSignal);
  let lock: Lock;
  try {
    lock =
      waitMs === undefined
        ? await directory.obtainLock(WRITE_LOCK_NAME)
        : await acquireLock(directory, { timeoutMs: waitMs, signal: giveUp.signal });
  } catch (err) {
    if (err instanceof LockObtainFailedError) {
      const after = waitMs === undefined ? '' : ` after waiting ${values.wait}`;
      process.stderr.write(
        `locksmith: ${directory.path} is locked${after} (${WRITE_LOCK_NAME} held elsewhere)\n`,
      );
      return 1;
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
      process.stderr.write(`locksmith: cannot run ${file}: ${err.code ?? err.message}\n`);
      resolve(err.code === 'ENOENT' ? 127 : 126);
    });
    child.once('exit', (code, signal) => {
      for (const sig of FORWARDED) process.off(sig, forward);
      resolve(code ?? 128 + (signal === null ? 0 : (constants.signals[signal] ?? 0)));
    });
  });
}
