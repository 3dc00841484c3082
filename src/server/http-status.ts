import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Registry } from 'prom-client';
import { dashboardScript, dashboardStyle } from './dashboard-assets.js';
import { DASHBOARD_HTML, DASHBOARD_ICON } from './dashboard-page.js';
import { allowedHost, SECURITY_HEADERS } from './http-guard.js';
import type { ServerStatus } from './server-status.js';

/** What the status endpoint reads from its server. */
export interface StatusSource {
  status(): ServerStatus;
  metrics(): ServerMetrics;
}

/** The numbers `/metrics` exports (read at scrape time; nothing is counted twice). */
export interface ServerMetrics {
  connections: number;
  sessions: number;
  sessionsExpired: number;
  locksHeld: number;
  lockWaiters: number;
  scanners: number;
  scannersExpired: number;
  tables: number;
  /** Regions this server serves (every region of every table, outside a fleet). */
  regionsServed: number;
  /** A fleet member's view: live members, regions nobody serves now, moves since it started. */
  fleetMembers: number;
  regionsUnserved: number;
  /** Row locks put back here after their region moved, not adopted by their holder yet. */
  locksAwaitingAdoption: number;
  regionMoves: { change: 'claimed' | 'handed-over' | 'lost'; count: number }[];
  /** Each region this server serves, by its opaque id (`RegionStatus.id`). */
  regions: { id: string; rows: number; cells: number; lockWaiters: number }[];
  lanes: { lane: string; size: number; busy: number; queued: number; parked: number }[];
  calls: { method: string; outcome: 'ok' | 'error'; count: number }[];
}

/**
 * The dashboard's files: static, the same for everyone, so served without the token. The
 * script and style sheet are files of the package, read on first request (dashboard-assets.ts).
 */
const ASSETS: Readonly<Record<string, { type: string; body: () => string }>> = {
  '/': { type: 'text/html; charset=utf-8', body: () => DASHBOARD_HTML },
  '/index.html': { type: 'text/html; charset=utf-8', body: () => DASHBOARD_HTML },
  '/dashboard.js': { type: 'text/javascript; charset=utf-8', body: dashboardScript },
  '/dashboard.css': { type: 'text/css; charset=utf-8', body: dashboardStyle },
  '/favicon.svg': { type: 'image/svg+xml', body: () => DASHBOARD_ICON },
  '/favicon.ico': { type: 'image/svg+xml', body: () => DASHBOARD_ICON },
};

/**
 * `GET /status` (JSON), `GET /metrics` (Prometheus text format, through prom-client) and the
 * operators' dashboard (`GET /`, a page that polls `/status`) on their own HTTP port.
 * Read-only: only GET and HEAD are served (others 405) and no request changes anything. With
 * a token, `/status` and `/metrics` need `Authorization: Bearer <token>` (compared in constant
 * time); the dashboard's page and script hold no data and load without it, then ask the
 * operator for the token. The session ids shown are cut short, so nothing here lets a reader
 * act as a client. For the page and `/status`, a Host header that is not an IP literal,
 * `localhost` or the listening host is refused with 421 (DNS rebinding); `/metrics`, which
 * names nothing (only counts, by lane, method and outcome), answers to any name a scraper
 * uses, still behind the token. Every answer carries {@link SECURITY_HEADERS} and no CORS
 * header. Labels are few: prom-client's scrape time grows with label count.
 */
export class HttpStatus {
  readonly port: number;
  readonly #server: Server;

  private constructor(server: Server, port: number) {
    this.#server = server;
    this.port = port;
  }

