/**
 * Store-locker failover: `node dist-test/bench/store-failover.bench.js [fast] [default]`
 * (default: both; also part of `npm run bench:store`, a script, never a test).
 *
 * A master and a standby, each a real process (bench/store-child.ts: a Supervisor with a no-op
 * service), for SharedFileLocker and for DatabaseLocker and LeaseDatabaseLocker on SQLite,
 * PostgreSQL and MariaDB. Timed from the parent's `kill()` (SIGKILL, or SIGTERM for a graceful
 * stop) to the standby's `supervisor.start()` resolving, both read on CLOCK_MONOTONIC. Our fast
 * safe configuration gets several samples; our default configuration (10 s intervals) one
 * sample each, next to the range its settings imply.
 *
 * Environment: LOCKSMITH_TEST_POSTGRES, LOCKSMITH_TEST_MYSQL (the URLs), STORE_BENCH_SAMPLES
 * (fast-configuration samples per locker and stop mode, default 7).
 */
import { join } from 'node:path';
import {
  DEFAULT_ACQUIRE_INTERVAL_MS,
  DEFAULT_DATABASE_KEEP_ALIVE_PERIOD,
  DEFAULT_DATABASE_QUERY_TIMEOUT,
  DEFAULT_SHARED_FILE_KEEP_ALIVE_PERIOD,
} from '../src/store/index.js';
import type { ChildConfig } from './store-child.js';
import { Contender } from './store-contender.js';
import {
  type DbKind,
  MYSQL_URL,
  ms,
  newTable,
  POSTGRES_URL,
  part,
  progress,
  runStoreBench,
  type StoreSection,
  sec,
  work,
} from './store-support.js';
import { fmt, isMain, median, nowNs, say, sayTable, sleep, table } from './support.js';

const FAST_SAMPLES = Number(process.env.STORE_BENCH_SAMPLES ?? 7);
/** After the standby reports `waiting`: let its first attempt run, then a random phase. */
const SETTLE_MS = 300;

type LockerKind = ChildConfig['locker'];
type StopMode = 'kill' | 'graceful';

export interface Scenario {
  name: string;
  locker: LockerKind;
  db: DbKind;
}

const SCENARIOS: readonly Scenario[] = [
  { name: 'SharedFileLocker (local ext4)', locker: 'file', db: 'file' },
  { name: 'DatabaseLocker, SQLite', locker: 'database', db: 'sqlite' },
  { name: 'DatabaseLocker, PostgreSQL', locker: 'database', db: 'postgres' },
  { name: 'DatabaseLocker, MariaDB', locker: 'database', db: 'mysql' },
  { name: 'LeaseDatabaseLocker, SQLite', locker: 'lease', db: 'sqlite' },
  { name: 'LeaseDatabaseLocker, PostgreSQL', locker: 'lease', db: 'postgres' },
  { name: 'LeaseDatabaseLocker, MariaDB', locker: 'lease', db: 'mysql' },
];

/** A configuration of all lockers: the settings and what they let us expect. */
interface Profile {
  name: 'fast' | 'default';
  /** lockAcquireSleepInterval (the lease for the lease locker); undefined = ours. */
  interval: number | undefined;
  /** Supervisor lockKeepAlivePeriod; undefined = the locker's default. */
  period: number | undefined;
  /** DatabaseLocker queryTimeout; undefined = ours. */
  queryTimeout: number | undefined;
  /** Random phase added before each kill: up to one of the longest cycle involved. */
  cycleMs: number;
  timeoutMs: number;
}

const FAST: Profile = {
  name: 'fast',
  interval: 250,
  period: 250,
  queryTimeout: 500,
  cycleMs: 1_000,
  timeoutMs: 15_000,
};
/** The lease locker needs a lease a few renewals long: 1 000 ms, renewed every 250 ms. */
const FAST_LEASE = 1_000;
const DEFAULT: Profile = {
  name: 'default',
  interval: undefined,
  period: undefined,
  queryTimeout: undefined,
  cycleMs: DEFAULT_ACQUIRE_INTERVAL_MS,
  timeoutMs: 60_000,
};

/** The settings a profile gives one locker, resolved to numbers. */
function settings(p: Profile, s: Scenario): { interval: number; period: number; query: number } {
  const interval =
    p.interval === undefined
      ? DEFAULT_ACQUIRE_INTERVAL_MS
      : s.locker === 'lease'
        ? FAST_LEASE
        : p.interval;
  const period =
    p.period ??
    (s.locker === 'file'
      ? DEFAULT_SHARED_FILE_KEEP_ALIVE_PERIOD
      : s.locker === 'database'
        ? DEFAULT_DATABASE_KEEP_ALIVE_PERIOD
        : Math.floor(interval / 4));
  return { interval, period, query: p.queryTimeout ?? DEFAULT_DATABASE_QUERY_TIMEOUT };
}

