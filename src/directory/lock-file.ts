import { mkdirSync, openSync, type Stats } from 'node:fs';
import { LockIOError } from '../core/errors.js';

/** What identifies one incarnation of a lock file: a deleted and recreated file differs. */
export interface FileIdentity {
  dev: number;
  ino: number;
  /** Birth time in ms with sub-µs precision (ctime or 0 where the file system has none). */
  birthtimeMs: number;
}

export function identityOf(st: Stats): FileIdentity {
  return { dev: st.dev, ino: st.ino, birthtimeMs: st.birthtimeMs };
}

export function sameIdentity(a: FileIdentity, b: FileIdentity): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.birthtimeMs === b.birthtimeMs;
}

export function formatBirthtime(id: FileIdentity): string {
  return new Date(id.birthtimeMs).toISOString();
}

/**
 * Opens `path` (a file in `dir`) with `flags` (mode 0644 if created), creating `dir` and its
 * parents first if it is missing (Lucene recreates a lock directory deleted after the
 * Directory was opened).
 * OS errors other than "held" become a {@link LockIOError} naming the path, with the OS error
 * as its cause; a symlink planted at the lock's name (ELOOP with O_NOFOLLOW) is refused.
 */
export function openInLockDir(dir: string, path: string, flags: number): number {
  try {
    return openSync(path, flags, 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw explainOpenError(err, dir, path);
  }
  try {
    mkdirSync(dir, { recursive: true });
  } catch (err) {
    throw new LockIOError(`Cannot create lock directory ${dir}`, { cause: err });
  }
  try {
    return openSync(path, flags, 0o644);
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
