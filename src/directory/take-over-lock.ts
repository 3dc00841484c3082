import { rm } from 'node:fs/promises';
import { LockObtainFailedError } from '../core/errors.js';
import { validateLockName } from '../core/lock-name.js';
import { WRITE_LOCK_NAME } from './acquire-lock.js';
import { FSDirectory } from './fs-directory.js';
import type { Lock } from './lock.js';
import { lockPath } from './lock-file.js';

/**
 * Obtains the native lock `name` (default `write.lock`) in `dir` for a process that has the
 * right to it by other means — a master whose store locker granted it a newer mastership —
 * even while a deposed holder still holds it (a paused or partitioned ex-master keeps its
 * kernel lock). If the plain obtain fails because another process holds it, the lock file is
 * unlinked and a new one is created and locked: the old holder's handle then sees its path name
 * another file, so its `ensureValid()` throws and its `signal` aborts (`LOCK_LOST`), and every
 * write it guards with that check is refused.
 *
 * Only for a caller that is certain no legitimate holder exists (its mastership proves it).
 * A lock held in this same process is not taken over (`LOCK_OBTAIN_FAILED`): that is a bug of
 * the caller, not a deposed master.
 */
export async function takeOverLock(dir: string, name: string = WRITE_LOCK_NAME): Promise<Lock> {
  validateLockName(name);
  const directory = await FSDirectory.open(dir);
  try {
    return await directory.obtainLock(name);
  } catch (err) {
    if (!(err instanceof LockObtainFailedError) || !/another program/.test(err.message)) throw err;
  }
  await rm(lockPath(directory.path, name), { force: true });
  return directory.obtainLock(name);
}
