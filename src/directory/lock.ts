import type { LockHandle } from '../core/lock-handle.js';

/**
 * Lucene's `Lock`: a held lock on one name in one directory. `close()` releases it (it may
 * throw {@link LockReleaseFailedError} when a human should look), `ensureValid()` is a
 * best-effort check that it is still held. Every lock also has the locksmith handle
 * vocabulary: a fencing `token`, a `signal` that aborts on loss or release, `lost` events.
 */
export type Lock = LockHandle;
