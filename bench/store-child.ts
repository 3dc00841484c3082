/**
 * One contender of the store failover benchmark (bench/store.bench.ts): a Supervisor with a
 * no-op service over one store locker, in its own process.
 *
 *   node store-child.js <config-json>
 *
 * `config-json` is a {@link ChildConfig}. Every line it prints starts with an event and the
 * `process.hrtime.bigint()` time it happened (CLOCK_MONOTONIC, shared by all processes of the
 * machine, so the parent can subtract its own readings):
 *
 * - `waiting <ns>`: the supervisor is waiting for the lock (a standby).
 * - `master <ns> <token>`: `supervisor.start()` resolved: this process is master.
 * - `demoted <ns> <code>`: mastership was lost (never expected in the benchmark).
 * - `stopping <ns>`: SIGTERM arrived; a graceful `supervisor.stop()` begins.
 * - `stopped <ns>`: the supervisor stopped; the process exits 0 right after.
 * - `error <ns> <message>`: start failed; the process exits 1.
 *
 * SIGTERM stops gracefully (service stopped, lock released) and exits 0. The process also
 * stops and exits when its stdin closes, so it never outlives the benchmark.
 */
import {
  DatabaseLocker,
  LeaseDatabaseLocker,
  type Locker,
  SharedFileLocker,
  Supervisor,
} from '../src/store/index.js';
import { nowNs } from './support.js';

export interface ChildConfig {
  locker: 'file' | 'database' | 'lease';
  /** The store directory (file) or the database URL. */
  target: string;
  /** Lock table (database lockers). */
  table?: string;
  /** `lockAcquireSleepInterval` (the lease duration for the lease locker); default: ours. */
  interval?: number;
  /** The supervisor's `lockKeepAlivePeriod`; default: the locker's `defaultKeepAlivePeriodMs`. */
  period?: number;
  /** DatabaseLocker `queryTimeout` (default 2 000 ms); also bounds the takeover pause. */
  queryTimeout?: number;
}

const config = JSON.parse(process.argv[2] ?? '{}') as ChildConfig;
const out = (line: string) => process.stdout.write(`${line}\n`);
const interval = config.interval === undefined ? {} : { lockAcquireSleepInterval: config.interval };

function makeLocker(): Locker {
  switch (config.locker) {
    case 'file':
      return new SharedFileLocker({ directory: config.target, ...interval });
    case 'database':
      return new DatabaseLocker({
        database: config.target,
        lockTableName: config.table,
        ...interval,
        ...(config.queryTimeout === undefined ? {} : { queryTimeout: config.queryTimeout }),
      });
    case 'lease':
      return new LeaseDatabaseLocker({
        database: config.target,
        lockTableName: config.table,
        ...interval,
      });
  }
}

const supervisor = new Supervisor({
  locker: makeLocker(),
  ...(config.period === undefined ? {} : { lockKeepAlivePeriod: config.period }),
  service: { start() {}, stop() {} },
});
supervisor.on('waiting', () => out(`waiting ${nowNs()}`));
supervisor.on('demoted', ({ reason }) =>
  out(`demoted ${nowNs()} ${(reason as { code?: string } | undefined)?.code ?? 'unknown'}`),
);

let stopping = false;
function stop(): void {
  if (stopping) return;
  stopping = true;
  out(`stopping ${nowNs()}`);
  supervisor.stop().then(
    () => {
      out(`stopped ${nowNs()}`);
      process.exit(0);
    },
    (err: unknown) => {
      out(`error ${nowNs()} stop failed: ${String(err)}`);
      process.exit(1);
    },
  );
}
process.on('SIGTERM', stop);
process.stdin.on('end', stop);
process.stdin.resume();

supervisor.start().then(
  () => out(`master ${nowNs()} ${supervisor.token ?? '?'}`),
  (err: unknown) => {
    if (stopping) return;
    out(`error ${nowNs()} ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
