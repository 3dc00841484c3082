import { createHash, randomBytes } from 'node:crypto';
import { readdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from '../core/clock.js';
import {
  InternalError,
  InvalidArgumentError,
  LockIOError,
  NotServingRegionError,
  TableError,
} from '../core/errors.js';
import { describeValue } from '../core/options.js';
import { makeDirectories } from '../directory/make-directories.js';
import { toStringBinary } from '../rows/bytes.js';
import { Region, type RegionPlacement } from '../rows/region.js';
import type { OpenRegionStorage } from '../rows/region-storage.js';
import { type BytesInput, checkRow } from '../rows/row-input.js';
import type { TableCatalogStore } from '../rows/table-catalog-store.js';
import { checkSplits, type TableDescriptor } from '../rows/table-descriptor.js';
import { DESCRIPTOR, FileCatalogStore } from './file-catalog-store.js';
import { RegionElsewhere, TableRegions } from './table-regions.js';

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
 * A live split in a fleet: table `table`'s region `parent` (storage name), `[startKey, endKey)`,
 * cut at `key`; the rows from `key` on go to region `daughter`.
 */
export interface FleetSplit {
  table: string;
  parent: string;
  daughter: string;
  startKey: string;
  endKey: string;
  key: string;
}

/**
 * What a fleet member adds to its catalog (see `FleetRole`): the tables are the fleet's, read
 * from the shared catalog without claiming it; a table's regions are served by whichever member
 * claimed each, so this catalog opens a region only when told to ({@link TableCatalog.serveRegion}).
 */
export interface CatalogFleet {
  /** Every table's descriptor as the shared catalog has it now (no claim). */
  read(): Promise<TableDescriptor[]>;
  /**
   * Runs an administrative change on the shared catalog, claimed for that change alone with a
   * fresh epoch (so one member's change fences a concurrent one's), and `regions` the names of
   * the regions it concerns (for the fleet to check nobody serves them, and record them).
   */
  change<T>(
    regions: readonly string[],
    work: (store: TableCatalogStore, epoch: number) => Promise<T>,
  ): Promise<T>;
  /** Throws (`NOT_SERVING_REGION`) while the member is not sure of its lease: run before every call. */
  serving(): void;
  /** Where the catalog's tables changed (this member created or dropped one): look again now. */
  changed(): void;
  /**
   * Resolves once no live member serves any of `regions` (the members close a dropped table's
   * at their next look), or after a lease at most.
   */
  released(regions: readonly string[]): Promise<void>;
  /**
   * A live split of a region served here, in steps: the daughter's region claimed for this
   * member before it is made (resolves with the epoch to open it with; nobody else serves it
   * meanwhile), the commit point (the descriptor recorded only while this member still holds
   * both regions; a refusal is `NOT_SERVING_REGION`, anything else leaves the outcome unknown),
   * then the daughter served here, or the split failed (`unknown`: it may have been recorded).
   */
  claimDaughter(region: string): Promise<number>;
  commitSplit(split: FleetSplit): Promise<void>;
  splitServed(region: string, table: string, startKey: string, epoch: number): void;
  splitFailed(regions: { parent: string; daughter: string }, unknown: boolean): Promise<void>;
  /**
   * A region claimed here (`name`, `epoch`) opened and is about to serve: the row locks recorded
   * on its rows are put back first (see `FleetLocks.restore`). Throwing keeps it closed.
   */
  opened(
    table: string,
    range: RegionPlacement,
    region: Region,
    claim: { region: string; epoch: number },
  ): Promise<void>;
  /** Whatever is recorded of table `name`'s row locks goes (it was dropped, or is made anew). */
  tableGone(name: string): Promise<void>;
}

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
    ...descriptor.splits.map((key) => regionDirectory(descriptor.name, key)),
  ];
}

/** The directory of table `name`'s region that starts at split key `key` (see above). */
/** `TableCatalog.regionIds` of each descriptor asked for (descriptors are never changed in place). */
const regionIdsOf = new WeakMap<TableDescriptor, string[]>();
const regionNamesOf = new WeakMap<TableDescriptor, readonly string[]>();

/** Two descriptors of one table name describe the same table (not a new one made after a drop). */
function sameDescriptor(a: TableDescriptor, b: TableDescriptor): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** A fleet's catalog is the shared one, changed through `CatalogFleet.change`: never this. */
const FLEET_STORE: TableCatalogStore = {
  load: async () => [],
  add: async () => {
    throw new InternalError('A fleet records tables through its shared catalog');
  },
  remove: async () => {
    throw new InternalError('A fleet records tables through its shared catalog');
  },
  replace: async () => {
    throw new InternalError('A fleet records tables through its shared catalog');
  },
  close: async () => undefined,
};

