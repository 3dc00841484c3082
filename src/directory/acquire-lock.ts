import { InvalidArgumentError, LockObtainFailedError } from '../core/errors.js';
import { validateLockName } from '../core/lock-name.js';
import { type WaitOptions, waitFor } from '../core/wait.js';
import { Directory } from './directory.js';
import type { Lock } from './lock.js';

/** The lock name Lucene's IndexWriter uses; the default here too. */
export const WRITE_LOCK_NAME = 'write.lock';

export interface AcquireLockOptions extends WaitOptions {
  /** Lock name within the directory (default `write.lock`). */
  name?: string;
}

/**
 * Obtains a lock in `directory`, waiting while it is held elsewhere, and wakes the moment it is
 * released or its holder dies: the factory's kernel hints (inotify on Linux) and in-process
 * release events trigger an immediate retry, and a slow jittered poll covers what hints miss
 * (network file systems, other platforms). A waiter costs no CPU between hints and never
 * occupies libuv's thread pool. Rejects with {@link LockTimeoutError} after `timeoutMs`
 * (cause: the last failure) or {@link AbortedError} when `signal` aborts.
 */
export async function acquireLock(
  directory: Directory,
  options: AcquireLockOptions = {},
): Promise<Lock> {
  if (!(directory instanceof Directory)) {
    throw new InvalidArgumentError(`acquireLock needs a Directory, got ${String(directory)}`);
  }
  const name = validateLockName(options.name ?? WRITE_LOCK_NAME);
  const factory = directory.lockFactory;
  const wake = factory.wakeSource(directory, name);
  return waitFor(
    async (last) => {
      if (factory.isHeldElsewhere(directory, name)) {
        last.error ??= new LockObtainFailedError(`Lock held elsewhere: ${directory}/${name}`);
        return undefined;
      }
      try {
        return await directory.obtainLock(name, { signal: options.signal });
      } catch (err) {
        if (!(err instanceof LockObtainFailedError)) throw err;
        last.error = err;
        return undefined;
      }
    },
    {
      resource: `${directory}/${name}`,
      wake,
      signal: options.signal,
      timeoutMs: options.timeoutMs,
      clock: options.clock,
      // With release hints the poll is only a safety net (hints can be missed on network file
      // systems), so it backs off to 1 s; without hints it stays at most 250 ms apart.
      minPollMs: 2,
      maxPollMs: wake === undefined ? 250 : 1000,
    },
  );
}
