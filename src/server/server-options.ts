import type { Clock } from '../core/clock.js';
import { InvalidArgumentError } from '../core/errors.js';
import {
  callbackOption,
  clockOption,
  customOption,
  durationOption,
  type OptionRule,
  oneOfOption,
  positiveDurationOption,
  readOptions,
  type SpecOf,
  stringOption,
  withDefault,
} from '../core/option-spec.js';
import { checkOptionsObject, describeValue, hasMethods } from '../core/options.js';
import type { OpenRegionStorage } from '../rows/region-storage.js';
import { checkAuth, checkEndpoints, checkTls, type EtcdTlsOptions } from '../store/etcd-locker.js';
import type { Locker } from '../store/locker.js';
import { DEFAULT_MAX_FRAME_BYTES, MAX_FRAME_LIMIT_BYTES } from '../wire/frame.js';
import type { FleetEtcdOptions } from './etcd-fleet-store.js';
import type { FleetOptions } from './fleet-role.js';
import type { HaOptions } from './ha-role.js';

export interface ServerOptions {
  /** Where tables live; guarded by `write.lock` (a native lock), so one server per directory. */
  dataDir: string;
  /** Address to listen on. Default `127.0.0.1`: only this machine can connect. */
  host?: string | undefined;
  /** Default 7420; 0 picks a free port (see {@link LocksmithServer.port}). */
  port?: number | undefined;
  /** Handlers for data calls (HBase `handler.count`, default 10). */
  handlers?: number | undefined;
  /** Handlers of the priority lane: unlock, renew, keep-alive, admin, status (default 10). */
  priorityHandlers?: number | undefined;
  /** Lease of an explicit row lock and of a scanner, renewed by every use (default 60 s). */
  leasePeriodMs?: number | undefined;
  /** How long a lock call waits for its row by default (HBase 0.94: 30 s). */
  rowLockWaitMs?: number | undefined;
  /** Lease of a session whose client asks for none (default 10 s), and the bounds a client may ask within. */
  sessionLeaseMs?: number | undefined;
  minSessionLeaseMs?: number | undefined;
  maxSessionLeaseMs?: number | undefined;
  /** When set, a client must present it in its HELLO before anything else is answered. */
  token?: string | undefined;
  /** PEM certificate and key: the server then speaks TLS only. */
  tls?: { cert: string | Buffer; key: string | Buffer } | undefined;
  durability?: 'fsync' | 'none' | undefined;
  /**
   * `durable` (default): sessions and their row locks are recorded beside the tables and put
   * back by the next server on the data directory — after a restart, or by the new master
   * after a failover — so clients resume them with their locks. Each grant and release then
   * waits for its record (grouped with other records into one sync). `memory`: they end with
   * the server or its mastership (faster lock calls; clients start again).
   */
  sessions?: 'durable' | 'memory' | undefined;
  maxFrameBytes?: number | undefined;
  /** Calls in flight per connection (default 1024). */
  maxInFlight?: number | undefined;
  maxLocksPerSession?: number | undefined;
  maxWaitersPerSession?: number | undefined;
  /** A connection that sends no HELLO for this long is dropped (default 10 s). */
  handshakeTimeoutMs?: number | undefined;
  // ---- what clients can make the server hold (docs/server.md, "Limits") ----
  /** Sockets open at once, counted from accept (default 1024); more are refused. */
  maxConnections?: number | undefined;
  /** Sockets open at once from one remote address (default 256). */
  maxConnectionsPerAddress?: number | undefined;
  /** Sessions at once, connected or within their lease (default 10,000); a HELLO beyond is refused. */
  maxSessions?: number | undefined;
  /** Sessions one connection may carry besides its own (`openSession`; default 1,024). */
  maxSessionsPerConnection?: number | undefined;
  /**
   * Unsent answers per connection beyond which it stops reading calls (default 1 MiB); one
   * beyond this plus one frame (`maxFrameBytes`) is closed.
   */
  maxBufferedBytes?: number | undefined;
  /** Unsent answers of all connections (default 256 MiB); past it, a connection over its own bound is closed. */
  maxBufferedBytesTotal?: number | undefined;
  /** How long `close()` waits for work in flight before it drops it (default 10 s). */
  shutdownTimeoutMs?: number | undefined;
  /** Serve `GET /status` and `GET /metrics` on this port (same host; 0: any free port). */
  httpPort?: number | undefined;
  clock?: Clock | undefined;
  /**
   * Master/slave on a shared data directory (docs/server.md, "Master/slave"): the locker
   * decides which server is master; only the master opens the tables and serves sessions.
   * The locker's `validUntil` must be on `clock`'s monotonic time (the system clock unless
   * both are given another).
   */
  ha?: HaOptions | undefined;
  /**
   * How each table's storage is opened: `RowStorage` (log segments and snapshots under
   * `dataDir`) unless another implementation of `RegionStorage` is plugged in (see
   * `OpenRegionStorage` of `locksmith-locks/rows`). Under `ha` it is given the mastership's epoch,
   * and must refuse the writes of a deposed master for fencing to hold.
   */
  openStorage?: OpenRegionStorage | undefined;
  /**
   * Serve a share of the tables of a PostgreSQL storage as one member of a fleet
   * (docs/server.md, "A fleet"): `openStorage` must be that storage's. A member's sessions are
   * its own, in memory; with `sessions: 'durable'` (the default) its explicit row locks are
   * recorded in the fleet's database, so that a region that moves keeps them for their clients
   * to adopt on its next server (`memory`: a region that moves loses its locks).
   */
  fleet?: FleetOptions | undefined;
}