/**
 * What the settings imply, [low, high] ms from the kill or stop to the standby being master,
 * before process and database latencies:
 * - file: the kernel frees the lock at once and its close is a release hint, so the standby
 *   retries at once; after a kill -9 it then pauses one keep-alive period (AMQ-4705), after a
 *   graceful stop the released mark lets it skip the pause. Without the hint up to one
 *   acquire interval more.
 * - database: the server frees the row when the session ends (kill) or commits (stop); a
 *   PostgreSQL/MariaDB standby is blocked in the database and gets it at once, a SQLite standby
 *   polls every interval; then the takeover pause, keep-alive period + query timeout.
 * - lease, kill -9: the lease runs out one lease after the last renewal (renewals every
 *   period), and the standby sleeps exactly until that expiry on the database's clock.
 * - lease, graceful: the release frees the row at once; the standby polls at least once a
 *   renew period (the lease when shorter), so it sees the release within one period.
 */
function expected(p: Profile, s: Scenario, mode: StopMode): [number, number] {
  const { interval, period, query } = settings(p, s);
  switch (s.locker) {
    case 'file':
      return mode === 'kill' ? [period, period] : [0, 0];
    case 'database':
      return s.db === 'sqlite'
        ? [period + query, period + query + interval]
        : [period + query, period + query];
    case 'lease':
      return mode === 'kill' ? [interval - period, interval] : [0, Math.min(period, interval)];
  }
}

function childConfig(
  p: Profile,
  s: Scenario,
  target: string,
  tableName: string | undefined,
): ChildConfig {
  const { interval } = settings(p, s);
  const config: ChildConfig = { locker: s.locker, target };
  if (tableName !== undefined) config.table = tableName;
  if (p.interval !== undefined) config.interval = interval;
  if (p.period !== undefined) config.period = p.period;
  if (p.queryTimeout !== undefined && s.locker === 'database') config.queryTimeout = p.queryTimeout;
  return config;
}

function targetOf(s: Scenario, label: string): string {
  switch (s.db) {
    case 'file':
      return join(work, `store-${label}`);
    case 'sqlite':
      return `sqlite:${join(work, `${label}.db`)}`;
    case 'postgres':
      return POSTGRES_URL;
    case 'mysql':
      return MYSQL_URL;
  }
}

interface Series {
  samples: number[];
  /** Lines of children reporting a demotion: none is expected. */
  demotions: number;
}

/**
 * `n` failovers in a chain: a master, then per sample a fresh standby that waits, a random
 * phase, the kill (or SIGTERM), and the standby's `master` time; the standby is the next
 * sample's master. The phase is uniform over one cycle so that the kill lands anywhere in
 * the standby's polls and the master's renewals.
 */
async function failoverSeries(p: Profile, s: Scenario, mode: StopMode, n: number): Promise<Series> {
  const label = `${p.name}-${s.locker}-${s.db}-${mode}`;
  const tableName = s.db === 'file' ? undefined : newTable(s.db);
  const config = childConfig(p, s, targetOf(s, label), tableName);
  const samples: number[] = [];
  const all: Contender[] = [];
  const spawnOne = () => {
    const c = new Contender(config);
    all.push(c);
    return c;
  };
  let master = spawnOne();
  try {
    let token = Number((await master.waitFor('master', 60_000)).rest);
    for (let i = 0; i < n; i++) {
      const standby = spawnOne();
      await standby.waitFor('waiting', 60_000);
      await sleep(SETTLE_MS + Math.random() * p.cycleMs);
      if (standby.find('master') !== undefined) {
        throw new Error(`${label}: the standby became master while the master was alive`);
      }
      const exit = master.exited;
      const t0 = nowNs();
      master.kill(mode === 'kill' ? 'SIGKILL' : 'SIGTERM');
      const got = await standby.waitFor('master', p.timeoutMs);
      samples.push(Number(got.ns - t0) / 1e6);
      const next = Number(got.rest);
      if (!(next > token)) throw new Error(`${label}: token ${next} after ${token}`);
      token = next;
      const { code } = await exit;
      if (mode === 'graceful' && code !== 0) {
        throw new Error(`${label}: the stopped master exited ${code}: ${master.lines.join(' | ')}`);
      }
      master = standby;
      progress(`${label} ${i + 1}/${n}: ${fmt(samples.at(-1) ?? 0)} ms`);
    }
    master.kill('SIGTERM');
    await master.exited;
  } finally {
    for (const c of all) c.kill('SIGKILL');
    await Promise.all(all.map((c) => c.exited));
  }
  const demotions = all.reduce((sum, c) => sum + (c.find('demoted') === undefined ? 0 : 1), 0);
  return { samples, demotions };
}

