import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import { hostname } from 'node:os';
import { createServer as createTlsServer } from 'node:tls';
import { ConnectionLostError, LockLostError, NotMasterError } from '../core/errors.js';
import { toStringBinary } from '../rows/bytes.js';
import { encodeFrame } from '../wire/codec.js';
import { errorFrame } from '../wire/wire-error.js';
import { Admission } from './admission.js';
import { CallStats } from './call-stats.js';
import { Connection, type ConnectionHost, type ConnectionLimits } from './connection.js';
import { DataService, type DataSettings } from './data-service.js';
import type { DispatchLimits } from './dispatch.js';
import { FleetRole } from './fleet-role.js';
import { HaRole, type HaStatus, type RoleChange } from './ha-role.js';
import { HttpStatus, type ServerMetrics } from './http-status.js';
import { Lane } from './lane.js';
import { lockWaitStatus } from './lock-wait-status.js';
import { OutputBudget } from './output-budget.js';
import type { ScannerRegistry } from './scanner-registry.js';
import { checkServerOptions, type ServerOptions } from './server-options.js';
import type { ServerStatus } from './server-status.js';
import type { HeldLock, Session } from './session.js';
import type { SessionRegistry } from './session-registry.js';
import { LOCKS_LISTED, SESSIONS_LISTED, Shortlist } from './status-lists.js';
import { TableCatalog } from './table-catalog.js';

export type { ServerOptions } from './server-options.js';

/**
 * The locksmith server: the row store and its row locks over TCP (docs/server.md). Tables live
 * under `dataDir`, which the server locks for itself; clients open sessions that own their row
 * locks and scanners. `listen()` resolves once the port is bound; `close()` ends every
 * session (releasing their locks), closes every table and releases the directory; `done`
 * resolves when it is all over and never rejects.
 *
 * With `ha`, several servers share `dataDir` (docs/server.md, "Master/slave"): each listens
 * and serves its status in every role, but only the master (chosen by the locker) opens the
 * tables and serves sessions; a slave refuses HELLO with `NOT_MASTER`, naming the master. The
 * `role` event tells each change of role; `failed` (then the server closes) that a locker
 * with `failIfLocked` found another master, or could not start.
 */
export class LocksmithServer extends EventEmitter<{ role: [RoleChange]; failed: [unknown] }> {
  readonly host: string;
  readonly port: number;
  readonly dataDir: string;
  readonly done: Promise<void>;
  readonly lanes: { readonly handler: Lane; readonly priority: Lane };
  readonly calls = new CallStats();
  readonly startedAt = Date.now();
  readonly #server: Server;
  readonly #connections = new Set<Connection>();
  readonly #admission: Admission;
  readonly #output: OutputBudget;
  readonly #shutdownTimeoutMs: number;
  /** The data side of a standalone server (for its whole life). */
  #standalone: DataService | undefined;
  /** The master/slave role of a server with `ha`. */
  #ha: HaRole | undefined;
  /** The server's membership of a fleet, with `fleet`. */
  #fleet: FleetRole | undefined;
  #http: HttpStatus | undefined;
  #closing: Promise<void> | undefined;
  #resolveDone: () => void = () => undefined;

  private constructor(parts: {
    server: Server;
    address: AddressInfo;
    dataDir: string;
    lanes: { handler: Lane; priority: Lane };
    admission: Admission;
    output: OutputBudget;
    shutdownTimeoutMs: number;
  }) {
    super();
    this.#server = parts.server;
    this.#admission = parts.admission;
    this.#output = parts.output;
    this.#shutdownTimeoutMs = parts.shutdownTimeoutMs;
    this.host = parts.address.address;
    this.port = parts.address.port;
    this.dataDir = parts.dataDir;
    this.lanes = parts.lanes;
    this.done = new Promise((resolve) => {
      this.#resolveDone = resolve;
    });
  }

  /** The port of `GET /status` and `GET /metrics`, when `httpPort` was given. */
  get httpPort(): number | undefined {
    return this.#http?.port;
  }

  /** Connections open now. */
  get connections(): ReadonlySet<Connection> {
    return this.#connections;
  }

