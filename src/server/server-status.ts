import type { RateHistory } from './call-stats.js';
import type { FleetStatus } from './fleet-role.js';
import type { HaStatus } from './ha-role.js';
import type { LockWaitStatus } from './lock-wait-status.js';

/** A handler lane's counters. */
export interface LaneStatus {
  size: number;
  busy: number;
  queued: number;
  parked: number;
  completed: number;
}

/** One session, as status pages show it (a label; the session id stays secret). */
export interface SessionStatus {
  session: string;
  client: string | undefined;
  connected: boolean;
  leaseMs: number;
  leaseRemainingMs: number;
  locks: number;
  waiting: number;
  scanners: number;
  ageMs: number;
}

/** One held row lock. */
export interface HeldLockStatus {
  table: string;
  row: string;
  session: string;
  client: string | undefined;
  token: number;
  /**
   * Milliseconds until the lock runs out unless renewed: its own lease (`renews: false`), or its
   * session's, for a lock that renews itself while its session lives (`renews: true`).
   */
  leaseRemainingMs: number;
  renews: boolean;
}

/** One table. */
export interface TableStatus {
  name: string;
  families: string[];
  rows: number;
  cells: number;
  /** How many regions its rows are split into (1 unless created with split keys). */
  regions: number;
}

/** One region of a table: the rows from `startKey` (inclusive) to `endKey` (exclusive). */
export interface RegionStatus {
  /**
   * The region's id: the first 64 bits of the SHA-256 of its storage name, as 16 hex digits.
   * The same on every server and across moves (a split's new region gets a new one); the label
   * of its series in `/metrics`, which names no table and no key.
   */
  id: string;
  table: string;
  /** The region's first row, as HBase prints keys; `''` for a table's first region. */
  startKey: string;
  /** The next region's first row; `''` for a table's last region. */
  endKey: string;
  /**
   * `host:port` of the server serving it; in a fleet, `null` while no server does (its
   * server died and no other has taken it over yet).
   */
  server: string | null;
  /** Its rows and cells, where this server serves it (`null` for another fleet member's). */
  rows: number | null;
  cells: number | null;
}

/**
 * What a server says about itself: the answer of the `status` call, of `GET /status`, and what
 * `rows status` and the dashboard show. Lists are bounded (the sessions with the most locks,
 * the locks closest to expiry, the oldest waits); the counts beside them are exact.
 */
export interface ServerStatus extends LockWaitStatus {
  server: string;
  uptimeMs: number;
  /** `host:port` the server listens on. */
  listening: string;
  connections: number;
  sockets: number;
  unsentBytes: number;
  tables: TableStatus[];
  /** Every region of every table, tables by name and each table's regions in key order. */
  regions: RegionStatus[];
  sessions: SessionStatus[];
  sessionsOpen: number;
  locks: HeldLockStatus[];
  locksHeld: number;
  scanners: number;
  handlers: { handler: LaneStatus; priority: LaneStatus };
  calls: { ok: Record<string, number>; failed: Record<string, number>; perSecond: number[] };
  rates: RateHistory;
  ha: HaStatus;
  /** A fleet member's view of the fleet (absent outside a fleet). */
  fleet?: FleetStatus;
}