export interface FailoverRow {
  scenario: Scenario;
  kill: Series;
  graceful: Series;
}

function range([lo, hi]: [number, number], unit: (v: number) => string = ms): string {
  if (lo === hi) return `≈ ${unit(lo)}`;
  return `${lo === 0 ? '0' : unit(lo)} – ${unit(hi)}`;
}

async function failover(p: Profile, n: number): Promise<FailoverRow[]> {
  const rows: FailoverRow[] = [];
  for (const s of SCENARIOS) {
    const kill = await failoverSeries(p, s, 'kill', n);
    const graceful = await failoverSeries(p, s, 'graceful', n);
    rows.push({ scenario: s, kill, graceful });
  }
  return rows;
}

function settingsText(p: Profile, s: Scenario): string {
  const { interval, period, query } = settings(p, s);
  switch (s.locker) {
    case 'file':
      return `interval ${interval}, keep-alive ${period}`;
    case 'database':
      return `interval ${interval}, keep-alive ${period}, query timeout ${query} (pause ${period + query})`;
    case 'lease':
      return `lease ${interval}, renew ${period}, margin ${interval / 4}`;
  }
}

function printFast(rows: FailoverRow[]): void {
  say(`### Fast safe configuration (${FAST_SAMPLES} samples per locker and stop mode)`);
  say();
  const body = rows.map(({ scenario: s, kill, graceful }) => [
    s.name,
    settingsText(FAST, s),
    fmt(median(kill.samples)),
    fmt(Math.max(...kill.samples)),
    range(expected(FAST, s, 'kill')),
    fmt(median(graceful.samples)),
    fmt(Math.max(...graceful.samples)),
    range(expected(FAST, s, 'graceful')),
  ]);
  say(
    table(
      [
        'locker',
        'settings (ms)',
        'kill -9 p50 ms',
        'kill -9 max ms',
        'kill -9 expected',
        'graceful p50 ms',
        'graceful max ms',
        'graceful expected',
      ],
      body,
    ),
  );
  say();
  sayTable(
    'All samples (ms), in order:',
    ['locker', 'kill -9', 'graceful'],
    rows.map(({ scenario: s, kill, graceful }) => [
      s.name,
      kill.samples.map((v) => fmt(v)).join(' '),
      graceful.samples.map((v) => fmt(v)).join(' '),
    ]),
  );
  reportDemotions(rows);
  say();
}

function printDefault(rows: FailoverRow[]): void {
  sayTable(
    '### Default configuration (one sample per locker and stop mode)',
    ['locker', 'settings (ms)', 'kill -9', 'kill -9 expected', 'graceful', 'graceful expected'],
    rows.map(({ scenario: s, kill, graceful }) => [
      s.name,
      settingsText(DEFAULT, s),
      sec(kill.samples[0] ?? Number.NaN),
      range(expected(DEFAULT, s, 'kill'), sec),
      sec(graceful.samples[0] ?? Number.NaN),
      range(expected(DEFAULT, s, 'graceful'), sec),
    ]),
  );
  reportDemotions(rows);
  say();
}

function reportDemotions(rows: FailoverRow[]): void {
  const demoted = rows.filter((r) => r.kill.demotions + r.graceful.demotions > 0);
  for (const r of demoted) {
    say();
    say(
      `Note: ${r.scenario.name}: ${r.kill.demotions + r.graceful.demotions} process(es) reported a demotion (a spurious loss of mastership).`,
    );
  }
}

/** Failover with the fast safe configuration, several samples per locker and stop mode. */
export const fastFailover: StoreSection = {
  name: 'fast',
  run: async (results) => {
    await part('1. failover, fast configuration', async () => {
      results.fast = await failover(FAST, FAST_SAMPLES);
    });
    printFast(results.fast);
  },
};

/** Failover with our default configuration, one sample per locker and stop mode. */
export const defaultFailover: StoreSection = {
  name: 'default',
  run: async (results) => {
    await part('1. failover, default configuration', async () => {
      results.default = await failover(DEFAULT, 1);
    });
    printDefault(results.default);
  },
};

if (isMain(import.meta.url)) await runStoreBench([fastFailover, defaultFailover]);
