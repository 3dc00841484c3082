import { createHash, randomBytes } from 'node:crypto';
import { readdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from '../core/clock.js';
import { InvalidArgumentError, TableError } from '../core/errors.js';
import { describeValue } from '../core/options.js';
import { makeDirectories } from '../directory/make-directories.js';
import { Region } from '../rows/region.js';
import type { OpenRegionStorage } from '../rows/region-storage.js';
import type { TableCatalogStore } from '../rows/table-catalog-store.js';
import type { TableDescriptor } from '../rows/table-descriptor.js';
import { DESCRIPTOR, FileCatalogStore } from './file-catalog-store.js';
import { TableRegions } from './table-regions.js';

/** What the server passes to every region it opens. */
export interface CatalogRegionOptions {
  leasePeriodMs: number;
  rowLockWaitMs: number;
  durability: 'fsync' | 'none';
  clock: Clock;
  /** How each table's storage is opened (default: `RowStorage` in the table's directory). */
  openStorage?: OpenRegionStorage | undefined;
}

/** What a master adds to its catalog: the epoch its regions write under, a validity check. */
export interface CatalogMastership {
  /** The mastership token: the epoch of every region this catalog opens (0: standalone). */
  epoch: number;
  /** Throws (`NOT_MASTER`) once the mastership is no longer certain; run before admin writes. */
  check(): void;
}

const STANDALONE: CatalogMastership = { epoch: 0, check: () => undefined };

/**
 * The directories of a table's regions below `<data>/tables`: `<name>` for the first (where a
 * table of one region has always lived), `<name>@<16 hex digits>` for the others, named by
 * their first row (its SHA-256's first 64 bits: a key may be 32 KiB, a file name not), so that
 * a region keeps its directory whatever is split around it. `@` is not a table name's
 * character: no table's directory is another's region's.
 */
export function regionDirectories(descriptor: TableDescriptor): string[] {
  return [
    descriptor.name,
    ...descriptor.splits.map(
      (key) =>
        `${descriptor.name}@${createHash('sha256').update(key, 'latin1').digest('hex').slice(0, 16)}`,
    ),
  ];
}

/**
 * The server's tables: their regions ({@link TableRegions}; one {@link Region} each, under
 * `<data>/tables/<name>/`, and `<name>@<hash>/` for the other regions of a split table), described in a
 * {@link TableCatalogStore} (`<data>/tables/<name>.table.json` files unless the region storage
 * keeps the catalog, see `OpenRegionStorage.openCatalog`). Recording the descriptor is the
 * commit point: it happens before the region is created, and its removal before the region's
 * data is deleted, so a crash in between leaves either a table that opens or data nobody
 * names, which the next start (or the next create of that name) removes.
 *
 * Administrative changes run one at a time. Dropping a table closes its region: every lock on
 * it is lost (`LOCK_LOST`), and calls on it fail with `TABLE_NOT_FOUND` from then on.
 */
export class TableCatalog {
  readonly #dir: string;
  readonly #store: TableCatalogStore;
  readonly #regionOptions: CatalogRegionOptions;
  readonly #mastership: CatalogMastership;
  readonly #tables = new Map<string, { descriptor: TableDescriptor; regions: TableRegions }>();
  #admin: Promise<unknown> = Promise.resolve();
  #closed = false;

  private constructor(
    dir: string,
    store: TableCatalogStore,
    regionOptions: CatalogRegionOptions,
    mastership: CatalogMastership,
  ) {
    this.#dir = dir;
    this.#store = store;
    this.#regionOptions = regionOptions;
    this.#mastership = mastership;
  }

  /**
   * Opens (recovering) every table under `<dataDir>/tables`. A master passes its
   * `mastership`: its token is the epoch of every region, and `create`/`drop` check it first.
   */
  static async open(
    dataDir: string,
    regionOptions: CatalogRegionOptions,
    mastership: CatalogMastership = STANDALONE,
  ): Promise<TableCatalog> {
    const dir = join(dataDir, 'tables');
    await makeDirectories(dir);
    const openCatalog = regionOptions.openStorage?.openCatalog;
    const { epoch } = mastership;
    const store =
      openCatalog === undefined
        ? new FileCatalogStore(dir)
        : await openCatalog(dataDir, epoch > 0 ? { epoch } : {});
    const catalog = new TableCatalog(dir, store, regionOptions, mastership);
    try {
      await catalog.#load();
    } catch (err) {
      await catalog.close();
      throw err;
    }
    return catalog;
  }

  /** The epoch the regions of this catalog write under (the mastership token; 0 standalone). */
  get epoch(): number {
    return this.#mastership.epoch;
  }

  get size(): number {
    return this.#tables.size;
  }

  /** The regions of a table, or `TABLE_NOT_FOUND`. */
  regions(name: unknown): TableRegions {
    const entry = typeof name === 'string' ? this.#tables.get(name) : undefined;
    if (entry === undefined) {
      throw new TableError('TABLE_NOT_FOUND', `No table named ${describeValue(name)}`);
    }
    return entry.regions;
  }

  describe(name: unknown): TableDescriptor {
    const entry = typeof name === 'string' ? this.#tables.get(name) : undefined;
    if (entry === undefined) {
      throw new TableError('TABLE_NOT_FOUND', `No table named ${describeValue(name)}`);
    }
    return entry.descriptor;
  }

  /** Table names in byte order. */
  list(): string[] {
    return [...this.#tables.keys()].sort();
  }

  entries(): IterableIterator<[string, { descriptor: TableDescriptor; regions: TableRegions }]> {
    return this.#tables.entries();
  }

  create(descriptor: TableDescriptor): Promise<TableDescriptor> {
    return this.#serially(async () => {
      this.#mastership.check();
      if (this.#tables.has(descriptor.name)) {
        throw new TableError('TABLE_EXISTS', `Table ${descriptor.name} already exists`);
      }
      const dirs = regionDirectories(descriptor);
      if (new Set(dirs).size !== dirs.length) {
        // Two split keys whose hashes share 64 bits: found on purpose, never by chance.
        throw new InvalidArgumentError(
          'Two split keys would share a region directory (their SHA-256 digests start alike)',
        );
      }
      // Directories (or regions in another storage) left by a crash between an earlier
      // drop's steps go first; recording the descriptor is the commit point.
      for (const dir of dirs) {
        await rm(join(this.#dir, dir), { recursive: true, force: true });
        await this.#destroyStored(dir);
      }
      await this.#store.add(descriptor);
      try {
        this.#tables.set(descriptor.name, {
          descriptor,
          regions: await this.#openRegions(descriptor),
        });
      } catch (err) {
        await this.#store.remove(descriptor.name).catch(() => undefined);
        throw err;
      }
      return descriptor;
    });
  }

  drop(name: unknown): Promise<void> {
    return this.#serially(async () => {
      this.#mastership.check();
      const regions = this.regions(name);
      const { descriptor } = this.#tables.get(name as string) as { descriptor: TableDescriptor };
      this.#tables.delete(descriptor.name);
      await regions.close();
      await this.#store.remove(descriptor.name);
      for (const dir of regionDirectories(descriptor)) {
        await this.#destroyStored(dir);
        const doomed = join(this.#dir, `.dropped-${randomBytes(6).toString('hex')}`);
        await rename(join(this.#dir, dir), doomed).catch((err: NodeJS.ErrnoException) => {
          // A storage that keeps a region elsewhere may never have made its directory.
          if (err.code !== 'ENOENT') throw err;
        });
        await rm(doomed, { recursive: true, force: true });
      }
    });
  }

  /** Closes every region (their locks are lost with `LOCK_LOST`). Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#admin.catch(() => undefined);
    const tables = [...this.#tables.values()].map((t) => t.regions);
    this.#tables.clear();
    await Promise.allSettled(tables.map((t) => t.close()));
    await this.#store.close().catch(() => undefined);
  }

  async #load(): Promise<void> {
    const names = await readdir(this.#dir);
    for (const entry of names) {
      if (entry.startsWith('.dropped-'))
        await rm(join(this.#dir, entry), { recursive: true, force: true });
    }
    const described = new Set<string>();
    for (const descriptor of await this.#store.load()) {
      for (const dir of regionDirectories(descriptor)) described.add(dir);
      this.#tables.set(descriptor.name, {
        descriptor,
        regions: await this.#openRegions(descriptor),
      });
    }
    for (const entry of await readdir(this.#dir)) {
      if (entry.endsWith(DESCRIPTOR) || entry.endsWith('.tmp') || described.has(entry)) continue;
      // A region directory whose descriptor is gone: a drop that crashed half way.
      await rm(join(this.#dir, entry), { recursive: true, force: true });
    }
  }

  /** Opens (recovering) a table's regions one after the other; all or none. */
  async #openRegions(descriptor: TableDescriptor): Promise<TableRegions> {
    const opened: Region[] = [];
    try {
      for (const dir of regionDirectories(descriptor))
        opened.push(await this.#openRegion(descriptor, dir));
    } catch (err) {
      await Promise.allSettled(opened.map((r) => r.close()));
      throw err;
    }
    return new TableRegions(['', ...descriptor.splits], opened);
  }

  async #openRegion(descriptor: TableDescriptor, dir: string): Promise<Region> {
    const { leasePeriodMs, rowLockWaitMs, durability, clock, openStorage } = this.#regionOptions;
    return Region.open({
      families: descriptor.families,
      dir: join(this.#dir, dir),
      durability,
      leasePeriodMs,
      rowLockWaitMs,
      timestampOnArrival: descriptor.timestampOnArrival,
      clock,
      ...(this.#mastership.epoch > 0 ? { epoch: this.#mastership.epoch } : {}),
      ...(openStorage === undefined ? {} : { openStorage }),
    });
  }

  /** What a storage keeps outside the table's directory (see `OpenRegionStorage.destroy`). */
  async #destroyStored(dir: string): Promise<void> {
    const destroy = this.#regionOptions.openStorage?.destroy;
    if (destroy === undefined) return;
    const { epoch } = this.#mastership;
    await destroy(join(this.#dir, dir), epoch > 0 ? { epoch } : {});
  }

  #serially<T>(work: () => Promise<T>): Promise<T> {
    if (this.#closed)
      return Promise.reject(new TableError('TABLE_NOT_FOUND', 'The server is closing'));
    const run = this.#admin.then(work, work);
    this.#admin = run.catch(() => undefined);
    return run;
  }
}
