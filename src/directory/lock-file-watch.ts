import { lstatSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { AlreadyClosedError, LockIOError } from '../core/errors.js';
import { watchReplacement } from '../os/file-watcher.js';
import { type FileIdentity, formatBirthtime, identityOf, sameIdentity } from './lock-file.js';

/**
 * How often a watched lock file is re-checked whatever the kernel says: the fallback for file
 * systems that send no events (NFS and other network file systems, other platforms) and for a
 * move of a directory further up the path, which no watch sees.
 */
export const LOCK_FILE_POLL_MS = 1000;

/** Why a lock file no longer is ours: in words for the loss, and as Lucene's error. */
export interface LockFileLoss {
  /** What happened, for the `LockLostError` message ("the lock file was deleted"). */
  description: string;
  /**
   * What `ensureValid()` throws, as in Lucene: a {@link LockIOError} when the file is gone
   * (Java's `NoSuchFileException`), an {@link AlreadyClosedError} when another file has its name.
   */
  error: Error;
}

/**
 * Whether `path` still names the lock file we created (same device, inode and birth time), by
 * `lstat`: a symbolic link planted at the name is a replacement even if it points back at our
 * file, since every obtain refuses to follow it. `undefined` while it is ours, or when the
 * check itself failed for another reason (a permission error proves nothing either way).
 */
export function lockFileLoss(
  path: string,
  identity: FileIdentity,
  lock: object,
): LockFileLoss | undefined {
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'ENOTDIR') return undefined;
    const error = new LockIOError(`Lock file is gone: ${path}`, { cause: err });
    const dir = dirname(path);
    let dirThere = false;
    try {
      dirThere = statSync(dir).isDirectory();
    } catch {}
    return {
      description: dirThere
        ? 'the lock file was deleted (or moved away)'
        : `its directory ${dir} was removed or moved away`,
      error,
    };
  }
  const current = identityOf(st);
  if (st.isFile() && sameIdentity(current, identity)) return undefined;
  const error = new AlreadyClosedError(
    `Underlying file changed by an external force at ${formatBirthtime(current)}, (lock=${lock})`,
  );
  const by = st.isSymbolicLink()
    ? 'a symbolic link'
    : st.isDirectory()
      ? 'a directory'
      : st.isFile()
        ? `another file (inode ${st.ino}: renamed over it, or deleted and recreated)`
        : 'something that is not a regular file';
  return { description: `the lock file was replaced by ${by}`, error };
}

/**
 * Calls `check` whenever the lock file at `path` may have been deleted, moved or replaced:
 * on inotify hints for the file and for its directory (Linux), and every `pollMs` regardless.
 * The timer is unref'd, so a watched lock never keeps the process alive. Returns the stop.
 */
export function watchLockFile(
  path: string,
  check: () => void,
  pollMs: number = LOCK_FILE_POLL_MS,
): () => void {
  const file = watchReplacement(path, 'file', check);
  const dir = watchReplacement(dirname(path), 'directory', check);
  const timer = setInterval(check, pollMs);
  timer.unref();
  return () => {
    clearInterval(timer);
    file.stop();
    dir.stop();
  };
}