const FLEET_ETCD_SPEC = {
  endpoints: customOption('a non-empty array of http://host:port URLs', checkEndpoints),
  prefix: stringOption(500),
  auth: customOption('{ username, password }', checkAuth),
  tls: customOption('{ ca, cert?, key? }: file paths or Buffers', checkTls),
} as const satisfies SpecOf<FleetEtcdOptions>;

const FLEET_SPEC = {
  database: stringOption(2000),
  tablePrefix: stringOption(200),
  leaseMs: positiveDurationOption(),
  renewMs: positiveDurationOption(),
  advertise: customOption('host:port', (value, label) => {
    if (typeof value !== 'string' || !ADVERTISE.test(value)) {
      throw new InvalidArgumentError(`${label} must be host:port, got ${describeValue(value)}`);
    }
    return value;
  }),
  etcd: customOption<FleetEtcdOptions>('{ endpoints, prefix?, auth?, tls? }', (value, label) => {
    const o = readOptions(value, label, FLEET_ETCD_SPEC, `${label}.`);
    if (o.endpoints === undefined) {
      throw new InvalidArgumentError(
        `${label}.endpoints must be a non-empty array of http://host:port URLs, got undefined`,
      );
    }
    // tls leaves the check read into etcd3's credentials (as the etcd locker's does).
    return { ...o, endpoints: o.endpoints, tls: o.tls as EtcdTlsOptions | undefined };
  }),
} as const satisfies SpecOf<FleetOptions>;

/** Bounds of the byte limits: at least 64 KiB, at most 16 GiB. */
const MIN_BUFFER_BYTES = 64 * 1024;
const MAX_BUFFER_BYTES = 16 * 1024 * 1024 * 1024;

/** An integer from `min` to `max`. */
function countOption(max = 1_000_000, min = 1): OptionRule<number> {
  return {
    domain: `an integer from ${min} to ${max}`,
    check(value, label) {
      if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
        throw new InvalidArgumentError(
          `${label} must be an integer from ${min} to ${max}, got ${describeValue(value)}`,
        );
      }
      return value;
    },
  };
}

function portOption(): OptionRule<number> {
  return {
    domain: 'an integer from 0 to 65535',
    check(value, label) {
      if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0 || value > 65535) {
        throw new InvalidArgumentError(
          `${label} must be an integer from 0 to 65535, got ${describeValue(value)}`,
        );
      }
      return value;
    },
  };
}

const ADVERTISE = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}$/;

const HA_SPEC = {
  locker: customOption<Locker>('a Locker (createLocker of locksmith/store)', (value, label) => {
    if (!hasMethods(value, 'start', 'stop', 'keepAlive', 'on', 'off')) {
      throw new InvalidArgumentError(
        `${label} must be a Locker (createLocker of locksmith/store), got ${describeValue(value)}`,
      );
    }
    return value as Locker;
  }),
  keepAlivePeriodMs: durationOption(),
  advertise: customOption('host:port', (value, label) => {
    if (typeof value !== 'string' || !ADVERTISE.test(value)) {
      throw new InvalidArgumentError(
        `${label} must be host:port (how clients reach this server), got ${describeValue(value)}`,
      );
    }
    return value;
  }),
} as const satisfies SpecOf<HaOptions>;

