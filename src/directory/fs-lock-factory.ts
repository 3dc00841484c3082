import { InvalidArgumentError, UnsupportedOperationError } from '../core/errors.js';
import { validateLockName } from '../core/lock-name.js';
import { describeValue } from '../core/options.js';
import { Directory } from './directory.js';
import type { FSDirectory } from './fs-directory.js';
import { isFSDirectory } from './fs-directory-brand.js';
import type { Lock } from './lock.js';
import { LockFactory } from './lock-factory.js';

/**
 * Lucene's `FSLockFactory`: lock files live in an {@link FSDirectory}'s real path. `obtainLock`
 * validates the name and the directory (a {@link Directory} that is not an `FSDirectory` is
 * unsupported), rejecting the promise rather than throwing, then defers to `obtainFSLock`.
 */
export abstract class FSLockFactory extends LockFactory {
  obtainLock(directory: Directory, lockName: string): Promise<Lock> {
    try {
      return this.obtainFSLock(this.fsDirectory(directory), validateLockName(lockName));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  protected fsDirectory(directory: Directory): FSDirectory {
    if (!(directory instanceof Directory)) {
      throw new InvalidArgumentError(`${this} needs a Directory, got ${describeValue(directory)}`);
    }
    if (!isFSDirectory(directory)) {
      throw new UnsupportedOperationError(
        `${this} can only be used with FSDirectory subclasses, got: ${directory}`,
      );
    }
    return directory as FSDirectory;
  }

  protected abstract obtainFSLock(directory: FSDirectory, lockName: string): Promise<Lock>;
}
