import type { WakeSource } from '../core/wait.js';
import type { Directory } from './directory.js';
import type { Lock } from './lock.js';

/**
 * Lucene's `LockFactory`: `obtainLock(dir, name)` returns a lock that is already held, or
 * fails with {@link LockObtainFailedError} when it is held elsewhere (any other error is an
 * I/O failure). It never waits; see {@link acquireLock} and {@link SleepingLockWrapper}.
 */
export abstract class LockFactory {
  abstract obtainLock(directory: Directory, lockName: string): Promise<Lock>;

  /**
   * Hints that `lockName` may have been released (optional). Waiters retry on each hint and
   * poll slowly otherwise, so a release is seen at once without busy polling.
   */
  wakeSource(_directory: Directory, _lockName: string): WakeSource | undefined {
    return undefined;
  }

  /**
   * True when an obtain would certainly fail right now (optional, side-effect free). Waiters
   * ask before each attempt so that failed attempts do not themselves look like releases.
   */
  isHeldElsewhere(_directory: Directory, _lockName: string): boolean {
    return false;
  }

  toString(): string {
    return this.constructor.name;
  }
}
