import { EventEmitter } from 'node:events';
import { type LockLostError, UnsupportedOperationError } from '../core/errors.js';
import { validateLockName } from '../core/lock-name.js';
import type { Directory } from './directory.js';
import type { Lock } from './lock.js';
import { LockFactory } from './lock-factory.js';

/**
 * The lock that locks nothing: `close()` and `ensureValid()` do nothing, even after close. Its
 * token is always 0 and its signal never aborts: it protects nothing, so it can lose nothing.
 */
class NoLock extends EventEmitter<{ lost: [LockLostError] }> implements Lock {
  readonly resource = 'NoLock';
  readonly token = 0;
  readonly signal = new AbortController().signal;
  readonly closed = false;
  readonly lostReason = undefined;
  ensureValid(): void {}
  async close(): Promise<void> {}
  release(): Promise<void> {
    return this.close();
  }
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
  override toString(): string {
    return 'NoLock';
  }
}

/**
 * Lucene's `NoLockFactory`: every obtain succeeds and returns one shared {@link NoLock}. Only
 * for a directory that is guaranteed to have a single writer by other means; two writers can
 * coexist and corrupt it.
 */
export class NoLockFactory extends LockFactory {
  static readonly INSTANCE: NoLockFactory = new NoLockFactory();
  static readonly SINGLETON_LOCK: Lock = new NoLock();

  /**
   * A singleton, as in Lucene: use `NoLockFactory.INSTANCE`. The constructor is private for the type
   * checker and throws at run time once `INSTANCE` exists, so plain JavaScript cannot make a
   * second instance either.
   */
  private constructor() {
    if (NoLockFactory.INSTANCE !== undefined) {
      throw new UnsupportedOperationError(
        'NoLockFactory is a singleton: use NoLockFactory.INSTANCE instead of new NoLockFactory()',
      );
    }
    super();
  }

  async obtainLock(_directory: Directory, lockName: string): Promise<Lock> {
    validateLockName(lockName);
    return NoLockFactory.SINGLETON_LOCK;
  }
}
