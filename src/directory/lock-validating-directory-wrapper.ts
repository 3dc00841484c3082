import { InvalidArgumentError } from '../core/errors.js';
import type { Directory } from './directory.js';
import { FilterDirectory } from './filter-directory.js';
import type { Lock } from './lock.js';

/**
 * Lucene's `LockValidatingDirectoryWrapper`: calls `lock.ensureValid()` before every
 * destructive operation (delete, createOutput, copyFrom, rename, sync, syncMetaData), so a
 * writer that lost its lock fails before it touches the directory. Reads and
 * `createTempOutput` are not checked, as in Lucene.
 */
export class LockValidatingDirectoryWrapper extends FilterDirectory {
  readonly writeLock: Lock;

  constructor(inner: Directory, writeLock: Lock) {
    super(inner);
    if (typeof writeLock?.ensureValid !== 'function') {
      throw new InvalidArgumentError(
        `LockValidatingDirectoryWrapper needs a held Lock, got ${String(writeLock)}`,
      );
    }
    this.writeLock = writeLock;
  }

  override async deleteFile(name: string): Promise<void> {
    this.writeLock.ensureValid();
    await this.in.deleteFile(name);
  }

  override async createOutput(name: string, data: Uint8Array): Promise<void> {
    this.writeLock.ensureValid();
    await this.in.createOutput(name, data);
  }

  override async copyFrom(from: Directory, source: string, dest: string): Promise<void> {
    this.writeLock.ensureValid();
    await this.in.copyFrom(from, source, dest);
  }

  override async rename(source: string, dest: string): Promise<void> {
    this.writeLock.ensureValid();
    await this.in.rename(source, dest);
  }

  override async syncMetaData(): Promise<void> {
    this.writeLock.ensureValid();
    await this.in.syncMetaData();
  }

  override async sync(names: readonly string[]): Promise<void> {
    this.writeLock.ensureValid();
    await this.in.sync(names);
  }
}
