import { randomBytes } from 'node:crypto';
import { readdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from '../core/clock.js';
import { TableError } from '../core/errors.js';
import { describeValue } from '../core/options.js';
import { makeDirectories } from '../directory/make-directories.js';
import { Region } from '../rows/region.js';
import type { OpenRegionStorage } from '../rows/region-storage.js';
import type { TableCatalogStore } from '../rows/table-catalog-store.js';
import type { TableDescriptor } from '../rows/table-descriptor.js';
import { DESCRIPTOR, FileCatalogStore } from './file-catalog-store.js';

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
 * The server's tables: one {@link Region} each, under `<data>/tables/<name>/`, described in a
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
  readonly #tables = new Map<string, { descriptor: TableDescriptor; region: Region }>();
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

  /** The region of a table, or `TABLE_NOT_FOUND`. */
  region(name: unknown): Region {
    const entry = typeof name === 'string' ? this.#tables.get(name) : undefined;
    if (entry === undefined) {
      throw new TableError('TABLE_NOT_FOUND', `No table named ${describeValue(name)}`);
    }
    return entry.region;
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

  entries(): IterableIterator<[string, { descriptor: TableDescriptor; region: Region }]> {
    return this.#tables.entries();
  }

  create(descriptor: TableDescriptor): Promise<TableDescriptor> {
    return this.#serially(async () => {
      this.#mastership.check();
      if (this.#tables.has(descriptor.name)) {
        throw new TableError('TABLE_EXISTS', `Table ${descriptor.name} already exists`);
      }
      // A directory (or a region in another storage) left by a crash between an earlier
      // drop's steps goes first; recording the descriptor is the commit point.
      await rm(join(this.#dir, descriptor.name), { recursive: true, force: true });
      await this.#destroyStored(descriptor.name);
      await this.#store.add(descriptor);
      try {
        this.#tables.set(descriptor.name, {
          descriptor,
          region: await this.#openRegion(descriptor),
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
      const region = this.region(name);
      const table = name as string;
      this.#tables.delete(table);
      await region.close();
      await this.#store.remove(table);
      await this.#destroyStored(table);
      const doomed = join(this.#dir, `.dropped-${randomBytes(6).toString('hex')}`);
      await rename(join(this.#dir, table), doomed);
      await rm(doomed, { recursive: true, force: true });
    });
  }

  /** Closes every region (their locks are lost with `LOCK_LOST`). Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#admin.catch(() => undefined);
    const regions = [...this.#tables.values()].map((t) => t.region);
    this.#tables.clear();
    await Promise.allSettled(regions.map((r) => r.close()));
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
      described.add(descriptor.name);
      this.#tables.set(descriptor.name, { descriptor, region: await this.#openRegion(descriptor) });
    }
    for (const entry of await readdir(this.#dir)) {
      if (entry.endsWith(DESCRIPTOR) || entry.endsWith('.tmp') || described.has(entry)) continue;
      // A table directory whose descriptor is gone: a drop that crashed half way.
      await rm(join(this.#dir, entry), { recursive: true, force: true });
    }
  }

  async #openRegion(descriptor: TableDescriptor): Promise<Region> {
    const { leasePeriodMs, rowLockWaitMs, durability, clock, openStorage } = this.#regionOptions;
    return Region.open({
      families: descriptor.families,
      dir: join(this.#dir, descriptor.name),
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
  async #destroyStored(table: string): Promise<void> {
    const destroy = this.#regionOptions.openStorage?.destroy;
    if (destroy === undefined) return;
    const { epoch } = this.#mastership;
    await destroy(join(this.#dir, table), epoch > 0 ? { epoch } : {});
  }

  #serially<T>(work: () => Promise<T>): Promise<T> {
    if (this.#closed)
      return Promise.reject(new TableError('TABLE_NOT_FOUND', 'The server is closing'));
    const run = this.#admin.then(work, work);
    this.#admin = run.catch(() => undefined);
    return run;
  }
}
