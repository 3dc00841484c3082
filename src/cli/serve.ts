import { readFile, stat } from 'node:fs/promises';
import { hostname } from 'node:os';
import { refuseFleetPrefixAtStart } from '../rows/postgres-catalog-store.js';
import { postgresRegionStorage } from '../rows/postgres-region-storage.js';
import { storageDatabase } from '../rows/postgres-storage-connection.js';
import { tablesOf } from '../rows/postgres-storage-schema.js';
import type { OpenRegionStorage } from '../rows/region-storage.js';
import type { FleetOptions } from '../server/fleet-role.js';
import type { HaOptions, RoleChange } from '../server/ha-role.js';
import { LocksmithServer } from '../server/server.js';
import { describe } from '../store/describe-error.js';
import { checkEndpoints } from '../store/etcd-locker.js';
import { redactUrl } from '../store/sql/database-url.js';
import {
  durationOption,
  parseCommandLine,
  pathArgument,
  readTokenFile,
  UsageError,
} from './args.js';
import {
  createCliLocker,
  ETCD_ONLY_FLAGS,
  etcdFlags,
  parseLockerFlags,
  rejectNegativeDurations,
} from './locker-flags.js';
import { USAGES } from './usage.js';

const STOP_SIGNALS = ['SIGINT', 'SIGTERM'] as const;

function portOption(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  if (!/^\d{1,5}$/.test(text) || Number(text) > 65535) {
    throw new UsageError(`${name} ${JSON.stringify(text)} is not a port: 0..65535`);
  }
  return Number(text);
}

function optionalCount(name: string, text: string | undefined): number | undefined {
  return text === undefined ? undefined : countOption(name, text, 0);
}

function countOption(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  if (!/^\d{1,6}$/.test(text) || Number(text) < 1) {
    throw new UsageError(`${name} ${JSON.stringify(text)} must be a whole number from 1 to 999999`);
  }
  return Number(text);
}

const SIZE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
};

/** A byte count: a whole number, optionally with a unit (B, KiB, MiB, GiB). */
function sizeOption(name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const match = /^(\d{1,12})\s*([kmg]?i?b?)$/i.exec(text.trim());
  const unit = SIZE_UNITS[(match?.[2] ?? '').toLowerCase()];
  if (match === null || unit === undefined) {
    throw new UsageError(
      `${name} ${JSON.stringify(text)} is not a size: a whole number of bytes, or with KiB, MiB or GiB (like 1MiB)`,
    );
  }
  return Number(match[1]) * unit;
}

/** Reads the token, warning when other users can read the file. */
async function readToken(path: string): Promise<string> {
  const token = await readTokenFile(path);
  const { mode } = await stat(path);
  if ((mode & 0o077) !== 0) {
    process.stderr.write(
      `locksmith serve: warning: ${path} can be read by other users (mode ${(mode & 0o777).toString(8)}); chmod 600 it\n`,
    );
  }
  return token;
}

/**
 * The etcd election of `serve --ha etcd` without `--election`: one fixed name, as the database
 * lockers have one default lock table. Not derived from the data directory's path: servers
 * sharing one data directory may mount it at different paths, and must still share one
 * election. Each group of servers (each data directory) on one etcd cluster needs its own
 * `--election`.
 */
export const DEFAULT_SERVE_ELECTION = 'locksmith/serve';

/**
 * The `ha` option of `--ha <locker>` and its flags (the same parser as `elect`'s): shared-file
 * locks `<data>/lock`; a database locker's `--db` may be a bare SQLite path; etcd campaigns in
 * `--election` (default {@link DEFAULT_SERVE_ELECTION}). The lease holder of lease-database
 * (etcd's proposal) is this server (host, pid, port), so every server holds its own lease.
 */
