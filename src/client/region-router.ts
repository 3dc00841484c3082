import { LockLostError, NotServingRegionError } from '../core/errors.js';
import type { RegionMap, RegionMapEntry } from '../wire/calls.js';
import type { HeldLocks } from './held-locks.js';
import type { RemoteRowLock } from './remote-row-lock.js';
import type { TableClient } from './remote-table.js';

/** A server of a fleet the client talks to beside the one it connected to. */
export interface FleetMember {
  readonly tables: TableClient;
  close(): Promise<void>;
}

/** Where a row goes: the client of its region's server, and where that region ends. */
export interface Route {
  readonly client: TableClient;
  /** The region's end (`''`: the table's end); `undefined` while no map is known (one server). */
  readonly endKey: string | undefined;
}

/**
 * Tries of a scan or batch at a region that moves before it fails with the last
 * `NOT_SERVING_REGION` (a single-row call tries for its call timeout instead).
 */
export const MAX_ROUTE_TRIES = 16;
/** Between tries where no server serves the region yet (its server died; the fleet takes it over). */
const RETRY_MIN_MS = 50;
const RETRY_MAX_MS = 1000;

/**
 * A client's routing of a table's rows to the servers of a fleet (HBase's region locator):
 * until a server refuses a call with `NOT_SERVING_REGION`, every call goes to the server the
 * client connected to (a single server, or master/slave, never pays for routing). After one,
 * the table's region map is asked of that server (`regionMap`), cached, and each call goes to
 * its row's region's server, over a session of its own there (opened at first use). A
 * `NOT_SERVING_REGION` means nothing of the call was applied (the server refuses before it
 * applies anything), so a call is sent again after the map is read again (from any server the
 * client is connected to), until the call's timeout (a scan or batch: {@link MAX_ROUTE_TRIES}
 * tries); a region whose server cannot be reached is refused so here, before anything is sent.
 * The tries are spaced out, up to a second apart, while a region waits to be taken over.
 */
export class RegionRouter {
  readonly #home: TableClient;
  readonly #open: (address: string) => Promise<FleetMember>;
  readonly #maps = new Map<string, RegionMap>();
  readonly #reading = new Map<string, Promise<void>>();
  readonly #members = new Map<string, Promise<FleetMember>>();
  /** The members whose session is open, for finding a lock's session without waiting. */
  readonly #open_ = new Map<string, FleetMember>();
  /** Locks moving to their region's next server, by id (see {@link relocate}). */
  readonly #relocating = new Map<string, Promise<TableClient | undefined>>();
  #closed = false;

  constructor(home: TableClient, open: (address: string) => Promise<FleetMember>) {
    this.#home = home;
    this.#open = open;
  }