  /** `standalone` (no `ha`), or `master`/`slave` now. */
  get role(): 'standalone' | 'master' | 'slave' {
    return this.#ha?.role ?? 'standalone';
  }

  /** The tables; a slave has none (`NOT_MASTER`). */
  get catalog(): TableCatalog {
    return this.#serving().catalog;
  }

  /** The sessions; a slave has none (`NOT_MASTER`). */
  get sessions(): SessionRegistry {
    return this.#serving().sessions;
  }

  /** The scanners; a slave has none (`NOT_MASTER`). */
  get scanners(): ScannerRegistry {
    return this.#serving().scanners;
  }

  get #data(): DataService | undefined {
    return this.#standalone ?? this.#ha?.data;
  }

  #serving(): DataService {
    const data = this.#data;
    if (data === undefined) {
      throw new NotMasterError(`This server is a ${this.role}: it serves no tables`);
    }
    return data;
  }

  /**
   * Standalone: opens the data directory (recovering every table), then listens. With `ha`:
   * listens (and serves status) at once, and waits for mastership in the background.
   */
  static async listen(options: ServerOptions): Promise<LocksmithServer> {
    const opts = checkServerOptions(options);
    const { dataDir, host, port, handlers, priorityHandlers, leasePeriodMs, rowLockWaitMs } = opts;
    const { sessionLeaseMs, minSessionLeaseMs, maxSessionLeaseMs, token, durability } = opts;
    const { maxFrameBytes, maxSessions, shutdownTimeoutMs, clock, httpPort, tls, ha, fleet } = opts;
    const connectionLimits: ConnectionLimits = {
      maxFrameBytes,
      maxInFlight: opts.maxInFlight,
      handshakeTimeoutMs: opts.handshakeTimeoutMs,
      maxBufferedBytes: opts.maxBufferedBytes,
      maxSessionsPerConnection: opts.maxSessionsPerConnection,
    };
    const output = new OutputBudget(opts.maxBufferedBytesTotal);
    const admission = new Admission({
      maxConnections: opts.maxConnections,
      maxConnectionsPerAddress: opts.maxConnectionsPerAddress,
    });
    const dispatchLimits: DispatchLimits = {
      maxLocksPerSession: opts.maxLocksPerSession,
      maxWaitersPerSession: opts.maxWaitersPerSession,
      maxScanRows: 1000,
      maxScanBytes: Math.min(4 * 1024 * 1024, maxFrameBytes / 2),
    };
    const lanes = {
      handler: new Lane('handler', handlers),
      priority: new Lane('priority', priorityHandlers),
    };
    let self: LocksmithServer | undefined;
    const settings: DataSettings = {
      dataDir,
      leasePeriodMs,
      rowLockWaitMs,
      durability,
      clock,
      openStorage: opts.openStorage,
      sessions: opts.sessions,
      sessionLimits: {
        defaultLeaseMs: sessionLeaseMs,
        minLeaseMs: minSessionLeaseMs,
        maxLeaseMs: maxSessionLeaseMs,
        maxSessions,
      },
      dispatchLimits,
      // Calls come in only once the server listens, after `self` is set.
      status: () => (self as LocksmithServer).status(),
      self: () => (self as LocksmithServer).#selfAddress(),
    };
    // Standalone, the tables open before the port: a server that listens serves them.
    const standalone =
      ha === undefined && fleet === undefined
        ? await DataService.open(settings, undefined, () => {
            void self?.close();
          })
        : undefined;
    let server: Server | undefined;
    try {
      server =
        tls === undefined ? createServer() : createTlsServer({ cert: tls.cert, key: tls.key });
      const listening = server;
      await new Promise<void>((resolve, reject) => {
        listening.once('error', reject);
        listening.listen(port, host, () => {
          listening.off('error', reject);
          resolve();
        });
      });
    } catch (err) {
      await standalone?.close(new LockLostError('The server did not start', { code: 'LOCK_LOST' }));
      throw err;
    }
    self = new LocksmithServer({
      server,
      address: server.address() as AddressInfo,
      dataDir,
      lanes,
      admission,
      output,
      shutdownTimeoutMs,
    });
    const created = self;
    created.#standalone = standalone;
    if (fleet !== undefined) {
      // A member listens first: it joins under the address it listens on (or advertises).
      const where = created.host.includes(':') ? `[${created.host}]` : created.host;
      try {
        const role = await FleetRole.join(
          fleet,
          `${where}:${created.port}`,
          clock,
          settings.sessions === 'durable',
        );
        created.#fleet = role;
        created.#standalone = await DataService.open(
          settings,
          undefined,
          () => {
            void created.close();
          },
          role.catalogHooks,
          role.locks,
        );
        role.attach(created.#standalone.catalog);
      } catch (err) {
        await created.close();
        throw err;
      }
    }
    if (ha !== undefined) {
      const where = created.host.includes(':') ? `[${created.host}]` : created.host;
      const address = ha.advertise ?? `${where}:${created.port}`;
      const role = new HaRole({
        id: `${hostname()}-${process.pid}-${created.port}`.replace(/[^A-Za-z0-9_.-]/g, '_'),
        address,
        dataDir,
        options: ha,
        clock,
        open: (mastership) =>
          DataService.open(settings, mastership, (reason) => mastership.lost(reason)),
      });
      role.on('role', (change) => created.emit('role', change));
      role.once('failed', (reason) => {
        created.emit('failed', reason);
        void created.close();
      });
      created.#ha = role;
    }
    const host_: ConnectionHost = {
      serving: () =>
        created.#standalone ??
        created.#ha?.serving() ??
        new NotMasterError('The server is shutting down'),
      lanes,
      limits: connectionLimits,
      output,
      tokenDigest: token === undefined ? undefined : createHash('sha256').update(token).digest(),
      lockLeaseMs: leasePeriodMs,
      rowLockWaitMs,
      serverName: 'locksmith/0.1.0',
      record: (method, ok) => created.calls.record(method, ok),
      forget: (connection) => created.#connections.delete(connection),
    };
    // Every socket is counted from accept (a TLS one before its handshake); one over a bound
    // is told why (in the clear only: a TLS peer has no session to read it in) and closed.
    const refusedSockets = new WeakSet<Socket>();
    server.on('connection', (socket: Socket) => {
      if (created.#closing !== undefined) {
        socket.destroy();
        return;
      }
      const refused = admission.admit(socket);
      if (refused === undefined) return;
      refusedSockets.add(socket);
      socket.on('error', () => undefined);
      if (tls === undefined) {
        socket.end(encodeFrame(errorFrame(0, refused)));
        // A peer that does not read cannot keep even a refused socket open.
        setTimeout(() => socket.destroy(), 1000).unref();
      } else {
        socket.destroy();
      }
    });
    server.on(tls === undefined ? 'connection' : 'secureConnection', (socket: Socket) => {
      if (refusedSockets.has(socket)) return;
      if (created.#closing !== undefined || socket.destroyed) {
        socket.destroy();
        return;
      }
      created.#connections.add(new Connection(socket, host_));
    });
    // A failed TLS handshake is the client's problem, never the server's.
    server.on('tlsClientError', () => undefined);
    if (httpPort !== undefined) {
      try {
        created.#http = await HttpStatus.listen(created, host, httpPort, host_.tokenDigest);
      } catch (err) {
        await created.close();
        throw err;
      }
    }
    created.#ha?.start();
    return created;
  }

  /**
   * A snapshot for status pages and the `status` call (no secrets: session ids are cut). Its
   * lists are bounded (see status-lists.ts), each with the count of all beside it: `sessions`
   * names at most {@link SESSIONS_LISTED} (most locks held first, then the oldest), counted by
   * `sessionsOpen`; `locks` at most {@link LOCKS_LISTED} (least lease left first, the likeliest
   * to be stuck or about to expire, then the oldest grant), counted by `locksHeld`; `waits` at
   * most `WAITS_LISTED`, counted by `waiting`. The lists are selected in one pass over the
   * sessions and their locks, without sorting them all.
   */
  status(): ServerStatus {
    const now = Date.now();
    const data = this.#data;
    const registry = data?.sessions;
    const listedSessions = new Shortlist<Session>(
      SESSIONS_LISTED,
      (a, b) => b.locks.size - a.locks.size || a.openedAt - b.openedAt,
    );
    const listedLocks = new Shortlist<{
      session: Session;
      held: HeldLock;
      leftMs: number;
      renews: boolean;
    }>(LOCKS_LISTED, (a, b) => a.leftMs - b.leftMs || a.held.lock.token - b.held.lock.token);
    let locksHeld = 0;
    for (const session of registry?.all() ?? []) {
      listedSessions.offer(session);
      locksHeld += session.locks.size;
      if (session.locks.size === 0) continue;
      // A lock that renews itself is held as long as its session: its session's lease is its own.
      const sessionLeftMs = Math.round(registry?.leaseRemainingMs(session) ?? 0);
      for (const held of session.locks.values()) {
        const lockLeftMs = held.lock.leaseRemainingMs ?? 0;
        const renews = lockLeftMs === Number.POSITIVE_INFINITY;
        listedLocks.offer({ session, held, leftMs: renews ? sessionLeftMs : lockLeftMs, renews });
      }
    }
    const tableRegions =
      data === undefined ? [] : [...data.catalog.entries()].map(([, t]) => t.regions);
    const waitingOf = (s: Session) => tableRegions.reduce((n, r) => n + r.rowLockWaiting(s), 0);
    const sessions = listedSessions.list().map((s) => ({
      session: s.label,
      client: s.client,
      connected: s.sink !== undefined,
      leaseMs: s.leaseMs,
      leaseRemainingMs: Math.round(registry?.leaseRemainingMs(s) ?? 0),
      locks: s.locks.size,
      waiting: waitingOf(s),
      scanners: s.scannerCount,
      ageMs: now - s.openedAt,
    }));
    const tables =
      data === undefined
        ? []
        : [...data.catalog.entries()].map(([name, { descriptor, regions }]) => ({
            name,
            families: descriptor.families.map((f) => f.name),
            rows: regions.rowCount,
            cells: regions.cellCount,
            regions: regions.size,
          }));
    const ha = this.#haStatus();
    const regions =
      data === undefined
        ? []
        : data.catalog.list().flatMap((table) => {
            const ids = TableCatalog.regionIds(data.catalog.describe(table));
            return data.catalog
              .regions(table)
              .ranges()
              .map(({ startKey, endKey, region, server }, i) => ({
                id: ids[i] as string,
                table,
                startKey: toStringBinary(startKey),
                endKey: toStringBinary(endKey),
                server:
                  region === undefined ? (server ?? null) : (this.#fleet?.address ?? ha.address),
                rows: region?.rowCount ?? null,
                cells: region?.cellCount ?? null,
              }));
          });
    const locks = listedLocks.list().map(({ session, held: { table, lock }, leftMs, renews }) => ({
      table,
      row: toStringBinary(lock.row.toString('latin1')),
      session: session.label,
      client: session.client,
      token: lock.token,
      leaseRemainingMs: leftMs,
      renews,
    }));
    const lane = (l: Lane) => ({
      size: l.size,
      busy: l.busy,
      queued: l.queued,
      parked: l.parked,
      completed: l.completed,
    });
    return {
      server: 'locksmith/0.1.0',
      uptimeMs: now - this.startedAt,
      listening: `${this.host}:${this.port}`,
      connections: this.#connections.size,
      sockets: this.#admission.size,
      unsentBytes: this.#output.total,
      tables,
      regions,
      sessions,
      sessionsOpen: registry?.size ?? 0,
      locks,
      locksHeld,
      scanners: data?.scanners.size ?? 0,
      handlers: { handler: lane(this.lanes.handler), priority: lane(this.lanes.priority) },
      calls: {
        ok: Object.fromEntries(this.calls.ok),
        failed: Object.fromEntries(this.calls.failed),
        perSecond: this.calls.perSecond(60),
      },
      rates: this.calls.rates(),
      ...lockWaitStatus(data?.catalog.entries() ?? []),
      ha,
      ...(this.#fleet === undefined ? {} : { fleet: this.#fleet.status() }),
    };
  }

  /** The address a fleet member joined under, or where this server listens. */
  #selfAddress(): string {
    if (this.#fleet !== undefined) return this.#fleet.address;
    if (this.#ha !== undefined) return this.#ha.address;
    return `${this.host.includes(':') ? `[${this.host}]` : this.host}:${this.port}`;
  }

  #haStatus(): HaStatus {
    if (this.#ha !== undefined) return this.#ha.status();
    return {
      role: 'standalone',
      since: this.startedAt,
      token: 0,
      address: `${this.host}:${this.port}`,
      peers: [],
      failovers: [],
    };
  }

  /** The numbers of `GET /metrics`. */
  metrics(): ServerMetrics {
    const data = this.#data;
    let locksHeld = 0;
    let lockWaiters = 0;
    for (const s of data?.sessions.all() ?? []) {
      locksHeld += s.locks.size;
    }
    const regions: ServerMetrics['regions'] = [];
    for (const [, { descriptor, regions: table }] of data?.catalog.entries() ?? []) {
      lockWaiters += table.rowLockWaiting();
      const ids = TableCatalog.regionIds(descriptor);
      for (const [i, { region }] of table.ranges().entries()) {
        if (region === undefined) continue;
        regions.push({
          id: ids[i] as string,
          rows: region.rowCount,
          cells: region.cellCount,
          lockWaiters: region.rowLockWaiting(),
        });
      }
    }
    const regionsServed = regions.length;
    const fleet = this.#fleet?.status();
    const moves = this.#fleet?.moveCounts() ?? { claimed: 0, 'handed-over': 0, lost: 0 };
    const lane = (l: Lane) => ({
      lane: l.name,
      size: l.size,
      busy: l.busy,
      queued: l.queued,
      parked: l.parked,
    });
    return {
      connections: this.#connections.size,
      sessions: data?.sessions.size ?? 0,
      sessionsExpired: data?.sessions.expired ?? 0,
      locksHeld,
      lockWaiters,
      scanners: data?.scanners.size ?? 0,
      scannersExpired: data?.scanners.expired ?? 0,
      tables: data?.catalog.size ?? 0,
      regionsServed,
      regions,
      fleetMembers: fleet?.members.filter((m) => m.live).length ?? 0,
      regionsUnserved: fleet?.unserved ?? 0,
      locksAwaitingAdoption: fleet?.locksAwaitingAdoption ?? 0,
      regionMoves: Object.entries(moves).map(([change, count]) => ({
        change: change as 'claimed' | 'handed-over' | 'lost',
        count,
      })),
      lanes: [lane(this.lanes.handler), lane(this.lanes.priority)],
      calls: [
        ...[...this.calls.ok].map(([method, count]) => ({ method, outcome: 'ok' as const, count })),
        ...[...this.calls.failed].map(([method, count]) => ({
          method,
          outcome: 'error' as const,
          count,
        })),
      ],
    };
  }

  /**
   * Stops: no new connections, every session ended (locks released), tables and directory
   * closed; with `ha`, the mastership given back (a slave takes over). Calls still queued for
   * a handler are not started. What is still running gets `shutdownTimeoutMs` to finish; after
   * that the close stops waiting for it (an unfinished write was never acknowledged, and the
   * directory's kernel lock goes with the process), so no call, peer or stuck disk holds a
   * shutdown open for longer.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
      const bye = new ConnectionLostError('The server is shutting down');
      for (const connection of [...this.#connections]) connection.close(bye);
      const orderly = (async () => {
        await this.#http?.close();
        // A fleet member hands its regions over before its tables close.
        await this.#fleet?.close();
        await this.#standalone?.close(
          new LockLostError('The server shut down', { code: 'LOCK_LOST' }),
        );
        await this.#ha?.close();
      })();
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, this.#shutdownTimeoutMs);
        timer.unref();
      });
      await Promise.race([orderly.catch(() => undefined), late]);
      clearTimeout(timer);
      this.#admission.destroyAll();
      for (const connection of [...this.#connections]) connection.socket.destroy();
      await closed;
      this.#resolveDone();
    })();
    return this.#closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
