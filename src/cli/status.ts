import { closeSync, constants, openSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { LockIOError } from '../core/errors.js';
import { validateLockName } from '../core/lock-name.js';
import { WRITE_LOCK_NAME } from '../directory/acquire-lock.js';
import { FENCE_SUFFIX } from '../directory/fence-token-file.js';
import { fileLocks } from '../os/file-lock.js';
import { lockHolders } from '../os/lock-holders.js';
import { parseCommandLine, UsageError } from './args.js';

export const USAGE = 'locksmith status <dir> [--name <lock>] [--factory native|simple]';

/**
 * Tells whether a lock in `<dir>` is held and, where the OS says, by which process. Exit code
 * 0 when free, 1 when held (or, for SimpleFS, when the lock file exists: it may be stale).
 * Nothing is created or modified: the lock file is only opened read-only.
 */
export async function run(args: string[]): Promise<number> {
  const { values, positionals, command } = parseCommandLine(args, {
    name: { type: 'string' },
    factory: { type: 'string' },
  });
  if (positionals.length !== 1 || command !== undefined)
    throw new UsageError(`expected one directory\nUsage: ${USAGE}`);
  const factory = (values.factory as string | undefined) ?? 'native';
  if (factory !== 'native' && factory !== 'simple') {
    throw new UsageError(`--factory must be native or simple, not ${JSON.stringify(factory)}`);
  }
  const name = validateLockName((values.name as string | undefined) ?? WRITE_LOCK_NAME);
  let dir: string;
  try {
    dir = realpathSync(resolve(positionals[0] as string));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      process.stdout.write(
        `${join(resolve(positionals[0] as string), name)}: free (no such directory)\n`,
      );
      return 0;
    }
    throw new LockIOError(`Cannot access directory ${positionals[0]}`, { cause: err });
  }
  const path = join(dir, name);
  const out = (line: string) => process.stdout.write(`${line}\n`);

  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    out(`${path}: free (no lock file)`);
    return 0;
  }
  const token = lastToken(path);
  if (token !== undefined) out(`fencing counter: ${token} (every token issued so far is below it)`);
  if (factory === 'simple') {
    out(
      `${path}: held or stale (SimpleFS lock file created ${st.birthtime.toISOString()}); remove it only if its holder is gone`,
    );
    return 1;
  }
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  let held: boolean;
  try {
    held = fileLocks().isLockedElsewhere(fd, path);
  } finally {
    closeSync(fd);
  }
  if (!held) {
    out(`${path}: free`);
    return 0;
  }
  const holders = lockHolders(path);
  if (holders === undefined || holders.length === 0) {
    out(`${path}: held (the OS does not say by which process)`);
  } else {
    for (const h of holders) {
      out(
        `${path}: held by ${h.pid === undefined ? 'an unknown process' : `pid ${h.pid}`} [${h.kind}]${h.command ? ` ${h.command}` : ''}`,
      );
    }
  }
  return 1;
}

function lastToken(path: string): string | undefined {
  try {
    const text = readFileSync(path + FENCE_SUFFIX, 'latin1').trim();
    return /^\d+$/.test(text) ? String(Number(text)) : undefined;
  } catch {
    return undefined;
  }
}
