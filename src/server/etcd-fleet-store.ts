import { randomBytes } from 'node:crypto';
import type { Etcd3, IOptions } from 'etcd3';
import { LockIOError } from '../core/errors.js';
import type { TableDescriptor } from '../rows/table-descriptor.js';
import { describe } from '../store/describe-error.js';
import {
  type EtcdTlsOptions,
  keepAliveAttempt,
  loadEtcd3,
  prefixEnd,
} from '../store/etcd-locker.js';
import type { FleetCoordination, FleetStore, FleetView } from './fleet-store.js';
import type { FleetSplit } from './table-catalog.js';

/** `FleetOptions.etcd`: the fleet's leases and claims in etcd instead of PostgreSQL. */
export interface FleetEtcdOptions {
  /** The members' client URLs, `http://host:port` (or `https://` with `tls`). */
  endpoints: readonly string[];
  /** The keys' prefix (default `locksmith-fleet/<the storage's table prefix>`). */
  prefix?: string | undefined;
  auth?: { username: string; password: string } | undefined;
  /** TLS to the members: file paths or Buffers, read when the options are checked. */
  tls?: EtcdTlsOptions | undefined;
}

/** A member of this process: its etcd lease and the value of its key. */
interface OwnMember {
  lease: string;
  address: string;
}

/**
 * The fleet's leases and claims in etcd (as HBase keeps its region servers' in ZooKeeper); the
 * tables, the catalog and the split's commit stay in PostgreSQL ({@link FleetStore} with
 * `leases: 'etcd'`). Keys under `<prefix>/`:
 *
 * - `members/<id>`: `{"address","leaving"}`, put with the member's etcd lease (its TTL the fleet
 *   lease): the member is live while the key is there. A member whose lease ran out is gone
 *   with its key and every claim; it joins again under a new id.
 * - `regions/<name>`: a region the fleet must serve (no lease).
 * - `claims/<name>`: the id of the member serving it, put with that member's lease, only if
 *   absent (or, for a split's daughter, its own). A claim's epoch is `base + ` the revision
 *   that wrote it: claims of a region only ever get larger epochs, and two never share one.
 * - `epoch-base`: set once, above every epoch the storage had seen then (a fleet that
 *   moved from PostgreSQL leases, whose epochs are the database's µs), so that the storage
 *   accepts the epochs of etcd's revisions.
 *
 * An etcd claim and a PostgreSQL commit share no transaction: a claimer raises the region's
 * epoch in the storage ({@link fence}) before it reads the catalog or the region's lock
 * records, and the split's commit and the lock records are fenced by that row (see
 * `FleetStore.commitSplit`, `FleetStore.lockTables`). The earlier server's writes fail from
 * the moment of the fence; before it, that server had stopped by itself (its deadline comes
 * before etcd's expiry, which counts from when etcd received the keep-alive).
 */
export class EtcdFleetStore implements FleetCoordination {
  readonly leases = 'etcd' as const;
  readonly #pg: FleetStore;
  readonly #client: Etcd3;
  readonly #prefix: string;
  readonly #where: string;
  readonly #requestMs: number;
  readonly #own = new Map<string, OwnMember>();
  #base = 0;
  #closed = false;

  private constructor(pg: FleetStore, client: Etcd3, prefix: string, where: string, ms: number) {
    this.#pg = pg;
    this.#client = client;
    this.#prefix = prefix;
    this.#where = where;
    this.#requestMs = ms;
  }