async function haOptions(
  values: Record<string, string | boolean | undefined>,
  dataDir: string,
  port: number,
  onHeld: (holder: string) => void,
): Promise<HaOptions | undefined> {
  const flags = parseLockerFlags(values, {
    kind: '--ha',
    table: '--lock-table',
    sharedFileOnly: [],
    defaultElection: DEFAULT_SERVE_ELECTION,
  });
  const advertise = values.advertise as string | undefined;
  if (flags === undefined) {
    onlyWithHa(values, ['lease', 'renew', 'advertise', 'fail-if-locked']);
    return undefined;
  }
  if (
    advertise !== undefined &&
    !/^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}$/.test(advertise)
  ) {
    throw new UsageError(`--advertise ${JSON.stringify(advertise)} is not host:port`);
  }
  const holder = `${hostname()}-${process.pid}-${advertise ?? port}`;
  // The locker's "held by ... slave mode" line is the moment this server has looked and found
  // another master: only then does it say it is a slave (as elect does). The rest stays quiet.
  const logger = {
    info: (message: string) => {
      const held = /^(.*?)\. This broker is now in slave mode/.exec(message)?.[1];
      if (held !== undefined) onHeld(held);
    },
    debug: () => {},
    warn: () => {},
  };
  const locker = await createCliLocker(flags, dataDir, holder, logger);
  return {
    locker,
    ...(flags.renewMs === undefined ? {} : { keepAlivePeriodMs: flags.renewMs }),
    ...(advertise === undefined ? {} : { advertise }),
  };
}

/** Refuses the locker flags of `--ha` (and `extra`) where there is no `--ha`. */
function onlyWithHa(
  values: Record<string, string | boolean | undefined>,
  extra: readonly string[],
): void {
  for (const name of [
    'db',
    'lock-table',
    'acquire-interval',
    ...extra,
    ...ETCD_ONLY_FLAGS.map((f) => f.slice(2)),
  ]) {
    if (values[name] !== undefined) throw new UsageError(`--${name} applies only with --ha`);
  }
}

/**
 * The `fleet` option of `--fleet`: the fleet lives in the `--storage` database, under its
 * prefix; `--lease`, `--renew` and `--advertise` are the member's.
 */
function fleetOptions(
  values: Record<string, string | boolean | undefined>,
  storageUrl: string | undefined,
  storagePrefix: string | undefined,
): FleetOptions {
  if (storageUrl === undefined) {
    throw new UsageError(
      '--fleet needs --storage postgres://...: the fleet shares its tables there',
    );
  }
  let etcd: FleetOptions['etcd'];
  if (values.ha === 'etcd') {
    // The members' leases and the regions' claims in etcd; --election names their keys' prefix.
    for (const name of ['db', 'lock-table', 'acquire-interval', 'fail-if-locked']) {
      if (values[name] !== undefined)
        throw new UsageError(`--${name} does not apply to --fleet --ha etcd`);
    }
    const flags = etcdFlags(values, '--ha', '');
    try {
      etcd = {
        endpoints: checkEndpoints(flags.endpoints, '--etcd'),
        ...(values.election === undefined ? {} : { prefix: flags.electionName }),
        ...(flags.auth === undefined ? {} : { auth: flags.auth }),
        ...(flags.tls === undefined ? {} : { tls: flags.tls }),
      };
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  } else if (values.ha !== undefined) {
    throw new UsageError(
      '--fleet takes --ha etcd only (its leases in etcd); without --ha they are in the --storage database',
    );
  } else {
    onlyWithHa(values, ['fail-if-locked']);
  }
  const advertise = values.advertise as string | undefined;
  if (
    advertise !== undefined &&
    !/^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}$/.test(advertise)
  ) {
    throw new UsageError(`--advertise ${JSON.stringify(advertise)} is not host:port`);
  }
  const lease = values.lease as string | undefined;
  const renew = values.renew as string | undefined;
  const leaseMs = lease === undefined ? undefined : durationOption('--lease', lease);
  if (etcd !== undefined && leaseMs !== undefined && (leaseMs < 1000 || leaseMs % 1000 !== 0)) {
    throw new UsageError(
      `Invalid --lease ${JSON.stringify(lease)}: must be a whole number of seconds with --ha etcd (etcd lease TTLs are seconds), e.g. --lease ${Math.max(1, Math.ceil(leaseMs / 1000))}s`,
    );
  }
  return {
    database: storageUrl,
    ...(etcd === undefined ? {} : { etcd }),
    ...(storagePrefix === undefined ? {} : { tablePrefix: storagePrefix }),
    ...(leaseMs === undefined ? {} : { leaseMs }),
    ...(renew === undefined ? {} : { renewMs: durationOption('--renew', renew) }),
    ...(advertise === undefined ? {} : { advertise }),
  };
}