function regionDirectory(name: string, key: string): string {
  return `${name}@${createHash('sha256').update(key, 'latin1').digest('hex').slice(0, 16)}`;
}

/** A table as the catalog serves it: its descriptor (a split changes it) and its regions. */
interface TableEntry {
  descriptor: TableDescriptor;
  readonly regions: TableRegions;
  /**
   * In a fleet: split keys this member recorded that no read of the shared catalog has shown
   * yet (a read from before the split must not undo it; see `refresh`).
   */
  ownSplits?: Set<string>;
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
  readonly #fleet: CatalogFleet | undefined;
  readonly #tables = new Map<string, TableEntry>();
  #admin: Promise<unknown> = Promise.resolve();
  #closed = false;
  /** The shared catalog's read under way for `current`, and the one to start after it. */
  #reading: Promise<void> | undefined;
  #nextRead: Promise<void> | undefined;
  /** Reads of the shared catalog made, and the newest one taken in (see `refresh`). */
  #reads = 0;
  #applied = 0;

  private constructor(
    dir: string,
    store: TableCatalogStore,
    regionOptions: CatalogRegionOptions,
    mastership: CatalogMastership,
    fleet: CatalogFleet | undefined,
  ) {
    this.#dir = dir;
    this.#store = store;
    this.#regionOptions = regionOptions;
    this.#mastership = mastership;
    this.#fleet = fleet;
  }

  /**
   * Opens (recovering) every table under `<dataDir>/tables`. A master passes its
   * `mastership`: its token is the epoch of every region, and `create`/`drop` check it first.
   */
  static async open(
    dataDir: string,
    regionOptions: CatalogRegionOptions,
    mastership: CatalogMastership = STANDALONE,
    fleet?: CatalogFleet,
  ): Promise<TableCatalog> {
    const dir = join(dataDir, 'tables');
    await makeDirectories(dir);
    const openCatalog = regionOptions.openStorage?.openCatalog;
    const { epoch } = mastership;
    const store =
      fleet !== undefined
        ? FLEET_STORE
        : openCatalog === undefined
          ? new FileCatalogStore(dir)
          : await openCatalog(dataDir, epoch > 0 ? { epoch } : {});
    const catalog = new TableCatalog(dir, store, regionOptions, mastership, fleet);
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
    return this.#entry(name).regions;
  }

  /**
   * A table's regions and its name as the catalog keeps it: one string per table, where the
   * caller's is a fresh copy decoded from each frame (kept with every lock a session holds).
   * `TABLE_NOT_FOUND` for an unknown table.
   */
  resolve(name: unknown): { readonly name: string; readonly regions: TableRegions } {
    const entry = this.#entry(name);
    return { name: entry.descriptor.name, regions: entry.regions };
  }

  describe(name: unknown): TableDescriptor {
    return this.#entry(name).descriptor;
  }

