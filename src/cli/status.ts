import { validateLockName } from '../core/lock-name.js';
import { WRITE_LOCK_NAME } from '../directory/acquire-lock.js';
import { FILE_FACTORY_NAMES, lockFactoryByName } from '../directory/factory-by-name.js';
import { inspectLock, type LockInspection } from '../directory/inspect-lock.js';
import { parseCommandLine, pathArgument, UsageError } from './args.js';
import { USAGES } from './usage.js';

export const USAGE = `locksmith ${USAGES.status.synopsis}`;

/** The exit codes of `locksmith status`. */
export const STATUS_EXIT = {
  /** An obtain would succeed now. */
  FREE: 0,
  /** Held (for SimpleFS: the lock file exists, perhaps left behind by a dead holder). */
  HELD: 1,
  /** A bad command line. */
  USAGE: 2,
  /** An obtain would fail for another reason than "held" (the path is a file, a symlink, …). */
  CANNOT_LOCK: 3,
} as const;

/**
 * Tells whether a lock in `<dir>` is free, held (by which process, where the OS says) or
 * cannot be taken at all, as {@link inspectLock} sees it: the same checks `locksmith lock`
 * would fail on. Prints on stdout; exits with {@link STATUS_EXIT}. Every argument is checked
 * before anything is looked at; nothing is created or modified (but for a probe directory
 * that inspectLock makes and removes at once, to learn whether a missing one can be made).
 */
export async function run(args: string[]): Promise<number> {
  const { values, positionals, command } = parseCommandLine(args, USAGES.status.flags);
  if (positionals.length !== 1 || command !== undefined) {
    throw new UsageError(`expected one directory; usage: ${USAGE}`);
  }
  const dir = pathArgument('the directory', positionals[0]);
  const lockFactory = lockFactoryByName(
    (values.factory as string | undefined) ?? 'native',
    FILE_FACTORY_NAMES,
  );
  const name = validateLockName((values.name as string | undefined) ?? WRITE_LOCK_NAME, '--name');
  const inspection = inspectLock(dir, { name, lockFactory });
  process.stdout.write(
    values.json === true
      ? `${JSON.stringify(inspection)}\n`
      : report(inspection)
          .map((line) => `${line}\n`)
          .join(''),
  );
  switch (inspection.state) {
    case 'free':
      return STATUS_EXIT.FREE;
    case 'held':
      return STATUS_EXIT.HELD;
    case 'cannot-lock':
      return STATUS_EXIT.CANNOT_LOCK;
  }
}

/** The lines printed: the counter first when known, then one line per holder or state. */
function report(inspection: LockInspection): string[] {
  const { path } = inspection;
  const lines =
    inspection.fenceCounter === undefined
      ? []
      : [`fencing counter: ${inspection.fenceCounter} (no token issued so far is above it)`];
  switch (inspection.state) {
    case 'free': {
      const detail = {
        'no-directory': ' (no such directory)',
        'no-lock-file': ' (no lock file)',
        unlocked: '',
      }[inspection.detail];
      lines.push(`${path}: free${detail}`);
      break;
    }
    case 'held':
      if (inspection.mayBeStale) {
        lines.push(
          `${path}: held or stale (SimpleFS lock file created ${inspection.since?.toISOString()}); remove it only if its holder is gone`,
        );
      } else if (inspection.holders === undefined || inspection.holders.length === 0) {
        lines.push(`${path}: held (the OS does not say by which process)`);
      } else {
        for (const h of inspection.holders) {
          const who = h.pid === undefined ? 'an unknown process' : `pid ${h.pid}`;
          lines.push(`${path}: held by ${who} [${h.kind}]${h.command ? ` ${h.command}` : ''}`);
        }
      }
      break;
    case 'cannot-lock':
      lines.push(`${path}: cannot lock: ${inspection.message}`);
      break;
  }
  return lines;
}
