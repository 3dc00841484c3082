import type { Clock } from '../core/clock.js';
import { NotServingRegionError } from '../core/errors.js';
import { PostgresCatalogStore } from '../rows/postgres-catalog-store.js';
import type { TableCatalogStore } from '../rows/table-catalog-store.js';
import type { TableDescriptor } from '../rows/table-descriptor.js';
import { describe } from '../store/describe-error.js';
import { EtcdFleetStore, type FleetEtcdOptions } from './etcd-fleet-store.js';
import { assignRegions } from './fleet-assignment.js';
import { FleetLocks, type RegionClaim } from './fleet-locks.js';
import {
  type FleetCoordination,
  type FleetMemberRow,
  FleetStore,
  type FleetView,
} from './fleet-store.js';
import { type CatalogFleet, type FleetSplit, TableCatalog } from './table-catalog.js';

/** `LocksmithServer.listen`'s `fleet` option: serve a share of the tables of a PostgreSQL storage. */
export interface FleetOptions {
  /** The storage's database (`postgres://…`): the tables, the catalog and the fleet's leases. */
  database: string;
  /** The storage's table prefix (default `locksmith`). */
  tablePrefix?: string | undefined;
  /** The member's lease, ms (default 10 000): a dead member's regions are taken over after it. */
  leaseMs?: number | undefined;
  /** How often the member renews its lease and looks at the fleet, ms (default a third of the lease). */
  renewMs?: number | undefined;
  /** `host:port` clients and other members use to reach this server (default its listening address). */
  advertise?: string | undefined;
  /**
   * The members' leases and the regions' claims in etcd instead of the storage's database
   * (`serve --fleet --ha etcd`); the lease is then a whole number of seconds.
   */
  etcd?: FleetEtcdOptions | undefined;
}

/** The fleet lease by default, ms: half the default session lease (see `FleetRole.leaseMs`). */
export const DEFAULT_FLEET_LEASE_MS = 5_000;

/** The `fleet` part of `status()`. */
export interface FleetStatus {
  /** This member's id (new at every start), or `null` while it is not a member. */
  id: string | null;
  address: string;
  leaseMs: number;
  /** The members as the last look at the fleet saw them, with how many regions each serves. */
  members: { id: string; address: string; live: boolean; leaving: boolean; regions: number }[];
  /** Regions of the fleet, and how many of them nobody serves now. */
  regions: number;
  unserved: number;
  /** Regions taken over or handed over by this member (newest last, at most 100). */
  moves: { at: number; region: string; change: 'claimed' | 'handed-over' | 'lost'; why: string }[];
  /**
   * Row locks put back here for holders that have not adopted them yet (see `FleetLocks`); 0
   * without lock records (`sessions: 'memory'`).
   */
  locksAwaitingAdoption: number;
}

const MAX_MOVES = 100;
/** The longest time between two looks at the fleet (see {@link FleetRole.lookMs}). */
const LOOK_MS = 1000;

/** A region this member serves: its table, first row and the claim's epoch. */
interface Served {
  table: string;
  startKey: string;
  epoch: number;
}

/**
 * A server's part in a fleet (HBase's region server, without an HMaster): the member holds a
 * lease in the storage's database ({@link FleetStore}), renewed every `renewMs`, and every
 * `lookMs` (a second at most) reads the catalog and the fleet, and computes the same even assignment of regions to live members
 * as every other member does ({@link assignRegions}). It claims the regions assigned to it that
 * nobody serves (their server left, or its lease ran out), opening each with the claim's epoch
 * (which fences the previous server at the storage), and hands over those assigned to another
 * live member (closing them first, then giving the claim back). No member coordinates: one that
 * dies stops nothing but its own regions, which the others take over once its lease has run out.
 *
 * Every call to a region served here first checks that the lease is certain: a member that
 * could not renew within its lease (a stalled process, a lost database) refuses all calls from
 * the moment its lease may have run out, before any other member can claim its regions (the
 * database's clock decides the expiry, later than this member's deadline), and closes its
 * regions; it joins again as a new member.
 */