/**
 * `locksmith serve`: runs a {@link LocksmithServer} until SIGINT or SIGTERM, then closes it
 * (every session ends and releases its locks; tables are closed cleanly) and exits 0.
 */
export async function run(args: string[]): Promise<number> {
  rejectNegativeDurations(args);
  const { values, positionals, command } = parseCommandLine(args, USAGES.serve.flags);
  if (positionals.length > 0 || command !== undefined) {
    throw new UsageError(`serve takes no arguments, got ${JSON.stringify(positionals[0] ?? '--')}`);
  }
  const str = (name: string) => values[name] as string | undefined;
  const dataDir = pathArgument('--data', str('data') ?? './locksmith-data');
  const host = str('host') ?? '127.0.0.1';
  const port = portOption('--port', str('port'), 7420);
  const handlers = countOption('--handlers', str('handlers'), 10);
  const leasePeriod = str('lease-period');
  const sessionLease = str('session-lease');
  const sessions = str('sessions');
  if (sessions !== undefined && sessions !== 'durable' && sessions !== 'memory') {
    throw new UsageError(`--sessions must be durable or memory, got ${JSON.stringify(sessions)}`);
  }
  const certPath = str('tls-cert');
  const keyPath = str('tls-key');
  if ((certPath === undefined) !== (keyPath === undefined)) {
    throw new UsageError('--tls-cert and --tls-key go together');
  }
  const httpPort =
    str('http-port') === undefined ? undefined : portOption('--http-port', str('http-port'), 0);
  const tokenPath = str('token-file');
  const token =
    tokenPath === undefined ? undefined : await readToken(pathArgument('--token-file', tokenPath));
  const tls =
    certPath === undefined || keyPath === undefined
      ? undefined
      : { cert: await readFile(certPath), key: await readFile(keyPath) };
  // Role lines come after the listening line; a holder found before it is said right after.
  let announced = false;
  let slaveSaid = false;
  let heldBy: string | undefined;
  let lockerName = '';
  const sayHeld = (holder: string) => {
    if (slaveSaid) return;
    slaveSaid = true;
    process.stdout.write(`locksmith serve: slave: waiting for ${lockerName}: ${holder}\n`);
  };
  const storageUrl = str('storage');
  const storagePrefix = str('storage-prefix');
  if (storageUrl === undefined && storagePrefix !== undefined) {
    throw new UsageError('--storage-prefix applies only with --storage');
  }
  if (storageUrl !== undefined && values.ha === 'shared-file') {
    throw new UsageError(
      '--ha shared-file needs a --data shared by the servers; with --storage use database, lease-database or etcd',
    );
  }
  let openStorage: OpenRegionStorage | undefined;
  if (storageUrl !== undefined) {
    try {
      openStorage = postgresRegionStorage({
        database: storageUrl,
        root: dataDir,
        ...(storagePrefix === undefined ? {} : { tablePrefix: storagePrefix }),
      });
      storageDatabase(storageUrl);
      if (storagePrefix !== undefined) tablesOf(storagePrefix);
    } catch (err) {
      throw new UsageError(
        `--storage${storagePrefix === undefined ? '' : '/--storage-prefix'}: ${(err as Error).message}`,
      );
    }
  }
  const fleet = values.fleet === true ? fleetOptions(values, storageUrl, storagePrefix) : undefined;
  if (storageUrl !== undefined && fleet === undefined) {
    await refuseFleetPrefixAtStart({ database: storageUrl, tablePrefix: storagePrefix });
  }
  const ha =
    fleet === undefined
      ? await haOptions(values, dataDir, port, (holder) => {
          if (announced) sayHeld(holder);
          else heldBy = holder;
        })
      : undefined;
  const limits = {
    maxConnections: optionalCount('--max-connections', str('max-connections')),
    maxConnectionsPerAddress: optionalCount(
      '--max-connections-per-address',
      str('max-connections-per-address'),
    ),
    maxSessions: optionalCount('--max-sessions', str('max-sessions')),
    maxSessionsPerConnection: optionalCount(
      '--max-sessions-per-connection',
      str('max-sessions-per-connection'),
    ),
    maxBufferedBytes: sizeOption('--max-buffered', str('max-buffered')),
    maxBufferedBytesTotal: sizeOption('--max-buffered-total', str('max-buffered-total')),
    shutdownTimeoutMs:
      str('shutdown-timeout') === undefined
        ? undefined
        : durationOption('--shutdown-timeout', str('shutdown-timeout') as string),
  };

  const server = await LocksmithServer.listen({
    dataDir,
    host,
    port,
    handlers,
    ...(leasePeriod === undefined
      ? {}
      : { leasePeriodMs: durationOption('--lease-period', leasePeriod) }),
    ...(sessionLease === undefined
      ? {}
      : { sessionLeaseMs: durationOption('--session-lease', sessionLease) }),
    ...(sessions === undefined ? {} : { sessions }),
    ...(token === undefined ? {} : { token }),
    ...(tls === undefined ? {} : { tls }),
    ...(httpPort === undefined ? {} : { httpPort }),
    ...(ha === undefined ? {} : { ha }),
    ...(fleet === undefined ? {} : { fleet }),
    ...(openStorage === undefined ? {} : { openStorage }),
    ...Object.fromEntries(Object.entries(limits).filter(([, v]) => v !== undefined)),
  });
  const scheme = tls === undefined ? 'locksmith' : 'locksmiths';
  const where = server.host.includes(':') ? `[${server.host}]` : server.host;
  const tables =
    fleet !== undefined
      ? `fleet member ${(server.status().fleet as { id: string }).id}${fleet.etcd === undefined ? '' : ' (leases in etcd)'}, ${server.catalog.size} table${server.catalog.size === 1 ? '' : 's'}`
      : server.role === 'standalone'
        ? `${server.catalog.size} table${server.catalog.size === 1 ? '' : 's'}`
        : `--ha ${values.ha as string}`;
  process.stdout.write(
    `locksmith serve: listening on ${scheme}://${where}:${server.port} (data ${storageUrl === undefined ? dataDir : `${redactUrl(storageUrl)}, local ${dataDir}`}, ${tables}${token === undefined ? '' : ', token required'}${server.httpPort === undefined ? '' : `, dashboard on http://${where}:${server.httpPort}/ (/status, /metrics)`})\n`,
  );
  if (ha !== undefined) {
    // The role now (master already, or still trying), then every change. "slave" is said only
    // once the locker has found another master (see haOptions), or after a loss.
    const address = ha.advertise ?? `${where}:${server.port}`;
    lockerName = ha.locker.name;
    announced = true;
    const say = (change: RoleChange) => {
      slaveSaid = change.role === 'slave' && change.reason !== undefined;
      if (change.role === 'slave' && change.reason === undefined) return;
      process.stdout.write(
        change.role === 'master'
          ? `locksmith serve: master (token ${change.token}) on ${address}\n`
          : `locksmith serve: slave: waiting for ${change.locker} (was master: ${change.reason})\n`,
      );
    };
    const now = server.status().ha as { token: number | null };
    if (server.role === 'master') {
      say({ role: 'master', token: now.token ?? 0, locker: ha.locker.name });
    } else {
      process.stdout.write(`locksmith serve: trying to become master of ${ha.locker.name}\n`);
      if (heldBy !== undefined) sayHeld(heldBy);
    }
    server.on('role', say);
  }
  let status = 0;
  server.once('failed', (reason) => {
    status = 1;
    process.stdout.write(
      `locksmith serve: stopped: ${ha?.locker.failIfLocked ? 'another server is master (--fail-if-locked): ' : ''}${describe(reason)}\n`,
    );
  });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      // A second signal: the operator will not wait for the orderly close.
      process.stdout.write(`locksmith serve: ${signal} again: exiting now\n`);
      process.exit(1);
    }
    stopping = true;
    process.stdout.write(
      `locksmith serve: ${signal}: closing (sessions end, locks are released)\n`,
    );
    void server.close();
  };
  for (const signal of STOP_SIGNALS) process.on(signal, stop);
  await server.done;
  for (const signal of STOP_SIGNALS) process.off(signal, stop);
  process.stdout.write('locksmith serve: closed\n');
  // Work the close stopped waiting for (see shutdownTimeoutMs) must not keep the process:
  // the exit code is set by then, and this timer never holds the process open by itself.
  setTimeout(() => process.exit(), 0).unref();
  return status;
}