  /** Connects to PostgreSQL (the tables) and etcd (the leases), and reads the epoch base. */
  static async open(options: {
    database: string;
    tablePrefix?: string | undefined;
    etcd: FleetEtcdOptions;
    /** Limit per etcd request, ms. */
    requestMs: number;
    /** Opens the PostgreSQL part (`FleetStore.open` with `leases: 'etcd'`). */
    openTables: () => Promise<FleetStore>;
  }): Promise<EtcdFleetStore> {
    const { Etcd3 } = await loadEtcd3();
    const { etcd } = options;
    const clientOptions: IOptions = {
      hosts: [...etcd.endpoints],
      dialTimeout: Math.min(options.requestMs, 5_000),
      ...(etcd.auth === undefined ? {} : { auth: etcd.auth }),
      // `checkTls` (the server's option check) read the files into etcd3's credentials.
      ...(etcd.tls === undefined
        ? {}
        : { credentials: etcd.tls as unknown as NonNullable<IOptions['credentials']> }),
    };
    const pg = await options.openTables();
    const client = new Etcd3(clientOptions);
    const prefix = etcd.prefix ?? `locksmith-fleet/${options.tablePrefix ?? 'locksmith'}`;
    const store = new EtcdFleetStore(
      pg,
      client,
      prefix,
      `etcd at ${etcd.endpoints.join(', ')} (${prefix}/)`,
      options.requestMs,
    );
    try {
      store.#base = await store.#readBase();
    } catch (err) {
      await store.close();
      throw err;
    }
    return store;
  }

