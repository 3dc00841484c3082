import { InvalidArgumentError } from '../core/errors.js';
import type { Directory, ObtainOptions } from './directory.js';
import { Directory as BaseDirectory } from './directory.js';
import type { Lock } from './lock.js';
import type { LockFactory } from './lock-factory.js';

/** Lucene's `FilterDirectory`: forwards everything, including `obtainLock`, to `in`. */
export class FilterDirectory extends BaseDirectory {
  readonly in: Directory;

  constructor(inner: Directory) {
    super();
    if (!(inner instanceof BaseDirectory)) {
      throw new InvalidArgumentError(`${new.target.name} wraps a Directory, got ${String(inner)}`);
    }
    this.in = inner;
  }

  get lockFactory(): LockFactory {
    return this.in.lockFactory;
  }

  override obtainLock(name: string, options?: ObtainOptions): Promise<Lock> {
    return this.in.obtainLock(name, options);
  }

  listAll(): Promise<string[]> {
    return this.in.listAll();
  }
  fileLength(name: string): Promise<number> {
    return this.in.fileLength(name);
  }
  readFile(name: string): Promise<Buffer> {
    return this.in.readFile(name);
  }
  createOutput(name: string, data: Uint8Array): Promise<void> {
    return this.in.createOutput(name, data);
  }
  createTempOutput(prefix: string, suffix: string, data: Uint8Array): Promise<string> {
    return this.in.createTempOutput(prefix, suffix, data);
  }
  deleteFile(name: string): Promise<void> {
    return this.in.deleteFile(name);
  }
  rename(source: string, dest: string): Promise<void> {
    return this.in.rename(source, dest);
  }
  override copyFrom(from: Directory, source: string, dest: string): Promise<void> {
    return this.in.copyFrom(from, source, dest);
  }
  sync(names: readonly string[]): Promise<void> {
    return this.in.sync(names);
  }
  syncMetaData(): Promise<void> {
    return this.in.syncMetaData();
  }
  override close(): Promise<void> {
    return this.in.close();
  }
  toString(): string {
    return `${this.constructor.name}(${this.in})`;
  }
}