export class FleetRole {
  readonly address: string;
  readonly leaseMs: number;
  readonly renewMs: number;
  /**
   * How often it looks at the fleet: every renewal, and at least every second, so that a
   * region handed over or a server joining waits a second at most, whatever the lease.
   */
  readonly lookMs: number;
  readonly #options: FleetOptions;
  readonly #store: FleetCoordination;
  /** The row locks of the regions served here, recorded (durable sessions); absent: in memory. */
  readonly locks: FleetLocks | undefined;
  readonly #clock: Clock;
  #catalog: TableCatalog | undefined;
  #id: string | null = null;
  /** Until when (clock.monotonic()) the lease is certain. */
  #deadline = 0;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #timer: NodeJS.Timeout | undefined;
  #ticking: Promise<void> | undefined;
  #again = false;
  /** The renewals run on their own: a slow look at the fleet never costs the lease. */
  #renewTimer: NodeJS.Timeout | undefined;
  #renewing: Promise<void> | undefined;
  readonly #served = new Map<string, Served>();
  /** Daughters of live splits under way here, claimed but not described by any table yet. */
  readonly #pending = new Map<string, number>();
  /** Counts the steps of live splits here: a look that overlapped one judges no claim of it. */
  #splitSteps = 0;
  /** Per member id: the first look that saw it live (moves go only to members seen twice). */
  readonly #seen = new Map<string, number>();
  #looks = 0;
  #view: FleetView = { members: [], regions: [] };
  readonly #moves: FleetStatus['moves'] = [];
  readonly #moveCounts = { claimed: 0, 'handed-over': 0, lost: 0 };
  #closed = false;

  private constructor(
    store: FleetCoordination,
    options: FleetOptions,
    address: string,
    clock: Clock,
    keepLocks: boolean,
  ) {
    this.#store = store;
    this.locks = keepLocks
      ? new FleetLocks({
          ...store.lockTables,
          member: () => this.#id,
          claimOf: (table, row) => this.#claimOf(table, row),
        })
      : undefined;
    this.#options = options;
    this.#clock = clock;
    this.address = options.advertise ?? address;
    // Half the default session lease: a lock held through a server that dies is taken over
    // (its region reopened elsewhere) while its client still counts its session alive.
    this.leaseMs = options.leaseMs ?? DEFAULT_FLEET_LEASE_MS;
    this.renewMs = options.renewMs ?? Math.floor(this.leaseMs / 3);
    this.lookMs = Math.min(this.renewMs, LOOK_MS);
  }

  /** Connects to the fleet's database and joins; regions come once the catalog is attached. */
  static async join(
    options: FleetOptions,
    address: string,
    clock: Clock,
    keepLocks: boolean,
  ): Promise<FleetRole> {
    const tables = { database: options.database, tablePrefix: options.tablePrefix };
    const store: FleetCoordination =
      options.etcd === undefined
        ? await FleetStore.open(tables)
        : await EtcdFleetStore.open({
            ...tables,
            etcd: options.etcd,
            requestMs: options.leaseMs ?? DEFAULT_FLEET_LEASE_MS,
            openTables: () => FleetStore.open({ ...tables, leases: 'etcd' }),
          });
    const role = new FleetRole(store, options, address, clock, keepLocks);
    try {
      await role.#join();
    } catch (err) {
      await store.close();
      throw err;
    }
    return role;
  }

  /** What the member's catalog needs (see {@link CatalogFleet}). */
  readonly catalogHooks: CatalogFleet = {
    read: () => this.#readDescriptors(),
    change: (regions, work) => this.#change(regions, work),
    serving: () => this.#checkServing(),
    changed: () => this.#poke(),
    released: (regions) => this.#released(regions),
    claimDaughter: (region) => this.#claimDaughter(region),
    commitSplit: (split) => this.#commitSplit(split),
    splitServed: (region, table, startKey, epoch) => {
      this.#splitSteps++;
      this.#pending.delete(region);
      this.#served.set(region, { table, startKey, epoch });
      this.#move(region, 'claimed', 'split off a region served here');
    },
    splitFailed: (regions, unknown) => this.#splitFailed(regions, unknown),
    opened: async (table, range, region, claim) => {
      await this.locks?.restore(table, range, region, claim);
    },
    tableGone: async (name) => {
      await this.locks?.tableGone(name);
    },
  };