  #key(kind: 'members' | 'regions' | 'claims', name: string): Buffer {
    return Buffer.from(`${this.#prefix}/${kind}/${name}`);
  }

  #options() {
    return { deadline: Date.now() + this.#requestMs };
  }

  async #etcd<T>(what: string, work: () => Promise<T>): Promise<T> {
    try {
      if (this.#closed) throw new Error('the fleet store is closed');
      return await work();
    } catch (err) {
      if (err instanceof LockIOError) throw err;
      throw new LockIOError(`Fleet on ${this.#where}: ${what} failed: ${describe(err)}`, {
        cause: err,
      });
    }
  }

  /** The epoch base: read, or set once above every epoch the storage has seen. */
  async #readBase(): Promise<number> {
    const key = Buffer.from(`${this.#prefix}/epoch-base`);
    const read = () =>
      this.#etcd('reading the epoch base', async () => {
        const r = await this.#client.kv.range({ key }, this.#options());
        const v = r.kvs[0]?.value.toString();
        return v === undefined ? undefined : Number(v);
      });
    let base = await read();
    if (base === undefined) {
      const above = (await this.#pg.maxEpoch()) + 1;
      await this.#etcd('setting the epoch base', () =>
        this.#client.kv.txn(
          {
            compare: [{ key, target: 'Create', result: 'Equal', create_revision: 0 }],
            success: [{ request_put: { key, value: Buffer.from(String(above)) } }],
            failure: [],
          },
          this.#options(),
        ),
      );
      base = await read();
    }
    if (base === undefined || !Number.isSafeInteger(base) || base < 1) {
      throw new LockIOError(
        `Fleet on ${this.#where}: the key ${key.toString()} holds ${String(base)}, not an epoch base`,
      );
    }
    return base;
  }

  #epochOf(revision: string | number): number {
    return this.#base + Number(revision);
  }

  #memberValue(address: string, leaving: boolean): Buffer {
    return Buffer.from(JSON.stringify({ address, leaving }));
  }

  /** Compares that member `id` of this process is live and not leaving. */
  #taking(id: string) {
    const own = this.#own.get(id);
    return {
      key: this.#key('members', id),
      target: 'Value' as const,
      result: 'Equal' as const,
      // A leaving member's key has leaving: true and no longer matches.
      value: own === undefined ? Buffer.from('\0none') : this.#memberValue(own.address, false),
    };
  }

  async join(address: string, leaseMs: number): Promise<string> {
    return this.#etcd('joining', async () => {
      const granted = await this.#client.leaseClient.leaseGrant(
        { TTL: Math.ceil(leaseMs / 1000) },
        this.#options(),
      );
      if (granted.error !== '' || !(Number(granted.TTL) > 0)) {
        throw new LockIOError(`etcd refused the lease: ${granted.error || `TTL ${granted.TTL}`}`);
      }
      const id = randomBytes(9).toString('base64url');
      await this.#client.kv.put(
        {
          key: this.#key('members', id),
          value: this.#memberValue(address, false),
          lease: granted.ID,
        },
        this.#options(),
      );
      this.#own.set(id, { lease: granted.ID, address });
      return id;
    });
  }

  /**
   * One keep-alive of `id`'s lease, then a linearizable read of its key in the same raft term
   * (a deposed etcd leader may still answer keep-alives: the read proves the term). False when
   * the lease or the key is gone; throws when unconfirmed (the deadline stays as it was).
   */
  async renew(id: string, _leaseMs: number, leaving = false): Promise<boolean> {
    const own = this.#own.get(id);
    if (own === undefined) return false;
    return this.#etcd('renewing the lease', async () => {
      const ka = await keepAliveAttempt(this.#client, own.lease, this.#requestMs);
      if (!(ka.ttl > 0)) {
        this.#own.delete(id);
        return false;
      }
      const key = this.#key('members', id);
      if (leaving) {
        const value = this.#memberValue(own.address, true);
        await this.#client.kv.txn(
          {
            compare: [{ key, target: 'Create', result: 'Greater', create_revision: 0 }],
            success: [{ request_put: { key, value, lease: own.lease } }],
            failure: [],
          },
          this.#options(),
        );
      }
      const read = await this.#client.kv.range({ key }, this.#options());
      if (read.kvs[0] === undefined) {
        this.#own.delete(id);
        return false;
      }
      if (read.header.raft_term !== ka.header.raft_term) {
        throw new LockIOError(
          `raft term changed during the renewal (keep-alive in term ${ka.header.raft_term}, read in ${read.header.raft_term}): not confirmed`,
        );
      }
      return true;
    });
  }

  /** Revokes the member's lease: its key and every claim of it go at once. */
  async leave(id: string): Promise<void> {
    const own = this.#own.get(id);
    this.#own.delete(id);
    if (own === undefined) return;
    await this.#etcd('leaving', () =>
      this.#client.leaseClient.leaseRevoke({ ID: own.lease }, this.#options()),
    );
  }

  async view(): Promise<FleetView> {
    return this.#etcd('reading the fleet', async () => {
      const start = Buffer.from(`${this.#prefix}/`);
      const r = await this.#client.kv.range(
        { key: start, range_end: prefixEnd(start) },
        this.#options(),
      );
      const view: FleetView = { members: [], regions: [] };
      const regions = new Set<string>();
      const claims = new Map<string, { owner: string; epoch: number }>();
      for (const kv of r.kvs) {
        const rest = kv.key.toString().slice(start.length);
        const slash = rest.indexOf('/');
        const kind = rest.slice(0, slash);
        const name = rest.slice(slash + 1);
        if (kind === 'members') {
          let value: { address?: unknown; leaving?: unknown } = {};
          try {
            value = JSON.parse(kv.value.toString());
          } catch {
            // Not ours: shown without an address.
          }
          view.members.push({
            id: name,
            address: typeof value.address === 'string' ? value.address : '',
            joinedMs: Number(kv.create_revision),
            live: true,
            leaving: value.leaving === true,
          });
        } else if (kind === 'regions') {
          regions.add(name);
        } else if (kind === 'claims') {
          claims.set(name, { owner: kv.value.toString(), epoch: this.#epochOf(kv.mod_revision) });
        }
      }
      for (const name of new Set([...regions, ...claims.keys()])) {
        const claim = claims.get(name);
        view.regions.push({ region: name, owner: claim?.owner ?? null, epoch: claim?.epoch ?? 0 });
      }
      return view;
    });
  }

  descriptors(): Promise<TableDescriptor[]> {
    return this.#pg.descriptors();
  }

  /** `base +` the revision of a write of its own: above every epoch issued before. */
  async freshEpoch(): Promise<number> {
    return this.#etcd('reading an epoch', async () => {
      const r = await this.#client.kv.put(
        { key: Buffer.from(`${this.#prefix}/epoch-clock`), value: Buffer.alloc(0) },
        this.#options(),
      );
      return this.#epochOf(r.header.revision);
    });
  }

  async addRegions(names: readonly string[]): Promise<void> {
    await this.#etcd('recording regions', async () => {
      for (const name of names) {
        const key = this.#key('regions', name);
        await this.#client.kv.txn(
          {
            compare: [{ key, target: 'Create', result: 'Equal', create_revision: 0 }],
            success: [{ request_put: { key, value: Buffer.alloc(0) } }],
            failure: [],
          },
          this.#options(),
        );
      }
    });
  }

  async forgetRegions(names: readonly string[]): Promise<void> {
    await this.#etcd('forgetting regions', async () => {
      for (const name of names) {
        await this.#client.kv.txn(
          {
            compare: [
              {
                key: this.#key('claims', name),
                target: 'Create',
                result: 'Equal',
                create_revision: 0,
              },
            ],
            success: [{ request_delete_range: { key: this.#key('regions', name) } }],
            failure: [],
          },
          this.#options(),
        );
      }
    });
  }

  /**
   * Puts the claim of `region` for `id` when `compare` holds (with `id` live and not leaving);
   * the epoch, or `undefined` when refused. A lease etcd no longer has refuses too.
   */
  async #put(
    what: string,
    id: string,
    region: string,
    compare: { key: Buffer; target: 'Create' | 'Value'; result: 'Equal' | 'Greater' }[],
    record: boolean,
  ): Promise<number | undefined> {
    const own = this.#own.get(id);
    if (own === undefined) return undefined;
    return this.#etcd(what, async () => {
      const claim = this.#key('claims', region);
      try {
        const r = await this.#client.kv.txn(
          {
            compare: [this.#taking(id), ...compare] as never,
            success: [
              { request_put: { key: claim, value: Buffer.from(id), lease: own.lease } },
              ...(record
                ? [{ request_put: { key: this.#key('regions', region), value: Buffer.alloc(0) } }]
                : []),
            ],
            failure: [],
          },
          this.#options(),
        );
        return r.succeeded ? this.#epochOf(r.header.revision) : undefined;
      } catch (err) {
        if (/lease not found/i.test(describe(err))) return undefined;
        throw err;
      }
    });
  }

  async claim(id: string, region: string): Promise<number | undefined> {
    return this.#put(
      `claiming region ${region}`,
      id,
      region,
      [
        { key: this.#key('claims', region), target: 'Create', result: 'Equal', create_revision: 0 },
        {
          key: this.#key('regions', region),
          target: 'Create',
          result: 'Greater',
          create_revision: 0,
        },
      ] as never,
      false,
    );
  }

  /** A split's daughter: recorded and claimed if nobody claims it, or claimed again if `id` does. */
  async claimDaughter(id: string, region: string): Promise<number | undefined> {
    const claim = this.#key('claims', region);
    return (
      (await this.#put(
        `claiming region ${region}`,
        id,
        region,
        [{ key: claim, target: 'Create', result: 'Equal', create_revision: 0 }] as never,
        true,
      )) ??
      (await this.#put(
        `claiming region ${region}`,
        id,
        region,
        [{ key: claim, target: 'Value', result: 'Equal', value: Buffer.from(id) }] as never,
        true,
      ))
    );
  }

  commitSplit(
    id: string,
    split: FleetSplit & { parentEpoch: number; daughterEpoch: number },
  ): Promise<{ recorded: TableDescriptor } | { refused: string }> {
    return this.#pg.commitSplit(id, split);
  }

  get lockTables(): FleetStore['lockTables'] {
    return this.#pg.lockTables;
  }

  fence(region: string, epoch: number): Promise<boolean> {
    return this.#pg.fence(region, epoch);
  }

  async release(id: string, region: string, epoch: number): Promise<boolean> {
    return this.#etcd(`giving region ${region} back`, async () => {
      const key = this.#key('claims', region);
      const r = await this.#client.kv.txn(
        {
          compare: [
            { key, target: 'Value', result: 'Equal', value: Buffer.from(id) },
            { key, target: 'Mod', result: 'Equal', mod_revision: epoch - this.#base },
          ] as never,
          success: [{ request_delete_range: { key } }],
          failure: [],
        },
        this.#options(),
      );
      return r.succeeded;
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#client.close();
    } catch {
      // Closed already.
    }
    await this.#pg.close();
  }
}