  /**
   * The route of `row` (latin1) of `table` (the first region for no row): at once where it is
   * known (no map yet, or a server with a session open), so that a call goes out in the order
   * its caller made it (an unlock never overtakes the put made before it); a promise only while
   * a session on the region's server opens. Throws `NOT_SERVING_REGION` where nobody serves it.
   */
  route(table: string, row: string | undefined): Route | Promise<Route> {
    const map = this.#maps.get(table);
    if (map === undefined) return { client: this.#home, endKey: undefined };
    const entry = entryOf(map.regions, row ?? '');
    if (entry.server === null) {
      throw new NotServingRegionError(
        `No server of the fleet serves the region of this row of table ${table} just now`,
      );
    }
    const client = this.#clientOf(map, entry.server);
    return client instanceof Promise
      ? client.then((c) => ({ client: c, endKey: entry.endKey }))
      : { client, endKey: entry.endKey };
  }

  /**
   * Runs `call` on the route of `row`, sending it again after a `NOT_SERVING_REGION` (the map
   * read again first), as the class says.
   */
  run<T>(
    table: string,
    row: string | undefined,
    call: (route: Route) => Promise<T>,
    signal?: AbortSignal,
  ): Promise<T> {
    const deadline = this.#home.now() + this.#home.callTimeoutMs;
    const again = (err: unknown, attempt: number): Promise<T> => {
      if (!(err instanceof NotServingRegionError) || this.#closed || this.#home.now() >= deadline)
        return Promise.reject(err);
      if (signal?.aborted) return Promise.reject(signal.reason);
      return this.refresh(table, attempt).then(() =>
        this.#attempt(table, row, call).catch((e: unknown) => again(e, attempt + 1)),
      );
    };
    return this.#attempt(table, row, call).catch((err: unknown) => again(err, 1));
  }

  /** One try: the call made in this turn where its route is known. */
  #attempt<T>(
    table: string,
    row: string | undefined,
    call: (route: Route) => Promise<T>,
  ): Promise<T> {
    try {
      const route = this.route(table, row);
      return route instanceof Promise ? route.then(call) : call(route);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * Reads `table`'s map again (one read at a time per table, shared); after the first try of a
   * call, waits a little first, longer at each try, so that a region being taken over is not
   * asked for in a tight loop.
   */
  async refresh(table: string, attempt = 1): Promise<void> {
    if (attempt > 1) {
      const ms = Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** (attempt - 2));
      await new Promise((resolve) => setTimeout(resolve, ms * (0.5 + Math.random() / 2)));
    }
    let reading = this.#reading.get(table);
    if (reading === undefined) {
      reading = (async () => {
        try {
          // Any server answers for the whole map: the first one connected now.
          const asked = this.clients().find((c) => c.connected) ?? this.#home;
          this.#maps.set(table, await asked.call('regionMap', [table]));
          this.#forgetGone();
        } finally {
          this.#reading.delete(table);
        }
      })();
      this.#reading.set(table, reading);
    }
    await reading;
  }

  /** Whether the client routes by region (it met a fleet): a dropped connection then moves locks. */
  get routing(): boolean {
    return this.#maps.size > 0;
  }

  /**
   * Moves `lock` (held by `from`'s session, marked moving) to the server its region has now,
   * where that server put it back from the fleet's records: the server's map is read until it
   * names a server for the region, which is asked to give the lock to this client's session
   * there (`adoptLock`, proving the holding with the id of `from`'s session). Same handle,
   * same token; it then belongs to that server's client. The lock is lost when that server does
   * not hold it for this client (released, expired, its table dropped), or when the session
   * that held it is past its lease before it is adopted. One relocation per lock at a time;
   * `unlock`: the handle was closed meanwhile, and the lock is released once adopted.
   */
  relocate(lock: RemoteRowLock, from: HeldLocks, unlock: boolean): Promise<void> {
    let running = this.#relocating.get(lock.lockId);
    if (running === undefined) {
      running = this.#relocation(lock, from).finally(() => {
        this.#relocating.delete(lock.lockId);
      });
      this.#relocating.set(lock.lockId, running);
    }
    return running.then(async (at) => {
      if (unlock && at !== undefined && lock.closed)
        await at.call('unlockRow', [lock.table, lock.lockId]).catch(() => undefined);
    });
  }

