import { randomBytes } from 'node:crypto';
import { LockIOError } from '../core/errors.js';
import { checkFileName, Directory } from './directory.js';
import type { LockFactory } from './lock-factory.js';
import { SingleInstanceLockFactory } from './single-instance-lock-factory.js';

let nextId = 1;

/**
 * An in-memory directory (Lucene's `ByteBuffersDirectory`). Its default lock factory is a new
 * {@link SingleInstanceLockFactory} per directory, as in Lucene.
 */
export class ByteBuffersDirectory extends Directory {
  readonly #files = new Map<string, Buffer>();
  readonly #lockFactory: LockFactory;
  readonly #id = nextId++;

  constructor(lockFactory: LockFactory = new SingleInstanceLockFactory()) {
    super();
    this.#lockFactory = lockFactory;
  }

  get lockFactory(): LockFactory {
    return this.#lockFactory;
  }

  async listAll(): Promise<string[]> {
    return [...this.#files.keys()].sort();
  }

  async fileLength(name: string): Promise<number> {
    return this.#get(name).length;
  }

  async readFile(name: string): Promise<Buffer> {
    return Buffer.from(this.#get(name));
  }

  async createOutput(name: string, data: Uint8Array): Promise<void> {
    if (this.#files.has(checkFileName(name)))
      throw noSuchFile('EEXIST', name, 'File already exists');
    this.#files.set(name, Buffer.from(data));
  }

  async createTempOutput(prefix: string, suffix: string, data: Uint8Array): Promise<string> {
    const name = `${prefix}_${randomBytes(6).toString('hex')}${suffix}`;
    await this.createOutput(name, data);
    return name;
  }

  async deleteFile(name: string): Promise<void> {
    this.#get(name);
    this.#files.delete(name);
  }

  async rename(source: string, dest: string): Promise<void> {
    const data = this.#get(source);
    this.#files.delete(source);
    this.#files.set(checkFileName(dest), data);
  }

  async sync(names: readonly string[]): Promise<void> {
    for (const name of names) this.#get(name);
  }

  async syncMetaData(): Promise<void> {}

  toString(): string {
    return `ByteBuffersDirectory@${this.#id} lockFactory=${this.#lockFactory}`;
  }

  #get(name: string): Buffer {
    const data = this.#files.get(checkFileName(name));
    if (data === undefined) throw noSuchFile('ENOENT', name, 'No such file');
    return data;
  }
}

function noSuchFile(code: string, name: string, what: string): LockIOError {
  const cause: NodeJS.ErrnoException = new Error(`${code}: ${what}: ${name}`);
  cause.code = code;
  return new LockIOError(`${what}: ${name}`, { cause });
}
