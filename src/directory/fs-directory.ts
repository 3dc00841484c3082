import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { InvalidArgumentError, LockIOError } from '../core/errors.js';
import { describeValue } from '../core/options.js';
import { checkFileName, Directory } from './directory.js';
import { markFSDirectory } from './fs-directory-brand.js';
import { LockFactory } from './lock-factory.js';
import { makeDirectories } from './make-directories.js';
import { NativeFSLockFactory } from './native-fs-lock-factory.js';

/**
 * A directory on the file system (Lucene's `FSDirectory`). `open` creates the directory if it
 * is not one yet, refuses a path that is a regular file, and stores the real path (symlinks,
 * `..` and relative parts resolved), so two spellings of one directory share one lock.
 * Its default lock factory is {@link NativeFSLockFactory}.
 */
export class FSDirectory extends Directory {
  readonly path: string;
  readonly #lockFactory: LockFactory;

  protected constructor(realPath: string, lockFactory: LockFactory) {
    super();
    this.path = realPath;
    this.#lockFactory = lockFactory;
    markFSDirectory(this);
  }

  /**
   * Opens (creating if needed) the directory at `path`. Both arguments are checked before
   * anything is created: an `InvalidArgumentError` for an empty or non-string path, or a
   * `lockFactory` that is not a {@link LockFactory}.
   */
  static async open(
    path: string,
    lockFactory: LockFactory = NativeFSLockFactory.INSTANCE,
  ): Promise<FSDirectory> {
    if (typeof path !== 'string' || path.length === 0 || path.includes('\0')) {
      throw new InvalidArgumentError(
        `Invalid directory path ${describeValue(path)}: expected a non-empty string without NUL`,
      );
    }
    if (!(lockFactory instanceof LockFactory)) {
      throw new InvalidArgumentError(
        `Invalid lock factory for ${path}: expected a LockFactory, got ${describeValue(lockFactory)}`,
      );
    }
    const absolute = resolve(path);
    let isDirectory = false;
    try {
      isDirectory = (await fsp.stat(absolute)).isDirectory();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        throw new LockIOError(`Cannot access directory ${absolute}`, { cause: err });
      }
    }
    if (!isDirectory) {
      try {
        await makeDirectories(absolute);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        // The OS's reason, without the path it repeats: "ENOENT: no such file or directory".
        const why =
          code === 'EEXIST' || code === 'ENOTDIR'
            ? 'it is a file, not a directory'
            : `it cannot be created (${String((err as Error).message).split(',')[0]})`;
        throw new LockIOError(`Cannot use ${absolute} as a directory: ${why}`, { cause: err });
      }
    }
    try {
      return new FSDirectory(await fsp.realpath(absolute), lockFactory);
    } catch (err) {
      throw new LockIOError(`Cannot resolve directory ${absolute}`, { cause: err });
    }
  }

  get lockFactory(): LockFactory {
    return this.#lockFactory;
  }

  /** The path of a file in this directory. */
  resolve(name: string): string {
    return join(this.path, checkFileName(name));
  }

  async listAll(): Promise<string[]> {
    return (await fsp.readdir(this.path)).sort();
  }

  async fileLength(name: string): Promise<number> {
    return (await fsp.lstat(this.resolve(name))).size;
  }

  async readFile(name: string): Promise<Buffer> {
    const handle = await fsp.open(this.resolve(name), constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      return await handle.readFile();
    } finally {
      await handle.close();
    }
  }

  async createOutput(name: string, data: Uint8Array): Promise<void> {
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
    const handle = await fsp.open(this.resolve(name), flags, 0o644);
    try {
      await handle.writeFile(data);
    } finally {
      await handle.close();
    }
  }

  async createTempOutput(prefix: string, suffix: string, data: Uint8Array): Promise<string> {
    const name = checkFileName(`${prefix}_${randomBytes(6).toString('hex')}${suffix}`);
    await this.createOutput(name, data);
    return name;
  }

  async deleteFile(name: string): Promise<void> {
    await fsp.unlink(this.resolve(name));
  }

  async rename(source: string, dest: string): Promise<void> {
    await fsp.rename(this.resolve(source), this.resolve(dest));
  }

  async sync(names: readonly string[]): Promise<void> {
    for (const name of names) {
      const handle = await fsp.open(this.resolve(name), constants.O_RDONLY | constants.O_NOFOLLOW);
      try {
        await handle.sync();
      } finally {
        await handle.close();
      }
    }
  }

  async syncMetaData(): Promise<void> {
    const handle = await fsp.open(this.path, constants.O_RDONLY);
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  }

  toString(): string {
    return `FSDirectory@${this.path} lockFactory=${this.#lockFactory}`;
  }
}
