import { type BigIntStats, mkdirSync } from 'node:fs';
import { LockIOError } from '../core/errors.js';

/** What identifies one incarnation of a lock file: a deleted and recreated file differs. */
export interface FileIdentity {
  dev: bigint;
  ino: bigint;
  birthtimeNs: bigint;
}

export function identityOf(st: BigIntStats): FileIdentity {
  return { dev: st.dev, ino: st.ino, birthtimeNs: st.birthtimeNs };
}

export function sameIdentity(a: FileIdentity, b: FileIdentity): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.birthtimeNs === b.birthtimeNs;
}

export function formatBirthtime(id: FileIdentity): string {
  return new Date(Number(id.birthtimeNs / 1_000_000n)).toISOString();
}

/**
 * Runs `open` (a synchronous open of a file in `dir`), creating `dir` and its parents first if
 * it is missing (Lucene recreates a lock directory deleted after the Directory was opened).
 * OS errors other than "held" become a {@link LockIOError} naming the path, with the OS error
 * as its cause; a symlink planted at the lock's name (ELOOP with O_NOFOLLOW) is refused.
 */
export function openInLockDir<T>(dir: string, path: string, open: () => T): T {
  try {
    return open();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw explainOpenError(err, dir, path);
  }
  try {
    mkdirSync(dir, { recursive: true });
  } catch (err) {
    throw new LockIOError(`Cannot create lock directory ${dir}`, { cause: err });
  }
  try {
    return open();
  } catch (err) {
    throw explainOpenError(err, dir, path);
  }
}

export function explainOpenError(err: unknown, dir: string, path: string): unknown {
  const code = (err as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ELOOP':
      return new LockIOError(`Refusing to follow a symbolic link at lock file ${path}`, {
        cause: err,
      });
    case 'ENOTDIR':
      return new LockIOError(`Lock directory ${dir} is not a directory`, { cause: err });
    case 'EISDIR':
      return new LockIOError(`Lock file ${path} is a directory`, { cause: err });
    case 'EACCES':
    case 'EPERM':
      return new LockIOError(`Permission denied creating or opening lock file ${path}`, {
        cause: err,
      });
    case 'EROFS':
      return new LockIOError(`Lock directory ${dir} is on a read-only file system`, { cause: err });
    case undefined:
      return err;
    default:
      return new LockIOError(`Cannot create or open lock file ${path}: ${code}`, { cause: err });
  }
}