  #entry(name: unknown): TableEntry {
    const entry = typeof name === 'string' ? this.#tables.get(name) : undefined;
    if (entry === undefined) {
      throw new TableError('TABLE_NOT_FOUND', `No table named ${describeValue(name)}`);
    }
    return entry;
  }

  /**
   * In a fleet, reads the shared catalog again (another member may have created, dropped or
   * split a table a moment ago), so that what `describe` and `list` say next is not older than
   * the call; elsewhere nothing.
   */
  current(): Promise<void> {
    const fleet = this.#fleet;
    if (fleet === undefined) return Promise.resolve();
    // Callers share reads: one that starts after a call began serves it, so however many
    // describe at once, at most two reads are under way or waiting (one running, one next).
    if (this.#nextRead !== undefined) return this.#nextRead;
    const read = async (): Promise<void> => {
      this.#nextRead = undefined;
      await this.refresh();
    };
    const running = this.#reading;
    const next = running === undefined ? read() : running.then(read, read);
    if (running !== undefined) this.#nextRead = next;
    const tracked = next.finally(() => {
      if (this.#reading === tracked) this.#reading = undefined;
    });
    tracked.catch(() => undefined);
    this.#reading = tracked;
    return next;
  }

  /** Table names in byte order. */
  list(): string[] {
    return [...this.#tables.keys()].sort();
  }

  entries(): IterableIterator<[string, Readonly<TableEntry>]> {
    return this.#tables.entries();
  }

  create(descriptor: TableDescriptor): Promise<TableDescriptor> {
    if (this.#fleet !== undefined) return this.#serially(() => this.#createInFleet(descriptor));
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

  /**
   * Splits the region of table `name` that holds row `key` in two, live (HBase's region split):
   * the rows from `key` to that region's end move to a new region (`<name>@<hash of key>`),
   * with their explicit locks (same handles, ids and tokens; held on).
   *
   * Steps (see `TableRegions.split`): while the region serves on, the new region is created
   * holding the rows from `key` on as of a pinned read point, its tokens above the old
   * region's, and made durable (a snapshot). Then the region pauses (calls that would write or
   * lock its rows wait; gets and scans go on), takes in what was written since that read
   * point, and the descriptor with `key` among its splits is recorded — the commit point; then
   * the old region ends at `key`, its rows from `key` on and their locks go to the new one, and
   * routing changes, all at once. The pause lasts as long as the late writes and the record.
   *
   * A crash before the commit leaves the table as it was (the new region's storage is cleared
   * at the next start or split); after it, the old region's storage may still hold the moved
   * rows until its next checkpoint, and recovery ignores them.
   */
  split(name: unknown, key: unknown): Promise<TableDescriptor> {
    return this.#serially(async () => {
      this.#mastership.check();
      const regions = this.regions(name);
      const entry = this.#tables.get(name as string) as TableEntry;
      const { descriptor } = entry;
      const row = checkRow(key as BytesInput, 'split key');
      if (descriptor.splits.includes(row)) {
        throw new InvalidArgumentError(
          `Table ${descriptor.name} is already split at ${toStringBinary(row)}`,
        );
      }
      const next: TableDescriptor = {
        ...descriptor,
        splits: checkSplits([...descriptor.splits, row]),
      };
      const dirs = regionDirectories(next);
      if (new Set(dirs).size !== dirs.length) {
        throw new InvalidArgumentError(
          `Split key ${toStringBinary(row)} would share a region directory with another (their SHA-256 digests start alike)`,
        );
      }
      const dir = regionDirectory(next.name, row);
      if (this.#fleet !== undefined) return this.#splitInFleet(entry, next, row, dir);
      let recording = false;
      let daughter: Region | undefined;
      try {
        const { parent } = await regions.split(
          row,
          async (parent, readPoint) => {
            // What a crash before an earlier split's commit left of this region goes first.
            await rm(join(this.#dir, dir), { recursive: true, force: true });
            await this.#destroyStored(dir);
            daughter = await this.#openRegion(next, dir, {
              startKey: row,
              endKey: parent.range.endKey,
              split: {
                cells: parent.cellsFrom(row, 0, readPoint),
                tokensAbove: parent.tokenCeiling,
              },
            });
            await daughter.flush();
            return daughter;
          },
          async () => {
            this.#mastership.check();
            recording = true;
            await this.#store.replace(next);
            recording = false;
          },
        );
        entry.descriptor = next;
        // The old region's storage still holds the moved rows; its next checkpoint drops them.
        parent.flush().catch(() => undefined);
        return next;
      } catch (err) {
        // Its data stays: if the descriptor was recorded after all, the next start finds it.
        await daughter?.close();
        if (!recording) throw err;
        // Whether the descriptor was recorded is unknown when its write failed: the old region
        // must not take writes for rows its next start would ignore. The table closes; a
        // restart serves it as recorded.
        this.#tables.delete(descriptor.name);
        await regions.close();
        throw new LockIOError(
          `The split of table ${descriptor.name} at ${toStringBinary(row)} may or may not be recorded (${(err as Error).message}): the table is closed until the server restarts; no acknowledged write is lost`,
          { cause: err },
        );
      }
    });
  }

  drop(name: unknown): Promise<void> {
    const fleet = this.#fleet;
    if (fleet !== undefined) {
      // Done once the other members closed theirs, or after a lease and two looks (a
      // create of the name while one still serves is refused with NOT_SERVING_REGION, which
      // the client sends again); waited for outside the administrative queue, which their
      // looks may need.
      return this.#serially(() => this.#dropInFleet(name)).then((regions) =>
        fleet.released(regions),
      );
    }
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

  // ---- in a fleet ------------------------------------------------------------------------

  /**
   * `split` in a fleet: the member serving the region splits it (any other refuses with
   * `NOT_SERVING_REGION`, naming the server, where the client sends it again). The daughter is
   * claimed in the fleet for this member before it is made, with an epoch of its own; the commit
   * point records the split in the shared catalog in one transaction that also checks this
   * member still holds both regions and its lease (see `FleetStore.commitSplit`). The daughter
   * is then served here, until the fleet's balance moves it. If the split fails before its
   * commit, the daughter's claim goes back and what it stored is deleted by whoever clears it;
   * if the commit's outcome is unknown, the parent closes here too and is served again, as the
   * catalog then says, by whoever claims it.
   */
  async #splitInFleet(
    entry: TableEntry,
    next: TableDescriptor,
    row: string,
    dir: string,
  ): Promise<TableDescriptor> {
    const fleet = this.#fleet as CatalogFleet;
    const { descriptor, regions } = entry;
    fleet.serving();
    const ranges = regions.ranges();
    const index = ranges.findIndex((r) => r.startKey <= row && (r.endKey === '' || row < r.endKey));
    const range = ranges[index];
    if (range?.region === undefined) throw regions.refusalFor(row);
    // The catalog's regions and the descriptor's are the same list, in key order.
    const parent = TableCatalog.regionNames(descriptor)[index] as string;
    const daughterName = `tables/${dir}`;
    const epoch = await fleet.claimDaughter(daughterName);
    let recording = false;
    let daughter: Region | undefined;
    try {
      await regions.split(
        row,
        async (region, readPoint) => {
          await rm(join(this.#dir, dir), { recursive: true, force: true });
          await this.#destroyStored(dir, epoch);
          daughter = await this.#openRegion(
            next,
            dir,
            {
              startKey: row,
              endKey: region.range.endKey,
              split: {
                cells: region.cellsFrom(row, 0, readPoint),
                tokensAbove: region.tokenCeiling,
              },
            },
            epoch,
          );
          await daughter.flush();
          return daughter;
        },
        async () => {
          fleet.serving();
          recording = true;
          await fleet.commitSplit({
            table: descriptor.name,
            parent,
            daughter: daughterName,
            startKey: range.startKey,
            endKey: range.endKey,
            key: row,
          });
          recording = false;
        },
      );
    } catch (err) {
      await daughter?.close();
      const unknown = recording && !(err instanceof NotServingRegionError);
      if (unknown) {
        // The parent must not take writes for rows that the catalog may now give the daughter.
        await regions.serveElsewhere(descriptor.name, range.startKey, null)?.close();
      }
      await fleet.splitFailed({ parent, daughter: daughterName }, unknown);
      if (
        !unknown &&
        !(err instanceof NotServingRegionError) &&
        !this.#stillServes(regions, range.startKey)
      ) {
        // The region went to another server meanwhile (this one paused past its lease): the
        // client sends the split there.
        throw new NotServingRegionError(
          `The region moved to another server while it was being split (${(err as Error).message}); nothing changed`,
          { cause: err },
        );
      }
      if (!unknown) throw err;
      throw new LockIOError(
        `The split of table ${descriptor.name} at ${toStringBinary(row)} may or may not be recorded (${(err as Error).message}): its region is served again shortly, as the catalog says; no acknowledged write is lost`,
        { cause: err },
      );
    }
    entry.descriptor = {
      ...entry.descriptor,
      splits: checkSplits([...entry.descriptor.splits, row]),
    };
    entry.ownSplits ??= new Set();
    entry.ownSplits.add(row);
    fleet.splitServed(daughterName, descriptor.name, row, epoch);
    fleet.changed();
    return entry.descriptor;
  }

  /**
   * The storage names of every region of `descriptor` (`tables/<directory>`, what the region
   * storage keys them by), first region first.
   */
  static regionNames(descriptor: TableDescriptor): readonly string[] {
    let names = regionNamesOf.get(descriptor);
    if (names === undefined) {
      names = regionDirectories(descriptor).map((dir) => `tables/${dir}`);
      regionNamesOf.set(descriptor, names);
    }
    return names;
  }

  /**
   * The ids of a table's regions, first region first (see `RegionStatus.id`); worked out once
   * per descriptor (a change makes a new one), not at every status or scrape.
   */
  static regionIds(descriptor: TableDescriptor): string[] {
    let ids = regionIdsOf.get(descriptor);
    if (ids === undefined) {
      ids = TableCatalog.regionNames(descriptor).map((name) =>
        createHash('sha256').update(name).digest('hex').slice(0, 16),
      );
      regionIdsOf.set(descriptor, ids);
    }
    return ids;
  }

  /**
   * Reads the shared catalog again and makes this member's tables those it describes: a new
   * table comes with every region served elsewhere, a dropped one goes (the regions served
   * here close: their locks are lost). Resolves with the descriptors read. Reads go out in
   * order on one connection, so a later one sees at least what an earlier one saw; one that
   * comes back after a later one was taken in is not (it would undo what the later one showed).
   */
  async refresh(): Promise<TableDescriptor[]> {
    const fleet = this.#fleet as CatalogFleet;
    const seq = ++this.#reads;
    const descriptors = await fleet.read();
    await this.#serially(async () => {
      if (seq < this.#applied) return;
      this.#applied = seq;
      const named = new Map(descriptors.map((d) => [d.name, d]));
      for (const [name, entry] of [...this.#tables]) {
        const now = named.get(name);
        if (now !== undefined && sameDescriptor(now, entry.descriptor)) continue;
        if (now !== undefined && (await this.#splitElsewhere(entry, now))) continue;
        // Dropped (or dropped and made again under its name): its regions here close.
        this.#tables.delete(name);
        await entry.regions.close();
      }
      for (const descriptor of descriptors) {
        if (!this.#tables.has(descriptor.name)) this.#addElsewhere(descriptor);
      }
    });
    return descriptors;
  }

  /**
   * Takes in `now`, the shared catalog's description of `entry`'s table, where it differs only
   * by splits: those made by other members (their regions are served elsewhere), and none of
   * this member's missing but those no read has shown yet (a read from before them). False
   * where `now` is another table (dropped and made again under the name).
   */
  async #splitElsewhere(entry: TableEntry, now: TableDescriptor): Promise<boolean> {
    const before = entry.descriptor;
    if (!sameDescriptor({ ...now, splits: [] }, { ...before, splits: [] })) return false;
    const own = entry.ownSplits ?? new Set<string>();
    const known = new Set(now.splits);
    if (before.splits.some((key) => !known.has(key) && !own.has(key))) return false;
    for (const key of now.splits) own.delete(key);
    const added = now.splits.filter((key) => !before.splits.includes(key));
    for (const key of added) await entry.regions.splitElsewhere(now.name, key)?.close();
    entry.descriptor = { ...before, splits: checkSplits([...before.splits, ...added]) };
    return true;
  }

  #stillServes(regions: TableRegions, startKey: string): boolean {
    try {
      (this.#fleet as CatalogFleet).serving();
    } catch {
      return false;
    }
    return regions.serves(startKey);
  }

  /** Whether this member serves the region of table `table` that starts at `startKey`. */
  serves(table: string, startKey: string): boolean {
    return this.#tables.get(table)?.regions.serves(startKey) === true;
  }

  #addElsewhere(descriptor: TableDescriptor): void {
    const starts = ['', ...descriptor.splits];
    const slots = starts.map(
      (start, i) => new RegionElsewhere(descriptor.name, start, starts[i + 1] ?? '', null),
    );
    const fleet = this.#fleet as CatalogFleet;
    this.#tables.set(descriptor.name, {
      descriptor,
      regions: new TableRegions(starts, slots, () => fleet.serving()),
    });
  }

  /**
   * Opens the region of table `table` that starts at `startKey` with `epoch` (the fleet claim's,
   * which fences the region's earlier server at its storage) and serves it from now on.
   * False when the table is gone meanwhile (nothing was opened).
   */
  serveRegion(table: string, startKey: string, epoch: number): Promise<boolean> {
    return this.#serially(async () => {
      const entry = this.#tables.get(table);
      if (entry === undefined) return false;
      const { descriptor } = entry;
      const starts = ['', ...descriptor.splits];
      const i = starts.indexOf(startKey);
      if (i < 0) return false;
      const dir = regionDirectories(descriptor)[i] as string;
      const range = { startKey, endKey: starts[i + 1] ?? '' };
      const region = await this.#openRegion(descriptor, dir, range, epoch);
      try {
        await (this.#fleet as CatalogFleet).opened(table, range, region, {
          region: `tables/${dir}`,
          epoch,
        });
      } catch (err) {
        await region.close();
        throw err;
      }
      entry.regions.serve(startKey, region);
      return true;
    });
  }

  /**
   * Stops serving a region here: calls for its rows are refused at once (`NOT_SERVING_REGION`,
   * naming `server` if known), then it closes (its locks are lost, its writes settle first).
   */
  async serveElsewhere(table: string, startKey: string, server: string | null): Promise<void> {
    const entry = this.#tables.get(table);
    if (entry === undefined) return;
    await entry.regions.serveElsewhere(table, startKey, server)?.close();
  }

  /** Deletes what the storage keeps of a region nobody serves (a dropped table's), with `epoch`. */
  async destroyRegion(name: string, epoch: number): Promise<void> {
    const dir = name.startsWith('tables/') ? name.slice('tables/'.length) : name;
    if (dir.includes('/') || dir.includes('\\') || dir === '' || dir.startsWith('.'))
      throw new InvalidArgumentError(`Not a region of this catalog: ${JSON.stringify(name)}`);
    await this.#destroyStored(dir, epoch);
    await rm(join(this.#dir, dir), { recursive: true, force: true });
  }

  async #createInFleet(descriptor: TableDescriptor): Promise<TableDescriptor> {
    const fleet = this.#fleet as CatalogFleet;
    const dirs = regionDirectories(descriptor);
    if (new Set(dirs).size !== dirs.length) {
      throw new InvalidArgumentError(
        'Two split keys would share a region directory (their SHA-256 digests start alike)',
      );
    }
    if ((await fleet.read()).some((d) => d.name === descriptor.name))
      throw new TableError('TABLE_EXISTS', `Table ${descriptor.name} already exists`);
    await fleet.change(TableCatalog.regionNames(descriptor), async (store, epoch) => {
      if ((await store.load()).some((d) => d.name === descriptor.name))
        throw new TableError('TABLE_EXISTS', `Table ${descriptor.name} already exists`);
      // What a dropped table of this name left in the storage goes first (nobody serves it).
      for (const dir of dirs) await this.#destroyStored(dir, epoch);
      await fleet.tableGone(descriptor.name);
      await store.add(descriptor);
    });
    if (!this.#tables.has(descriptor.name)) this.#addElsewhere(descriptor);
    fleet.changed();
    return descriptor;
  }

  /** Forgets the table in the shared catalog; resolves with its regions' storage names. */
  async #dropInFleet(name: unknown): Promise<string[]> {
    const fleet = this.#fleet as CatalogFleet;
    const { descriptor } = this.#tables.get(this.regions(name) && (name as string)) as TableEntry;
    await fleet.change([], async (store) => {
      await store.remove(descriptor.name);
    });
    await fleet.tableGone(descriptor.name).catch(() => undefined);
    const entry = this.#tables.get(descriptor.name);
    this.#tables.delete(descriptor.name);
    await entry?.regions.close();
    fleet.changed();
    return [...TableCatalog.regionNames(descriptor)];
  }

  async #load(): Promise<void> {
    if (this.#fleet !== undefined) {
      for (const descriptor of await this.#fleet.read()) this.#addElsewhere(descriptor);
      return;
    }
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
    const starts = ['', ...descriptor.splits];
    try {
      for (const [i, dir] of regionDirectories(descriptor).entries()) {
        const placement = { startKey: starts[i] as string, endKey: starts[i + 1] ?? '' };
        opened.push(await this.#openRegion(descriptor, dir, placement));
      }
    } catch (err) {
      await Promise.allSettled(opened.map((r) => r.close()));
      throw err;
    }
    return new TableRegions(starts, opened);
  }

  async #openRegion(
    descriptor: TableDescriptor,
    dir: string,
    placement: RegionPlacement,
    epoch = this.#mastership.epoch,
  ): Promise<Region> {
    const { leasePeriodMs, rowLockWaitMs, durability, clock, openStorage } = this.#regionOptions;
    return Region.open(
      {
        families: descriptor.families,
        dir: join(this.#dir, dir),
        durability,
        leasePeriodMs,
        rowLockWaitMs,
        timestampOnArrival: descriptor.timestampOnArrival,
        clock,
        ...(epoch > 0 ? { epoch } : {}),
        ...(openStorage === undefined ? {} : { openStorage }),
      },
      placement,
    );
  }

  /** What a storage keeps outside the table's directory (see `OpenRegionStorage.destroy`). */
  async #destroyStored(dir: string, epoch = this.#mastership.epoch): Promise<void> {
    const destroy = this.#regionOptions.openStorage?.destroy;
    if (destroy === undefined) return;
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