  /** The claim a lock record of `row` of `table` is fenced by (see `FleetLocks`). */
  #claimOf(table: string, row: string): RegionClaim | undefined {
    let descriptor: TableDescriptor;
    try {
      descriptor = (this.#catalog as TableCatalog).describe(table);
    } catch {
      return undefined;
    }
    const { splits } = descriptor;
    let lo = 0;
    let hi = splits.length;
    // The region of `row`: the number of split keys <= row.
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((splits[mid] as string) <= row) lo = mid + 1;
      else hi = mid;
    }
    const region = TableCatalog.regionNames(descriptor)[lo] as string;
    const epoch = this.#served.get(region)?.epoch ?? this.#pending.get(region);
    return epoch === undefined ? undefined : { region, epoch };
  }

  /** Starts serving regions of `catalog` (opened with {@link catalogHooks}). */
  attach(catalog: TableCatalog): void {
    this.#catalog = catalog;
    this.#scheduleRenewal();
    this.#poke();
  }

  get id(): string | null {
    return this.#id;
  }

  status(): FleetStatus {
    const counts = new Map<string, number>();
    for (const r of this.#view.regions)
      if (r.owner !== null) counts.set(r.owner, (counts.get(r.owner) ?? 0) + 1);
    const live = new Set(this.#view.members.filter((m) => m.live).map((m) => m.id));
    return {
      id: this.#id,
      address: this.address,
      leaseMs: this.leaseMs,
      members: this.#view.members.map((m) => ({
        id: m.id,
        address: m.address,
        live: m.live,
        leaving: m.leaving,
        regions: m.live ? (counts.get(m.id) ?? 0) : 0,
      })),
      regions: this.#view.regions.length,
      unserved: this.#view.regions.filter((r) => r.owner === null || !live.has(r.owner)).length,
      moves: [...this.#moves],
      locksAwaitingAdoption: this.locks?.orphans ?? 0,
    };
  }

  /**
   * Leaves the fleet (SIGTERM): takes no more regions, closes those it serves (their writes
   * settle) and gives their claims back, so that the others take them over at their next look,
   * without waiting for the lease to run out. Idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#timer);
    clearTimeout(this.#renewTimer);
    clearTimeout(this.#deadlineTimer);
    await this.#renewing?.catch(() => undefined);
    await this.#ticking?.catch(() => undefined);
    const id = this.#id;
    if (id !== null) await this.#store.renew(id, this.leaseMs, true).catch(() => false);
    await this.#dropAll(null, 'the server is closing');
    if (id !== null) await this.#store.leave(id).catch(() => undefined);
    this.#id = null;
    await this.locks?.close();
    await this.#store.close();
  }

  // ---- the lease ---------------------------------------------------------------------------

  async #join(): Promise<void> {
    const sent = this.#clock.monotonic();
    this.#id = await this.#store.join(this.address, this.leaseMs);
    this.#confirmed(sent);
  }

  /**
   * The lease was set or renewed by a statement sent at `sent`: the database's expiry is at least
   * `leaseMs` after that. The margin covers a clock running a little faster here than there.
   */
  #confirmed(sent: number): void {
    this.#deadline = sent + this.leaseMs - Math.max(50, Math.floor(this.leaseMs / 10));
    clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = setTimeout(
      () => {
        if (this.#clock.monotonic() >= this.#deadline)
          this.#lose('the fleet lease was not renewed in time');
      },
      Math.max(0, this.#deadline - this.#clock.monotonic()),
    );
    this.#deadlineTimer.unref();
  }

  #checkServing(): void {
    if (this.#id === null || this.#clock.monotonic() >= this.#deadline) {
      throw new NotServingRegionError(
        'This server is not sure of its fleet lease just now: its regions may be served elsewhere soon; try again shortly',
      );
    }
  }

  /** The lease may have run out: every region here stops at once; a new membership follows. */
  #lose(why: string): void {
    if (this.#id === null) return;
    this.#id = null;
    void this.#dropAll(null, why);
    this.#poke();
  }

  async #dropAll(server: string | null, why: string): Promise<void> {
    const catalog = this.#catalog;
    const served = [...this.#served];
    this.#served.clear();
    await Promise.allSettled(
      served.map(async ([name, s]) => {
        this.#move(name, 'lost', why);
        await catalog?.serveElsewhere(s.table, s.startKey, server);
      }),
    );
  }

  // ---- the look at the fleet ---------------------------------------------------------------

  #poke(): void {
    if (this.#closed) return;
    if (this.#ticking !== undefined) {
      this.#again = true;
      return;
    }
    clearTimeout(this.#timer);
    this.#ticking = this.#tick()
      .catch((err: unknown) => {
        process.emitWarning(`locksmith fleet: ${describe(err)}`);
      })
      .finally(() => {
        this.#ticking = undefined;
        if (this.#closed) return;
        if (this.#again) {
          this.#again = false;
          this.#poke();
          return;
        }
        this.#timer = setTimeout(() => this.#poke(), this.lookMs);
        this.#timer.unref();
      });
  }

  #scheduleRenewal(): void {
    if (this.#closed) return;
    this.#renewTimer = setTimeout(() => {
      this.#renewing = this.#renew()
        .catch((err: unknown) => {
          // Unknown: the lease holds until its deadline, and the next renewal tries again.
          process.emitWarning(`locksmith fleet: lease renewal failed: ${describe(err)}`);
        })
        .finally(() => {
          this.#renewing = undefined;
          this.#scheduleRenewal();
        });
    }, this.renewMs);
    this.#renewTimer.unref();
  }

  async #renew(): Promise<void> {
    const id = this.#id;
    if (id === null) {
      await this.#join();
      this.#poke();
      return;
    }
    const sent = this.#clock.monotonic();
    if (await this.#store.renew(id, this.leaseMs)) {
      if (this.#id === id) this.#confirmed(sent);
    } else if (this.#id === id) {
      this.#lose('the fleet lease ran out before it was renewed');
    }
  }

  async #tick(): Promise<void> {
    const catalog = this.#catalog;
    if (catalog === undefined || this.#id === null) return;
    const splitSteps = this.#splitSteps;
    const descriptors = await catalog.refresh();
    const where = new Map<string, { table: string; startKey: string }>();
    for (const d of descriptors) {
      const names = TableCatalog.regionNames(d);
      const starts = ['', ...d.splits];
      names.forEach((name, i) => {
        where.set(name, { table: d.name, startKey: starts[i] as string });
      });
    }
    let view = await this.#store.view();
    const recorded = new Set(view.regions.map((r) => r.region));
    const missing = [...where.keys()].filter((name) => !recorded.has(name));
    if (missing.length > 0) {
      await this.#store.addRegions(missing);
      view = await this.#store.view();
    }
    this.#view = view;
    this.#looks++;
    const me = this.#id as string;
    const live = new Map<string, FleetMemberRow>();
    for (const m of view.members) {
      if (!m.live) {
        this.#seen.delete(m.id);
        continue;
      }
      live.set(m.id, m);
      if (!this.#seen.has(m.id)) this.#seen.set(m.id, this.#looks);
    }
    const claims = new Map(view.regions.map((r) => [r.region, r]));
    // A live split ran here during this look: what it read may be from before or after the
    // split's commit, so it judges none of this member's claims (the next look does).
    const judge = this.#pending.size === 0 && this.#splitSteps === splitSteps;
    // A region this member serves that the fleet says is someone else's: lost (never happens
    // while the lease holds; the storage fences it anyway).
    for (const [name, s] of judge ? [...this.#served] : []) {
      const claim = claims.get(name);
      if (claim?.owner !== me || claim.epoch !== s.epoch) {
        this.#served.delete(name);
        this.#move(name, 'lost', 'its claim is no longer this server’s');
        await catalog.serveElsewhere(s.table, s.startKey, null);
      } else if (where.has(name) && !catalog.serves(s.table, s.startKey)) {
        // The catalog closed it (a split whose outcome was unknown): the claim goes.
        this.#served.delete(name);
        await this.#store.release(me, name, s.epoch);
        this.#move(name, 'lost', 'it closed here');
        claim.owner = null;
      } else if (!where.has(name)) {
        // Its table was dropped: closed already by the catalog's refresh; the claim goes.
        this.#served.delete(name);
        await catalog.serveElsewhere(s.table, s.startKey, null);
        await this.#store.release(me, name, s.epoch);
        this.#move(name, 'handed-over', 'its table was dropped');
        claim.owner = null;
      }
    }
    // Claims of this member it does not serve (a release that failed): given back.
    for (const claim of judge ? view.regions : []) {
      if (claim.owner !== me || this.#served.has(claim.region) || this.#pending.has(claim.region))
        continue;
      await this.#store.release(me, claim.region, claim.epoch);
      claim.owner = null;
    }
    const takers = [...live.values()].filter((m) => !m.leaving);
    const owners = new Map(
      [...where.keys()].map((name) => {
        const owner = claims.get(name)?.owner ?? null;
        return [name, owner !== null && live.has(owner) ? owner : null];
      }),
    );
    const plan = assignRegions([...where.keys()], takers, owners);
    for (const [name, target] of plan) {
      const { table, startKey } = where.get(name) as { table: string; startKey: string };
      const owner = owners.get(name) ?? null;
      if (target === me && owner === null) {
        await this.#claim(name, table, startKey);
      } else if (owner === me && target !== me) {
        // Handed over only to a member seen live at an earlier look too: not one that flickers.
        const since = this.#seen.get(target);
        if (since !== undefined && since < this.#looks) {
          await this.#handOver(name, live.get(target)?.address ?? null);
        }
      } else if (owner !== me) {
        await catalog.serveElsewhere(
          table,
          startKey,
          owner === null ? null : (live.get(owner)?.address ?? null),
        );
      }
    }
    // Regions of dropped tables: whoever gets there first deletes what the storage keeps.
    for (const claim of judge ? view.regions : []) {
      if (where.has(claim.region) || this.#pending.has(claim.region)) continue;
      if (claim.owner !== null && live.has(claim.owner) && claim.owner !== me) continue;
      await this.#clearDropped(claim.region);
    }
  }

  async #claim(name: string, table: string, startKey: string): Promise<void> {
    const me = this.#id as string;
    const epoch = await this.#store.claim(me, name);
    if (epoch === undefined) return;
    try {
      // Leases in etcd: the storage's row of the region fenced first, so that a split its last
      // owner commits from now on is refused, and one committed before is read below.
      if (!(await this.#store.fence(name, epoch))) {
        await this.#store.release(me, name, epoch);
        return;
      }
      // The catalog read again now that the region is claimed: a split committed before the
      // claim (by its last owner) is in it, and nobody else can split this region now.
      await (this.#catalog as TableCatalog).refresh();
      if (!(await (this.#catalog as TableCatalog).serveRegion(table, startKey, epoch))) {
        await this.#store.release(me, name, epoch);
        return;
      }
    } catch (err) {
      // It could not open here (its storage refused, the database went away): another try later.
      await this.#store.release(me, name, epoch).catch(() => undefined);
      this.#move(name, 'lost', `it did not open: ${describe(err)}`);
      return;
    }
    if (this.#id !== me) {
      // The lease was lost while it opened.
      await (this.#catalog as TableCatalog).serveElsewhere(table, startKey, null);
      return;
    }
    this.#served.set(name, { table, startKey, epoch });
    this.#move(name, 'claimed', 'assigned to this server');
  }

  async #handOver(name: string, to: string | null): Promise<void> {
    const s = this.#served.get(name);
    if (s === undefined) return;
    this.#served.delete(name);
    await (this.#catalog as TableCatalog).serveElsewhere(s.table, s.startKey, to);
    await this.#store.release(this.#id as string, name, s.epoch);
    this.#move(name, 'handed-over', `the fleet's balance gives it to ${to ?? 'another server'}`);
  }

  /**
   * Deletes what the storage keeps of a region no table describes. The catalog is read again
   * once the region is claimed (nobody else can open it then): a table of that name created
   * since this look began keeps its region.
   */
  async #clearDropped(name: string): Promise<void> {
    const me = this.#id as string;
    const epoch = await this.#store.claim(me, name);
    if (epoch === undefined) return;
    let dropped = false;
    try {
      const described = (await this.#readDescriptors()).some((d) =>
        TableCatalog.regionNames(d).includes(name),
      );
      if (!described) {
        await (this.#catalog as TableCatalog).destroyRegion(name, epoch);
        dropped = true;
      }
    } finally {
      await this.#store.release(me, name, epoch);
    }
    if (dropped) await this.#store.forgetRegions([name]);
  }

  /** Regions claimed, handed over and lost since this server started (for /metrics). */
  moveCounts(): { claimed: number; 'handed-over': number; lost: number } {
    return { ...this.#moveCounts };
  }

  #move(region: string, change: FleetStatus['moves'][number]['change'], why: string): void {
    this.#moveCounts[change]++;
    this.#moves.push({ at: Date.now(), region, change, why });
    if (this.#moves.length > MAX_MOVES) this.#moves.shift();
  }

  // ---- live splits -------------------------------------------------------------------------

  async #claimDaughter(region: string): Promise<number> {
    this.#checkServing();
    const epoch = await this.#store.claimDaughter(this.#id as string, region);
    if (epoch === undefined) {
      throw new NotServingRegionError(
        `Region ${region} is still being cleared after an earlier split that did not commit: try again shortly`,
      );
    }
    this.#splitSteps++;
    this.#pending.set(region, epoch);
    return epoch;
  }

  /** The split's commit point (see `FleetStore.commitSplit`); a refusal is `NOT_SERVING_REGION`. */
  async #commitSplit(split: FleetSplit): Promise<void> {
    this.#checkServing();
    const me = this.#id as string;
    const parent = this.#served.get(split.parent);
    const daughterEpoch = this.#pending.get(split.daughter);
    if (parent === undefined || daughterEpoch === undefined) {
      throw new NotServingRegionError(`Region ${split.parent} is no longer served by this server`);
    }
    const out = await this.#store.commitSplit(me, {
      ...split,
      parentEpoch: parent.epoch,
      daughterEpoch,
    });
    if ('refused' in out) {
      throw new NotServingRegionError(
        `The split of table ${split.table} was refused: ${out.refused}; nothing changed`,
      );
    }
  }

  /**
   * A split that did not commit (or may have: `unknown`): the daughter's claim goes back; with
   * an unknown outcome the parent, closed by the catalog, goes back too, and whoever claims it
   * next opens it as the catalog then describes it.
   */
  async #splitFailed(
    regions: { parent: string; daughter: string },
    unknown: boolean,
  ): Promise<void> {
    this.#splitSteps++;
    const me = this.#id;
    const daughterEpoch = this.#pending.get(regions.daughter);
    this.#pending.delete(regions.daughter);
    const parent = unknown ? this.#served.get(regions.parent) : undefined;
    if (parent !== undefined) {
      this.#served.delete(regions.parent);
      this.#move(regions.parent, 'lost', 'its split may or may not have been recorded');
    }
    if (me === null) return;
    // A release that fails is retried by the next look (a claim of this member it does not serve).
    if (daughterEpoch !== undefined)
      await this.#store.release(me, regions.daughter, daughterEpoch).catch(() => false);
    if (parent !== undefined)
      await this.#store.release(me, regions.parent, parent.epoch).catch(() => false);
    this.#poke();
  }

  // ---- the shared catalog ----------------------------------------------------------------------

  async #released(regions: readonly string[]): Promise<void> {
    const until = this.#clock.monotonic() + this.leaseMs + 2 * this.lookMs;
    const names = new Set(regions);
    while (this.#clock.monotonic() < until && !this.#closed) {
      const view = await this.#store.view();
      const live = new Set(view.members.filter((m) => m.live).map((m) => m.id));
      if (!view.regions.some((r) => names.has(r.region) && r.owner !== null && live.has(r.owner)))
        return;
      await new Promise((resolve) => setTimeout(resolve, Math.min(50, this.lookMs)));
    }
  }

  #readDescriptors(): Promise<TableDescriptor[]> {
    return this.#store.descriptors();
  }

  /**
   * One administrative change: refused while a region it concerns is served (a table of that
   * name was dropped and its regions are still closing), else run on the catalog claimed with
   * a fresh epoch, which is also above every region's, so that it may delete a dropped table's
   * leftovers. Its regions are recorded for the fleet to serve.
   */
  async #change<T>(
    regions: readonly string[],
    work: (store: TableCatalogStore, epoch: number) => Promise<T>,
  ): Promise<T> {
    this.#checkServing();
    const view = await this.#store.view();
    const live = new Set(view.members.filter((m) => m.live).map((m) => m.id));
    const busy = view.regions.find(
      (r) => regions.includes(r.region) && r.owner !== null && live.has(r.owner),
    );
    if (busy !== undefined) {
      throw new NotServingRegionError(
        `Region ${busy.region} is still served from before (a table of that name was dropped a moment ago): try again shortly`,
      );
    }
    const epoch = await this.#store.freshEpoch();
    const store = await PostgresCatalogStore.open({
      database: this.#options.database,
      tablePrefix: this.#options.tablePrefix,
      epoch,
      fleet: true,
    });
    try {
      const out = await work(store, epoch);
      await this.#store.addRegions(regions);
      return out;
    } finally {
      await store.close();
    }
  }
}
