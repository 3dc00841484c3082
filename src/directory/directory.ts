import { validateLockName } from '../core/lock-name.js';
import { checkOptionsObject, checkSignal } from '../core/options.js';
import type { Lock } from './lock.js';
import type { LockFactory } from './lock-factory.js';

export interface ObtainOptions {
  /** Cancels a waiting obtain (only wrappers that wait look at it). */
  signal?: AbortSignal | undefined;
}

/**
 * The small slice of Lucene's `Directory` that locking needs: a flat set of named files plus
 * `obtainLock`. File names are single path components (validated), so no operation can reach
 * outside the directory. `createOutput` writes a whole file and fails if it exists.
 */
export abstract class Directory {
  abstract get lockFactory(): LockFactory;

  /**
   * Lucene's final `BaseDirectory.obtainLock`: delegates to the factory. The name and the
   * options are checked first ({@link checkObtainOptions}).
   */
  obtainLock(name: string, options?: ObtainOptions): Promise<Lock> {
    try {
      validateLockName(name);
      checkObtainOptions(options);
      return this.lockFactory.obtainLock(this, name);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  abstract listAll(): Promise<string[]>;
  abstract fileLength(name: string): Promise<number>;
  abstract readFile(name: string): Promise<Buffer>;
  abstract createOutput(name: string, data: Uint8Array): Promise<void>;
  /** Creates a new file named `<prefix>_<random><suffix>` and returns its name. */
  abstract createTempOutput(prefix: string, suffix: string, data: Uint8Array): Promise<string>;
  abstract deleteFile(name: string): Promise<void>;
  abstract rename(source: string, dest: string): Promise<void>;
  abstract sync(names: readonly string[]): Promise<void>;
  abstract syncMetaData(): Promise<void>;

  async copyFrom(from: Directory, source: string, dest: string): Promise<void> {
    await this.createOutput(validateLockName(dest, 'file name'), await from.readFile(source));
  }

  async close(): Promise<void> {}

  abstract toString(): string;
}

/**
 * `obtainLock`'s options: `undefined` or an object whose `signal` is `undefined` or an
 * `AbortSignal`; anything else is an `InvalidArgumentError` before any lock is touched.
 */
export function checkObtainOptions(options: ObtainOptions | undefined): AbortSignal | undefined {
  return checkSignal(
    checkOptionsObject(options, 'obtainLock options').signal,
    'obtainLock option signal',
  );
}

export function checkFileName(name: string): string {
  return validateLockName(name, 'file name');
}
