import { statSync } from 'node:fs';
import { AlreadyClosedError, LockIOError } from '../core/errors.js';
import { openLockFile } from '../os/kernel-file-lock.js';
import { makeDirectoriesSync } from './make-directories.js';

/**
 * The lock file as the file-system lock factories see it: where it is (`lockPath`), which
 * incarnation of it a lock was taken on (`FileIdentity`), whether the path still names that
 * incarnation (`lockFileChanged`), and how it is opened inside a lock directory that may have
 * been deleted meanwhile (`openInLockDir`).
 */

/** What identifies one incarnation of a lock file: a deleted and recreated file differs. */
export interface FileIdentity {
  dev: number;
  ino: number;
  /** Birth time in ms with sub-µs precision (ctime or 0 where the file system has none). */
  birthtimeMs: number;
}

/** From `fs.Stats` or the equal numbers of `fileCalls().fstat`. */
export function identityOf(st: FileIdentity): FileIdentity {
  return { dev: st.dev, ino: st.ino, birthtimeMs: st.birthtimeMs };
}

export function sameIdentity(a: FileIdentity, b: FileIdentity): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.birthtimeMs === b.birthtimeMs;
}

export function formatBirthtime(id: FileIdentity): string {
  return new Date(id.birthtimeMs).toISOString();
}

/**
 * Why `path` is no longer the lock file we created, or `undefined` if it still is: a
 * {@link LockIOError} when it is gone (Lucene's NoSuchFileException), an
 * {@link AlreadyClosedError} when another file now has its name.
 */
export function lockFileChanged(
  path: string,
  identity: FileIdentity,
  lock: object,
): Error | undefined {
  let current: FileIdentity;
  try {
    current = identityOf(statSync(path));
  } catch (err) {
    return new LockIOError(`Lock file is gone: ${path}`, { cause: err });
  }
  if (sameIdentity(current, identity)) return undefined;
  return new AlreadyClosedError(
    `Underlying file changed by an external force at ${formatBirthtime(current)}, (lock=${lock})`,
  );
}

/**
 * Opens `path` (a file in `dir`) with `flags` (mode 0644 if created), creating `dir` and its
 * parents first if it is missing (Lucene recreates a lock directory deleted after the
 * Directory was opened).
 * OS errors other than "held" become a {@link LockIOError} naming the path, with the OS error
 * as its cause; a symlink planted at the lock's name (ELOOP with O_NOFOLLOW) is refused
 * (see {@link openLockFile}).
 */
export function openInLockDir(dir: string, path: string, flags: number): number {
  return openLockFile(dir, path, flags, createLockDirectory);
}

/** `dir` and its parents, for a lock directory found missing; a failure is a {@link LockIOError}. */
export function createLockDirectory(dir: string): void {
  try {
    makeDirectoriesSync(dir);
  } catch (err) {
    throw new LockIOError(`Cannot create lock directory ${dir}`, { cause: err });
  }
}

/**
 * `<dir>/<name>` for a real directory path and a validated single-component name: plain
 * concatenation, since `path.join`'s normalisation has nothing to do here and costs on every
 * obtain.
 */
export function lockPath(dir: string, name: string): string {
  return dir.endsWith('/') ? dir + name : `${dir}/${name}`;
}