  static async listen(
    source: StatusSource,
    host: string,
    port: number,
    tokenDigest: Buffer | undefined,
  ): Promise<HttpStatus> {
    const registry = new Registry();
    let snapshot: ServerMetrics | undefined;
    const read = () => {
      snapshot ??= source.metrics();
      return snapshot;
    };
    const gauge = (name: string, help: string, value: (m: ServerMetrics) => number) =>
      new Gauge({
        name,
        help,
        registers: [registry],
        collect() {
          this.set(value(read()));
        },
      });
    gauge('locksmith_connections', 'Client connections open now', (m) => m.connections);
    gauge(
      'locksmith_sessions',
      'Sessions alive now (connected or within their lease)',
      (m) => m.sessions,
    );
    gauge('locksmith_row_locks_held', 'Explicit row locks held by sessions', (m) => m.locksHeld);
    gauge('locksmith_row_lock_waiters', 'Lock calls waiting for a row', (m) => m.lockWaiters);
    gauge('locksmith_scanners', 'Server-side scanners open', (m) => m.scanners);
    gauge('locksmith_tables', 'Tables served', (m) => m.tables);
    // Counts only: a region's table name and keys stay on /status, behind its Host check.
    gauge('locksmith_regions_served', 'Regions this server serves', (m) => m.regionsServed);
    gauge(
      'locksmith_fleet_members',
      'Live servers of the fleet, as this one saw them last (0 outside a fleet)',
      (m) => m.fleetMembers,
    );
    gauge(
      'locksmith_fleet_regions_unserved',
      'Regions of the fleet that no live server serves now',
      (m) => m.regionsUnserved,
    );
    gauge(
      'locksmith_fleet_locks_awaiting_adoption',
      'Row locks kept here after their region moved, not adopted by their holder yet',
      (m) => m.locksAwaitingAdoption,
    );
    // Per region served here, labelled by its opaque id (no table name, no key): its series
    // follows the region from server to server.
    const perRegion = (
      name: string,
      help: string,
      value: (r: ServerMetrics['regions'][number]) => number,
    ) =>
      new Gauge({
        name,
        help,
        labelNames: ['region'],
        registers: [registry],
        collect() {
          this.reset();
          for (const r of read().regions) this.set({ region: r.id }, value(r));
        },
      });
    perRegion('locksmith_region_rows', 'Rows of each region this server serves', (r) => r.rows);
    perRegion('locksmith_region_cells', 'Cells of each region this server serves', (r) => r.cells);
    perRegion(
      'locksmith_region_row_lock_waiters',
      'Lock calls waiting for a row of each region this server serves',
      (r) => r.lockWaiters,
    );
    new Counter({
      name: 'locksmith_region_moves_total',
      help: 'Regions this fleet member claimed, handed over, or lost (its lease, or the claim, gone)',
      labelNames: ['change'],
      registers: [registry],
      collect() {
        this.reset();
        for (const m of read().regionMoves) this.inc({ change: m.change }, m.count);
      },
    });
    new Counter({
      name: 'locksmith_sessions_expired_total',
      help: 'Sessions ended because their lease ran out',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(read().sessionsExpired);
      },
    });
    new Counter({
      name: 'locksmith_scanners_expired_total',
      help: 'Scanners closed because nobody read them for a lease',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(read().scannersExpired);
      },
    });
    for (const [name, help, key] of [
      ['locksmith_handlers', 'Handlers of each lane', 'size'],
      ['locksmith_handlers_busy', 'Handlers running a call', 'busy'],
      ['locksmith_calls_queued', 'Calls waiting for a handler', 'queued'],
      [
        'locksmith_calls_parked',
        'Calls that gave their handler back to wait (for a row lock, or for their write to be synced)',
        'parked',
      ],
    ] as const) {
      new Gauge({
        name,
        help,
        labelNames: ['lane'],
        registers: [registry],
        collect() {
          this.reset();
          for (const lane of read().lanes) this.set({ lane: lane.lane }, lane[key]);
        },
      });
    }
    new Counter({
      name: 'locksmith_calls_total',
      help: 'Calls answered, by method and outcome',
      labelNames: ['method', 'outcome'],
      registers: [registry],
      collect() {
        this.reset();
        for (const c of read().calls) this.inc({ method: c.method, outcome: c.outcome }, c.count);
      },
    });

    const authorized = (req: IncomingMessage): boolean => {
      if (tokenDigest === undefined) return true;
      const header = req.headers.authorization ?? '';
      const given = header.startsWith('Bearer ') ? header.slice(7) : '';
      return (
        timingSafeEqual(createHash('sha256').update(given).digest(), tokenDigest) &&
        given.length > 0
      );
    };
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      const send = (code: number, type: string, body: string) => {
        res.writeHead(code, { ...SECURITY_HEADERS, 'content-type': type });
        res.end(body);
      };
      const path = (req.url ?? '/').split('?')[0] ?? '/';
      // `/metrics` is read by scrapers, often by a service name, and holds only numbers (no
      // client or table names): the Host check guards what a browser shows or reads.
      if (path !== '/metrics' && !allowedHost(req.headers.host, host)) {
        send(
          421,
          'text/plain; charset=utf-8',
          'Misdirected request: the Host header must be an IP address, localhost or the host this server listens on\n',
        );
        return;
      }
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.setHeader('allow', 'GET, HEAD');
        send(405, 'text/plain; charset=utf-8', 'Only GET: this endpoint is read-only\n');
        return;
      }
      const asset = Object.hasOwn(ASSETS, path) ? ASSETS[path] : undefined;
      if (asset !== undefined) {
        let body: string;
        try {
          body = asset.body();
        } catch {
          // A file missing from the installed package: say so (not where) rather than crash.
          send(500, 'text/plain; charset=utf-8', `${path} is missing from this installation\n`);
          return;
        }
        send(200, asset.type, body);
        return;
      }
      if (!authorized(req)) {
        res.setHeader('www-authenticate', 'Bearer');
        send(
          401,
          'text/plain; charset=utf-8',
          'This server requires its token: Authorization: Bearer <token>\n',
        );
        return;
      }
      if (path === '/status') {
        send(
          200,
          'application/json; charset=utf-8',
          `${JSON.stringify(source.status(), null, 2)}\n`,
        );
      } else if (path === '/metrics') {
        snapshot = undefined;
        registry.metrics().then(
          (text) => send(200, registry.contentType, text),
          (err: unknown) =>
            send(500, 'text/plain; charset=utf-8', `metrics failed: ${(err as Error).message}\n`),
        );
      } else {
        send(
          404,
          'text/plain; charset=utf-8',
          'Not found: GET / (dashboard), /status or /metrics\n',
        );
      }
    });
    server.on('clientError', (_err, socket) => socket.destroy());
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    return new HttpStatus(server, (server.address() as AddressInfo).port);
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }
}
