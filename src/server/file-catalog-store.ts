import { randomBytes } from 'node:crypto';
import { open, readdir, readFile, rename, rm, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { LockIOError, TableError } from '../core/errors.js';
import type { TableCatalogStore } from '../rows/table-catalog-store.js';
import { descriptorFromJson, type TableDescriptor } from '../rows/table-descriptor.js';

/** The suffix of a descriptor file: `<name>.table.json`. */
export const DESCRIPTOR = '.table.json';

/**
 * The catalog as files in `<data>/tables`: `<name>.table.json` per table, written to a
 * temporary name, fsynced and renamed (the commit point of a create), unlinked and the
 * directory fsynced (that of a drop). `load` removes temporary files a crash left.
 */
export class FileCatalogStore implements TableCatalogStore {
  readonly #dir: string;

  constructor(dir: string) {
    this.#dir = dir;
  }

  async load(): Promise<TableDescriptor[]> {
    const out: TableDescriptor[] = [];
    for (const entry of await readdir(this.#dir)) {
      if (entry.endsWith('.tmp')) {
        await rm(join(this.#dir, entry), { force: true });
        continue;
      }
      if (!entry.endsWith(DESCRIPTOR)) continue;
      const file = join(this.#dir, entry);
      let descriptor: TableDescriptor;
      try {
        descriptor = descriptorFromJson(await readFile(file, 'utf8'));
      } catch (err) {
        throw new LockIOError(`Unreadable table descriptor ${file}: ${(err as Error).message}`, {
          cause: err,
        });
      }
      if (descriptor.name + DESCRIPTOR !== entry) {
        throw new LockIOError(`Table descriptor ${file} names table ${descriptor.name}`);
      }
      out.push(descriptor);
    }
    return out;
  }

  async add(descriptor: TableDescriptor): Promise<void> {
    await this.#write(descriptor, async (file) => {
      await open(file, 'r').then(
        async (h) => {
          await h.close();
          throw new TableError('TABLE_EXISTS', `Table ${descriptor.name} already exists`);
        },
        () => undefined,
      );
    });
  }

  async replace(descriptor: TableDescriptor): Promise<void> {
    // rename(2) replaces the old file at once: a crash leaves one descriptor or the other.
    await this.#write(descriptor, async () => undefined);
  }

  /**
   * Writes the descriptor to a synced temporary file, runs `check` on the final path, renames
   * the temporary file over it and syncs the directory; the temporary file goes on failure.
   */
  async #write(descriptor: TableDescriptor, check: (file: string) => Promise<void>): Promise<void> {
    const file = join(this.#dir, descriptor.name + DESCRIPTOR);
    const temp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
    const handle = await open(temp, 'wx', 0o644);
    try {
      await handle.writeFile(`${JSON.stringify(descriptor, null, 2)}\n`);
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await check(file);
      await rename(temp, file);
    } catch (err) {
      await rm(temp, { force: true });
      throw err;
    }
    await this.#syncDir();
  }

  async remove(name: string): Promise<void> {
    await unlink(join(this.#dir, name + DESCRIPTOR));
    await this.#syncDir();
  }

  async close(): Promise<void> {}

  async #syncDir(): Promise<void> {
    const handle = await open(this.#dir, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  }
}