/** The options of `LocksmithServer.listen`, declared once (see `core/option-spec.ts`). */
export const SERVER_SPEC = {
  dataDir: customOption('a non-empty path', (value, label) => {
    if (typeof value !== 'string' || value.length === 0 || value.includes('\0')) {
      throw new InvalidArgumentError(
        `${label} must be a non-empty path, got ${describeValue(value)}`,
      );
    }
    return value;
  }),
  host: withDefault(stringOption(255), '127.0.0.1'),
  port: withDefault(portOption(), 7420),
  handlers: withDefault(countOption(10_000), 10),
  priorityHandlers: withDefault(countOption(10_000), 10),
  leasePeriodMs: withDefault(durationOption(1), 60_000),
  rowLockWaitMs: withDefault(durationOption(), 30_000),
  sessionLeaseMs: withDefault(durationOption(), 10_000),
  minSessionLeaseMs: withDefault(durationOption(), 100),
  maxSessionLeaseMs: withDefault(durationOption(), 3_600_000),
  token: stringOption(4096),
  tls: customOption('{ cert, key } (PEM strings or Buffers)', (value, label) => {
    const { cert, key } = checkOptionsObject(value as { cert?: unknown; key?: unknown }, label);
    const pem = (v: unknown) => typeof v === 'string' || Buffer.isBuffer(v);
    if (!pem(cert) || !pem(key)) {
      throw new InvalidArgumentError(`${label} needs cert and key (PEM strings or Buffers)`);
    }
    return { cert: cert as string | Buffer, key: key as string | Buffer };
  }),
  durability: withDefault(oneOfOption(['fsync', 'none'] as const), 'fsync'),
  sessions: withDefault(oneOfOption(['durable', 'memory'] as const), 'durable'),
  maxFrameBytes: withDefault(countOption(MAX_FRAME_LIMIT_BYTES, 1024), DEFAULT_MAX_FRAME_BYTES),
  maxInFlight: withDefault(countOption(), 1024),
  maxLocksPerSession: withDefault(countOption(), 10_000),
  maxWaitersPerSession: withDefault(countOption(), 1_000),
  handshakeTimeoutMs: withDefault(durationOption(), 10_000),
  maxConnections: withDefault(countOption(), 1024),
  maxConnectionsPerAddress: withDefault(countOption(), 256),
  maxSessions: withDefault(countOption(10_000_000), 10_000),
  maxSessionsPerConnection: withDefault(countOption(10_000_000), 1024),
  maxBufferedBytes: withDefault(countOption(MAX_BUFFER_BYTES, MIN_BUFFER_BYTES), 1024 * 1024),
  maxBufferedBytesTotal: withDefault(
    countOption(MAX_BUFFER_BYTES, MIN_BUFFER_BYTES),
    256 * 1024 * 1024,
  ),
  shutdownTimeoutMs: withDefault(durationOption(), 10_000),
  httpPort: portOption(),
  clock: clockOption(),
  ha: customOption<HaOptions>('{ locker, keepAlivePeriodMs?, advertise? }', (value) => {
    const o = readOptions(value, 'ha', HA_SPEC, 'ha.');
    if (o.locker === undefined) {
      throw new InvalidArgumentError(
        'ha.locker must be a Locker (createLocker of locksmith/store), got undefined',
      );
    }
    return { ...o, locker: o.locker };
  }),
  openStorage: callbackOption<OpenRegionStorage>(),
  fleet: customOption<FleetOptions>(
    '{ database, tablePrefix?, leaseMs?, renewMs?, advertise?, etcd? }',
    (value) => {
      const o = readOptions(value, 'fleet', FLEET_SPEC, 'fleet.');
      if (o.database === undefined) {
        throw new InvalidArgumentError(
          "fleet.database must be the storage's postgres:// URL, got undefined",
        );
      }
      const lease = o.leaseMs ?? 5_000;
      if (lease < 300 || (o.renewMs ?? lease / 3) * 2 > lease) {
        throw new InvalidArgumentError(
          `fleet.leaseMs (${lease}) must be at least 300 ms and at least twice fleet.renewMs (${o.renewMs ?? lease / 3})`,
        );
      }
      if (o.etcd !== undefined) {
        if (lease < 1000 || lease % 1000 !== 0) {
          throw new InvalidArgumentError(
            `fleet.leaseMs (${lease}) must be a whole number of seconds, at least 1000, with fleet.etcd (etcd lease TTLs are seconds)`,
          );
        }
      }
      return { ...o, database: o.database };
    },
  ),
} as const satisfies SpecOf<ServerOptions>;

/** `LocksmithServer.listen`'s options, checked, with every default filled in. */
export type ServerSettings = ReturnType<typeof checkServerOptions>;

/**
 * Checks every option of `LocksmithServer.listen` before anything is opened: an unknown
 * name, a value out of its domain, and the combinations that cannot work (session leases out
 * of order) are refused with an `InvalidArgumentError` naming the option.
 */
export function checkServerOptions(options: ServerOptions) {
  const o = readOptions(options, 'LocksmithServer.listen options', SERVER_SPEC);
  if (o.dataDir === undefined) {
    throw new InvalidArgumentError('dataDir must be a non-empty path, got undefined');
  }
  const { minSessionLeaseMs: min, sessionLeaseMs: lease, maxSessionLeaseMs: max } = o;
  if (min < 1 || min > lease || lease > max) {
    throw new InvalidArgumentError(
      `Session leases must satisfy 1 ms <= minSessionLeaseMs (${min}) <= sessionLeaseMs (${lease}) <= maxSessionLeaseMs (${max})`,
    );
  }
  if (o.fleet !== undefined) {
    if (o.ha !== undefined)
      throw new InvalidArgumentError(
        'fleet and ha go separately: a fleet member holds its own lease (fleet.etcd keeps it in etcd)',
      );
    if (o.openStorage === undefined)
      throw new InvalidArgumentError(
        'fleet needs openStorage: the PostgreSQL storage (postgresRegionStorage) of fleet.database',
      );
    return { ...o, dataDir: o.dataDir };
  }
  return { ...o, dataDir: o.dataDir };
}
