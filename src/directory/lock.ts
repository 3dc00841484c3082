import type { LockHandle } from '../core/lock-handle.js';

/**
 * Lucene's `Lock`: a held lock on one name in one directory. `close()` releases it (it may
 * throw {@link LockReleaseFailedError} when a human should look), `ensureValid()` checks that
 * it is still held (once lost, it always throws). Every lock also has the locksmith handle
 * vocabulary: a fencing `token`, a `signal` that aborts on loss or release, `lost` events.
 *
 * Loss is noticed by itself while someone observes the lock (reads `signal` or listens for
 * `lost`): a file-system lock watches its lock file and directory (inotify hints plus a 1 s
 * poll) and aborts `signal` with a `LockLostError` (`LOCK_LOST`) saying what happened when the
 * file is deleted, moved or replaced. Nothing is watched for a lock nobody observes.
 */
export type Lock = LockHandle;