  /** Resolves with the client whose session adopted the lock; undefined if it did not move. */
  async #relocation(lock: RemoteRowLock, from: HeldLocks): Promise<TableClient | undefined> {
    const row = lock.row.toString('latin1');
    for (let attempt = 1; !this.#closed; attempt++) {
      if (!lock.moving || lock.lostReason !== undefined) return undefined;
      const holder = lock.sessionId;
      if (holder === undefined || this.#home.now() >= lock.validUntil) {
        lock.lose(
          new LockLostError(
            `${lock.resource}: its region moved, and its new server did not take it over within the session lease of the server that held it`,
            { code: 'SESSION_EXPIRED' },
          ),
        );
        return undefined;
      }
      try {
        await this.refresh(lock.table, attempt);
        if (!lock.moving) return undefined;
        const route = await this.route(lock.table, row);
        const sentAt = route.client.now();
        await route.client.call('adoptLock', [lock.table, row, lock.lockId, holder]);
        if (!lock.moving) return undefined;
        from.handOver(lock, route.client.locks);
        lock.renewedAt(sentAt);
        return route.client;
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        if (code === 'UNKNOWN_ROW_LOCK' || code === 'TABLE_NOT_FOUND') {
          lock.lose(
            new LockLostError(
              `${lock.resource}: its region moved, and its new server does not hold it (${(err as Error).message})`,
              { code: 'LOCK_LOST', cause: err },
            ),
          );
          return undefined;
        }
        // Not served yet, or unreachable: the map is read again, a little later each time.
      }
    }
    return undefined;
  }

  /**
   * A `lockRow` or `tryLockRow` of `row` failed without an answer from its server, which went
   * away (`holder`: the session it was sent on). The server may have granted it, and the
   * region's next server then holds it for `holder`: it is adopted there and released at once,
   * so the row is not held for nobody until `holder`'s lease runs out. Nothing is done where a
   * handle of this client is on the row (its own relocation decides), and only a lock put back
   * for `holder` can be taken (`adoptLock` without an id takes no lock a session holds).
   */
  reclaim(table: string, row: string, holder: { id: string; leaseMs: number }): void {
    if (!this.routing) return;
    const deadline = this.#home.now() + holder.leaseMs;
    const onRow = () => this.clients().some((c) => c.locks.holdsRow(table, row));
    (async () => {
      for (let attempt = 1; !this.#closed && this.#home.now() < deadline; attempt++) {
        if (onRow()) return;
        try {
          await this.refresh(table, attempt);
          const route = await this.route(table, row);
          if (onRow()) return;
          const grant = await route.client.call('adoptLock', [table, row, null, holder.id]);
          await route.client.call('unlockRow', [table, grant.lockId]);
          return;
        } catch (err) {
          const code = (err as { code?: unknown }).code;
          if (code === 'UNKNOWN_ROW_LOCK' || code === 'TABLE_NOT_FOUND') return;
        }
      }
    })().catch(() => undefined);
  }

  /** The handle of lock `lockId` and the session holding it, if any client has it. */
  handleOf(lockId: string): { lock: RemoteRowLock; from: HeldLocks } | undefined {
    for (const c of this.clients()) {
      const lock = c.locks.get(lockId);
      if (lock !== undefined) return { lock, from: c.locks };
    }
    return undefined;
  }

  /** The client whose session holds lock `lockId` (the home one if none does). */
  holderOf(lockId: string): TableClient {
    if (this.#home.locks.get(lockId) !== undefined) return this.#home;
    for (const m of this.#open_.values())
      if (m.tables.locks.get(lockId) !== undefined) return m.tables;
    return this.#home;
  }

  /** Every client with a session open, the home one first. */
  clients(): TableClient[] {
    return [this.#home, ...[...this.#open_.values()].map((m) => m.tables)];
  }

  /** Closes the sessions opened on other servers (their locks are released). */
  async close(): Promise<void> {
    this.#closed = true;
    const members = [...this.#members.values()];
    this.#members.clear();
    this.#open_.clear();
    await Promise.allSettled(members.map(async (m) => (await m).close()));
  }

  /**
   * Closes the sessions on servers that cannot be reached and that no map names any more (a
   * server that died: its client would otherwise try to reconnect until this client closes).
   * One still reachable is kept (calls may be under way on it), and one holding locks too (its
   * handles end as its session does).
   */
  #forgetGone(): void {
    const named = new Set<string>();
    for (const map of this.#maps.values())
      for (const r of map.regions) if (r.server !== null) named.add(r.server);
    for (const [server, member] of [...this.#open_]) {
      if (named.has(server) || member.tables.connected || member.tables.locks.size > 0) continue;
      this.#open_.delete(server);
      this.#members.delete(server);
      member.close().catch(() => undefined);
    }
  }

  #clientOf(map: RegionMap, server: string): Promise<TableClient> | TableClient {
    if (server === map.self) return this.#home;
    let member = this.#members.get(server);
    if (member === undefined) {
      const opening = this.#open(server);
      member = opening;
      this.#members.set(server, opening);
      opening.then(
        (m) => {
          if (this.#members.get(server) === opening) this.#open_.set(server, m);
        },
        // A server that could not be reached is tried again at the next call that needs it.
        () => {
          if (this.#members.get(server) === opening) this.#members.delete(server);
        },
      );
    }
    const open = this.#open_.get(server);
    if (open !== undefined && this.#members.get(server) !== undefined)
      return connected(open, server);
    return member.then(
      (m) => connected(m, server),
      (err: unknown) => {
        // Nothing was sent: the region's server is gone, or going; the map will say.
        throw new NotServingRegionError(
          `The server of this region, ${server}, cannot be reached: ${(err as Error).message}`,
          { cause: err },
        );
      },
    );
  }
}

/**
 * `member`'s client if its connection is up. Nothing is sent to a server that went away (its
 * regions will be served elsewhere): `NOT_SERVING_REGION`, for the call to be routed again.
 */
function connected(member: FleetMember, server: string): TableClient {
  if (member.tables.connected) return member.tables;
  throw new NotServingRegionError(
    `The server of this region, ${server}, cannot be reached just now`,
  );
}

/** The region of `row` in a checked map (contiguous, in key order, from `''` to the end). */
function entryOf(regions: readonly RegionMapEntry[], row: string): RegionMapEntry {
  let lo = 0;
  let hi = regions.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((regions[mid] as RegionMapEntry).startKey <= row) lo = mid;
    else hi = mid - 1;
  }
  return regions[lo] as RegionMapEntry;
}
