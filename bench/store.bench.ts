/**
 * Store-locker benchmarks: `npm run bench:store` (a script, never a test).
 *
 * 1. Failover: a master and a standby, each a real process (bench/store-child.ts: a Supervisor
 *    with a no-op service), for SharedFileLocker and for DatabaseLocker and LeaseDatabaseLocker
 *    on SQLite, PostgreSQL and MariaDB. Timed from the parent's `kill()` (SIGKILL, or SIGTERM
 *    for a graceful stop) to the standby's `supervisor.start()` resolving, both read on
 *    CLOCK_MONOTONIC. Our fast safe configuration gets several samples; our default
 *    configuration (10 s intervals) one sample each, next to the range its settings imply.
 * 2. The same failover for ActiveMQ Classic's and Kubernetes client-go's defaults, as a model
 *    of their poll and renew loops (formulas and a seeded Monte Carlo), not a measurement.
 * 3. Round trips: the lease locker's acquire, renew (keepAlive), release and a standby's try,
 *    against the database's own cheapest lock (PostgreSQL `pg_try_advisory_lock`, MariaDB
 *    `GET_LOCK(name, 0)`, SQLite `BEGIN IMMEDIATE`) on the same database.
 *
 *   node dist-test/bench/store.bench.js [fast] [default] [model] [micro]   (default: all)
 *
 * Environment: LOCKSMITH_TEST_POSTGRES, LOCKSMITH_TEST_MYSQL (the URLs), STORE_BENCH_SAMPLES
 * (fast-configuration samples per locker and stop mode, default 7).
 *
 * Every lock table is `LOCK_BENCH_<random>_<n>` and dropped at the end; every child process is
 * killed at the end, also on error or Ctrl-C.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, release as kernelRelease, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { LockObtainFailedError } from '../src/core/errors.js';
import {
  DEFAULT_DATABASE_KEEP_ALIVE_PERIOD,
  DEFAULT_DATABASE_QUERY_TIMEOUT,
  DEFAULT_LOCK_ACQUIRE_SLEEP_INTERVAL,
  DEFAULT_SHARED_FILE_KEEP_ALIVE_PERIOD,
  defaultLeaseStatements,
  LeaseDatabaseLocker,
} from '../src/store/index.js';
import type { Dialect } from '../src/store/sql/dialect.js';
import { type DatabaseSource, openDialect } from '../src/store/sql/open-dialect.js';
// `?` → `$1, $2, …`: how the dialect runs our statements, here on a bare pg client.
import { dollars } from '../src/store/sql/postgres-dialect.js';
import type { ChildConfig } from './store-child.js';
import { fmt, median, nowNs, percentile, ratio, repoRoot, sleep, table } from './support.js';

const POSTGRES_URL =
  process.env.LOCKSMITH_TEST_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432/test';
const MYSQL_URL = process.env.LOCKSMITH_TEST_MYSQL ?? 'mysql://root@127.0.0.1:3306/test';
const FAST_SAMPLES = Number(process.env.STORE_BENCH_SAMPLES ?? 7);
/** After the standby reports `waiting`: let its first attempt run, then a random phase. */
const SETTLE_MS = 300;
const MICRO_ROUNDS = 5;
const MICRO_PER_ROUND = 100;
const MICRO_WARMUP = 20;
/**
 * Untimed pause before every timed operation. Lock operations are never back to back in real
 * use, and the pause makes every renewal really write: within one millisecond of the database's
 * clock a renewal would store the same TIME, and SQLite and InnoDB then skip the write (and the
 * commit's flush) altogether.
 */
const MICRO_GAP_MS = 2;

/**
 * The children run from a private copy of the compiled tree (git-ignored `bench/.build/`), so
 * that a rebuild of `dist-test/` during the run (another `npm test`) cannot break them.
 */
const snapshot = join(repoRoot, 'bench/.build/store-snapshot');
const childScript = join(snapshot, 'bench/store-child.js');
const work = mkdtempSync(join(tmpdir(), 'locksmith-store-bench-'));
const runId = randomBytes(4).toString('hex').toUpperCase();
let tableCount = 0;
const tables: { db: 'postgres' | 'mysql'; name: string }[] = [];

function say(text = ''): void {
  process.stdout.write(`${text}\n`);
}
function progress(text: string): void {
  process.stderr.write(`  ${text}\n`);
}

/** A fresh lock table name, remembered so that it is dropped at the end. */
function newTable(db: DbKind): string {
  const name = `LOCK_BENCH_${runId}_${++tableCount}`;
  if (db === 'postgres' || db === 'mysql') tables.push({ db, name });
  return name;
}

// ---------------------------------------------------------------------------------------------
// Machine and load
// ---------------------------------------------------------------------------------------------

/** `/proc/stat` totals: [steal, all] jiffies; undefined off Linux. */
function cpuTimes(): [number, number] | undefined {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]?.trim().split(/\s+/).slice(1);
    if (fields === undefined) return undefined;
    const n = fields.map(Number);
    return [n[7] ?? 0, n.reduce((a, b) => a + b, 0)];
  } catch {
    return undefined;
  }
}

interface Load {
  part: string;
  steal: string;
  load: string;
}
const loads: Load[] = [];

/** Runs one part, recording the hypervisor's steal and the load averages around it. */
async function part(name: string, body: () => Promise<void>): Promise<void> {
  const before = cpuTimes();
  const loadBefore = loadavg()[0] ?? 0;
  await body();
  const after = cpuTimes();
  const steal =
    before !== undefined && after !== undefined && after[1] > before[1]
      ? `${fmt((100 * (after[0] - before[0])) / (after[1] - before[1]))} %`
      : 'n/a';
  loads.push({
    part: name,
    steal,
    load: `${loadBefore.toFixed(2)} → ${(loadavg()[0] ?? 0).toFixed(2)}`,
  });
}

async function machine(): Promise<void> {
  say('# locksmith store-locker benchmarks');
  say();
  say(`- node ${process.version}, ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown cpu'}),`);
  say(`  ${(totalmem() / 2 ** 30).toFixed(0)} GiB, kernel ${kernelRelease()}`);
  const versions: string[] = [];
  try {
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    try {
      const r = await client.query(
        "SELECT current_setting('server_version') AS v, current_setting('synchronous_commit') AS s, current_setting('fsync') AS f",
      );
      const row = r.rows[0] as { v: string; s: string; f: string };
      versions.push(`PostgreSQL ${row.v} (synchronous_commit ${row.s}, fsync ${row.f})`);
    } finally {
      await client.end();
    }
  } catch (err) {
    versions.push(`PostgreSQL unreachable (${String(err)})`);
  }
  try {
    const conn = await mysql.createConnection({ uri: MYSQL_URL });
    try {
      const [rows] = await conn.query(
        'SELECT VERSION() AS v, @@innodb_flush_log_at_trx_commit AS f, @@innodb_lock_wait_timeout AS w',
      );
      const row = (rows as { v: string; f: number; w: number }[])[0];
      versions.push(
        `MariaDB/MySQL ${row?.v} (innodb_flush_log_at_trx_commit ${row?.f}, innodb_lock_wait_timeout ${row?.w} s)`,
      );
    } finally {
      await conn.end();
    }
  } catch (err) {
    versions.push(`MariaDB/MySQL unreachable (${String(err)})`);
  }
  const memory = new Database(':memory:');
  const sqliteVersion = memory.prepare('SELECT sqlite_version()').pluck().get() as string;
  memory.close();
  versions.push(`SQLite ${sqliteVersion} (better-sqlite3, default rollback journal)`);
  for (const v of versions) say(`- ${v}`);
  const git = spawnSync('git', ['describe', '--always', '--dirty'], {
    cwd: repoRoot,
    encoding: 'utf8',
  });
  say(`- ${new Date().toISOString()}, commit ${git.status === 0 ? git.stdout.trim() : 'unknown'}`);
  const [l1, l5, l15] = loadavg();
  say(
    `- load average at start ${l1?.toFixed(2)} / ${l5?.toFixed(2)} / ${l15?.toFixed(2)} (1 / 5 / 15 min)`,
  );
  say();
}

// ---------------------------------------------------------------------------------------------
// Child processes
// ---------------------------------------------------------------------------------------------

const live = new Set<Contender>();

interface Event {
  index: number;
  ns: bigint;
  rest: string;
}

/** A store-child.js process; its lines are kept, and `waitFor` finds the next one of a kind. */
class Contender {
  readonly proc: ChildProcess;
  readonly lines: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  #stderr = '';
  #gone: Error | undefined;
  #notify: (() => void)[] = [];

  constructor(config: ChildConfig) {
    this.proc = spawn(process.execPath, [childScript, JSON.stringify(config)], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    live.add(this);
    this.proc.stderr?.on('data', (d: Buffer) => {
      this.#stderr += d.toString();
    });
    createInterface({ input: this.proc.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      this.lines.push(line);
      for (const n of this.#notify.splice(0)) n();
    });
    this.exited = new Promise((resolve) => {
      this.proc.once('exit', (code, signal) => {
        live.delete(this);
        this.#gone = new Error(
          `child exited (code ${code}, signal ${signal}); lines: ${this.lines.join(' | ')}; stderr: ${this.#stderr.trim()}`,
        );
        for (const n of this.#notify.splice(0)) n();
        resolve({ code, signal });
      });
    });
  }

  /** The first line from `from` on that starts with `word`. */
  find(word: string, from = 0): Event | undefined {
    for (let i = from; i < this.lines.length; i++) {
      const line = this.lines[i] as string;
      if (line.startsWith(`${word} `)) {
        const [, ns, ...rest] = line.split(' ');
        return { index: i, ns: BigInt(ns ?? '0'), rest: rest.join(' ') };
      }
    }
    return undefined;
  }

  /** Waits for a line starting with `word`; rejects on timeout, an `error` line, or exit. */
  async waitFor(word: string, timeoutMs: number, from = 0): Promise<Event> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const found = this.find(word, from);
      if (found !== undefined) return found;
      const error = this.find('error', from);
      if (error !== undefined) throw new Error(`child failed: ${error.rest}`);
      if (this.#gone !== undefined) throw this.#gone;
      const left = deadline - performance.now();
      if (left <= 0) {
        throw new Error(
          `no "${word}" within ${timeoutMs} ms; lines: ${this.lines.join(' | ')}; stderr: ${this.#stderr.trim()}`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, left);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.#notify.push(done);
      });
    }
  }

  kill(signal: NodeJS.Signals): void {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill(signal);
  }
}

/** Kills every child still alive and waits for them. */
async function killAll(): Promise<void> {
  const all = [...live];
  for (const c of all) c.kill('SIGKILL');
  await Promise.all(all.map((c) => c.exited));
}

// ---------------------------------------------------------------------------------------------
// 1. Failover
// ---------------------------------------------------------------------------------------------

type DbKind = 'file' | 'sqlite' | 'postgres' | 'mysql';
type LockerKind = ChildConfig['locker'];
type StopMode = 'kill' | 'graceful';

interface Scenario {
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
  cycleMs: DEFAULT_LOCK_ACQUIRE_SLEEP_INTERVAL,
  timeoutMs: 60_000,
};

/** The settings a profile gives one locker, resolved to numbers. */
function settings(p: Profile, s: Scenario): { interval: number; period: number; query: number } {
  const interval =
    p.interval === undefined
      ? DEFAULT_LOCK_ACQUIRE_SLEEP_INTERVAL
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

interface FailoverRow {
  scenario: Scenario;
  kill: Series;
  graceful: Series;
}

function ms(value: number): string {
  return value >= 10_000 ? `${(value / 1000).toFixed(2)} s` : `${fmt(value)} ms`;
}

function sec(value: number): string {
  return `${(value / 1000).toFixed(2)} s`;
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
  say('All samples (ms), in order:');
  say();
  say(
    table(
      ['locker', 'kill -9', 'graceful'],
      rows.map(({ scenario: s, kill, graceful }) => [
        s.name,
        kill.samples.map((v) => fmt(v)).join(' '),
        graceful.samples.map((v) => fmt(v)).join(' '),
      ]),
    ),
  );
  reportDemotions(rows);
  say();
}

function printDefault(rows: FailoverRow[]): void {
  say('### Default configuration (one sample per locker and stop mode)');
  say();
  say(
    table(
      ['locker', 'settings (ms)', 'kill -9', 'kill -9 expected', 'graceful', 'graceful expected'],
      rows.map(({ scenario: s, kill, graceful }) => [
        s.name,
        settingsText(DEFAULT, s),
        sec(kill.samples[0] ?? Number.NaN),
        range(expected(DEFAULT, s, 'kill'), sec),
        sec(graceful.samples[0] ?? Number.NaN),
        range(expected(DEFAULT, s, 'graceful'), sec),
      ]),
    ),
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

// ---------------------------------------------------------------------------------------------
// 2. ActiveMQ and Kubernetes defaults: a model, not a measurement
// ---------------------------------------------------------------------------------------------

/** mulberry32: a small seeded PRNG, so the model prints the same figures on every run. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Poll times of a loop with gaps drawn by `gap`, started long before 0 (stationary phase). */
function polls(gap: () => number, until: number): number[] {
  const out: number[] = [];
  let t = -120_000;
  while (t < until) {
    t += gap();
    out.push(t);
  }
  return out;
}

interface Model {
  system: string;
  settings: string;
  kill: Simulated;
  killFormula: string;
  graceful: Simulated;
  gracefulFormula: string;
}

interface Simulated {
  p50: number;
  text: string;
}

/** p50 and max of `trials` draws of `f` (ms). */
function simulate(f: (rand: () => number) => number, trials = 50_000): Simulated {
  const rand = prng(42);
  const values: number[] = [];
  for (let i = 0; i < trials; i++) values.push(f(rand));
  const p50 = percentile(values, 50);
  return { p50, text: `${sec(p50)} / ${sec(Math.max(...values))}` };
}

/**
 * The kill happens at time 0. Loops that sleep a fixed interval after each attempt poll at a
 * uniformly random phase; client-go's candidates poll with `wait.JitterUntil(RetryPeriod,
 * JitterFactor 1.2)`, i.e. gaps uniform in [2 s, 4.4 s), and its leader renews every
 * RetryPeriod (`wait.Until`). A client-go candidate counts the lease from the time it last
 * SAW the record change (`observedTime`), not from the renewal itself.
 */
function models(): Model[] {
  const amqInterval = DEFAULT_LOCK_ACQUIRE_SLEEP_INTERVAL;
  const firstAfter = (list: number[], t: number) => list.find((x) => x >= t) ?? Number.NaN;
  const fixedPoll = (rand: () => number) => rand() * amqInterval;
  const leaseRenew = 5_000;
  const k8sLease = 15_000;
  const retry = 2_000;
  const jitter = (rand: () => number) => () => retry + rand() * 1.2 * retry;
  const k8sKill = (rand: () => number) => {
    const lastRenew = -rand() * retry;
    const p = polls(jitter(rand), 60_000);
    const observed = firstAfter(p, lastRenew);
    return firstAfter(p, observed + k8sLease);
  };
  return [
    {
      system: 'ActiveMQ SharedFileLocker (KahaDB)',
      settings: 'lockAcquireSleepInterval 10 s, lockKeepAlivePeriod 0',
      kill: simulate(fixedPoll),
      killFormula: 'next poll: U(0, 10 s)',
      graceful: simulate(fixedPoll),
      gracefulFormula: 'next poll: U(0, 10 s)',
    },
    {
      system: 'ActiveMQ DefaultDatabaseLocker (JDBC)',
      settings: 'standby blocked in SELECT … FOR UPDATE; sleep 10 s after an error',
      kill: { p50: 0, text: '≈ 0 s / ≈ 0 s (PostgreSQL); 0 s / 10.00 s (MariaDB)' },
      killFormula:
        'the database frees the row when the session ends; no takeover pause. MariaDB: the wait times out every 50 s (innodb_lock_wait_timeout), then a 10 s sleep',
      graceful: { p50: 0, text: 'the same' },
      gracefulFormula: 'rollback and close free the row',
    },
    {
      system: 'ActiveMQ LeaseDatabaseLocker',
      settings: 'lease = lockAcquireSleepInterval 10 s, renew every 5 s (see below), poll 10 s',
      kill: simulate((rand) => {
        const expiry = -rand() * leaseRenew + amqInterval;
        const phase = rand() * amqInterval;
        return expiry + ((((phase - expiry) % amqInterval) + amqInterval) % amqInterval);
      }),
      killFormula: 'lease − U(0, renew) + next poll U(0, 10 s): 5 – 20 s',
      graceful: simulate(fixedPoll),
      gracefulFormula: 'release sets TIME 0; next poll U(0, 10 s)',
    },
    {
      system: 'Kubernetes client-go leaderelection',
      settings: 'LeaseDuration 15 s, RenewDeadline 10 s, RetryPeriod 2 s',
      kill: simulate(k8sKill),
      killFormula:
        'LeaseDuration after the candidate last saw a renewal (renewals every 2 s, candidate polls every 2–4.4 s), then its next poll',
      graceful: simulate((rand) => firstAfter(polls(jitter(rand), 10_000), 0)),
      gracefulFormula:
        'ReleaseOnCancel (empty holder): the candidate’s next poll, 0–4.4 s; without ReleaseOnCancel (the default) as kill -9',
    },
  ];
}

function printModels(list: Model[]): void {
  say('### ActiveMQ and Kubernetes defaults (model, not measured)');
  say();
  say(
    table(
      ['system', 'settings', 'kill -9 p50 / max', 'how', 'graceful p50 / max', 'how'],
      list.map((m) => [
        m.system,
        m.settings,
        m.kill.text,
        m.killFormula,
        m.graceful.text,
        m.gracefulFormula,
      ]),
    ),
  );
  say();
}

/**
 * Ours against the anchors, p50 against p50: our default configuration (one sample, so the
 * ratio carries that sample's luck), our fast one, the ActiveMQ locker of the same kind and
 * client-go (graceful: with ReleaseOnCancel).
 */
function printComparison(fast: FailoverRow[], dflt: FailoverRow[], list: Model[]): void {
  const amq = (s: Scenario) => list[s.locker === 'file' ? 0 : s.locker === 'database' ? 1 : 2];
  const k8s = list[3];
  if (k8s === undefined) return;
  const x = (a: number, b: number) => (b > 0 ? ratio(a / b) : '—');
  for (const mode of ['kill', 'graceful'] as const) {
    say(
      `### Ours against ActiveMQ and client-go: ${mode === 'kill' ? 'kill -9' : 'graceful stop'}`,
    );
    say();
    say(
      table(
        [
          'locker',
          'ours, default (1 sample)',
          'ours, fast p50',
          'ActiveMQ counterpart p50 (model)',
          'default ÷ ActiveMQ',
          'default ÷ client-go',
          'fast ÷ client-go',
        ],
        dflt.map((row) => {
          const s = row.scenario;
          const ours = row[mode].samples[0] ?? Number.NaN;
          const f = fast.find((r) => r.scenario === s);
          const fastP50 = f === undefined ? Number.NaN : median(f[mode].samples);
          const a = amq(s);
          const anchor = a === undefined ? Number.NaN : a[mode].p50;
          return [
            s.name,
            sec(ours),
            f === undefined ? '—' : ms(fastP50),
            a === undefined ? '—' : `${sec(anchor)} (${a.system.replace('ActiveMQ ', '')})`,
            x(ours, anchor),
            x(ours, k8s[mode].p50),
            f === undefined ? '—' : x(fastP50, k8s[mode].p50),
          ];
        }),
      ),
    );
    say();
  }
  say(
    `client-go p50 (model): kill -9 ${sec(k8s.kill.p50)}, graceful with ReleaseOnCancel ${sec(k8s.graceful.p50)}.`,
  );
  say();
}

// ---------------------------------------------------------------------------------------------
// 3. Round trips: the lease locker against the database's own cheapest lock
// ---------------------------------------------------------------------------------------------

interface MicroOp {
  name: string;
  /** Timed. */
  run(): Promise<unknown>;
  /** Untimed, around each run. */
  before?: () => Promise<unknown>;
  after?: () => Promise<unknown>;
  /** Untimed, around each round's block of runs. */
  enter?: () => Promise<unknown>;
  leave?: () => Promise<unknown>;
  floor?: boolean;
}

interface MicroResult {
  name: string;
  samples: number[];
  rounds: number[];
  statements: number;
  floor: boolean;
}

/** Counts the statements sent through `target[method]` (a bench-side wrapper, nothing in src). */
function countCalls(target: object, method: string, counter: { n: number }): void {
  const t = target as Record<string, unknown>;
  const original = t[method] as (...args: unknown[]) => unknown;
  t[method] = function (this: unknown, ...args: unknown[]) {
    counter.n++;
    return original.apply(this, args);
  };
}

async function measure(ops: MicroOp[], counter: { n: number }): Promise<MicroResult[]> {
  const results = ops.map((op) => ({
    name: op.name,
    samples: [] as number[],
    rounds: [] as number[],
    statements: 0,
    floor: op.floor === true,
  }));
  for (let round = 0; round < MICRO_ROUNDS; round++) {
    // Rotate the order so that no operation always follows the same one.
    for (let k = 0; k < ops.length; k++) {
      const index = (k + round) % ops.length;
      const op = ops[index] as MicroOp;
      const result = results[index] as MicroResult;
      await op.enter?.();
      try {
        const roundSamples: number[] = [];
        const total = MICRO_PER_ROUND + (round === 0 ? MICRO_WARMUP : 0);
        for (let i = 0; i < total; i++) {
          await sleep(MICRO_GAP_MS);
          await op.before?.();
          const n0 = counter.n;
          const t0 = nowNs();
          await op.run();
          const t1 = nowNs();
          const n1 = counter.n;
          await op.after?.();
          if (round === 0 && i < MICRO_WARMUP) continue;
          roundSamples.push(Number(t1 - t0) / 1000);
          result.statements += n1 - n0;
        }
        result.samples.push(...roundSamples);
        result.rounds.push(median(roundSamples));
      } finally {
        await op.leave?.();
      }
    }
  }
  for (const r of results) r.statements /= r.samples.length;
  return results;
}

function printMicro(title: string, results: MicroResult[], floorName: string): void {
  const floor = results.find((r) => r.name === floorName);
  const floorP50 = floor === undefined ? Number.NaN : median(floor.samples);
  say(`#### ${title}`);
  say();
  say(
    table(
      ['operation', 'statements', 'p50 µs', 'p99 µs', 'vs floor (p50)', 'round medians µs'],
      results.map((r) => [
        r.name,
        fmt(r.statements, 2),
        fmt(median(r.samples)),
        fmt(percentile(r.samples, 99)),
        ratio(median(r.samples) / floorP50),
        r.rounds.map((v) => fmt(v)).join(' '),
      ]),
    ),
  );
  say();
}

const LEASE = 10_000;

/**
 * The lease locker's operations on one database, given its handle, plus its renew statement run
 * on bare connections (diagnostics: the statement without the locker).
 */
function leaseOps(
  source: DatabaseSource,
  tableName: string,
  raws: { name: string; run: (sql: string, params: unknown[]) => Promise<unknown> }[],
): MicroOp[] {
  const make = (failIfLocked: boolean) =>
    new LeaseDatabaseLocker({
      database: source,
      lockTableName: tableName,
      lockAcquireSleepInterval: LEASE,
      failIfLocked,
    });
  const tryer = make(true);
  const holder = make(false);
  const keeper = make(false);
  const dialect: Dialect = openDialect(source);
  const statements = defaultLeaseStatements(dialect, tableName);
  const free = `UPDATE ${tableName} SET BROKER_NAME = NULL, TIME = 0 WHERE ID = 1`;
  const expectTrue = async (p: Promise<boolean>) => {
    if (!(await p)) throw new Error('keepAlive() returned false while holding the lease');
  };
  return [
    ...raws.map(
      (raw): MicroOp => ({
        name: `renew UPDATE, ${raw.name} (diagnostic)`,
        enter: () => keeper.start(),
        run: () => raw.run(statements.renew, [LEASE, keeper.leaseHolderId, keeper.token as number]),
        leave: () => keeper.stop(),
      }),
    ),
    {
      name: 'ours: keepAlive() (renew)',
      enter: () => keeper.start(),
      run: () => expectTrue(keeper.keepAlive()),
      leave: () => keeper.stop(),
    },
    {
      name: 'ours: acquire statement, one try, free lease',
      run: async () => {
        const r = await dialect.query(statements.acquire, [tryer.leaseHolderId, LEASE]);
        if (r.affected !== 1) throw new Error(`acquire changed ${r.affected} rows`);
      },
      after: () => dialect.query(free),
    },
    {
      name: 'ours: start(), free lease (acquire + confirm)',
      run: () => tryer.start(),
      after: () => tryer.stop(),
    },
    {
      name: 'ours: stop() (release)',
      before: () => tryer.start(),
      run: () => tryer.stop(),
    },
    {
      name: "ours: a standby's try, held lease (start() rejects)",
      enter: () => holder.start(),
      run: async () => {
        try {
          await tryer.start();
        } catch (err) {
          if (err instanceof LockObtainFailedError) return;
          throw err;
        }
        throw new Error('start() succeeded on a held lease');
      },
      leave: () => holder.stop(),
    },
  ];
}

async function microPostgres(): Promise<void> {
  const tableName = newTable('postgres');
  const counter = { n: 0 };
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 4 });
  pool.on('error', () => {});
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  const lazy = new pg.Client({ connectionString: POSTGRES_URL });
  await lazy.connect();
  try {
    await lazy.query('SET synchronous_commit TO off');
    countCalls(pool, 'query', counter);
    countCalls(client, 'query', counter);
    countCalls(lazy, 'query', counter);
    // Create the table once, outside the timing.
    const setup = new LeaseDatabaseLocker({
      database: { postgres: pool },
      lockTableName: tableName,
    });
    await setup.start();
    await setup.stop();
    const key = 0x10c5;
    const ops: MicroOp[] = [
      {
        name: 'floor: SELECT pg_try_advisory_lock($1)',
        floor: true,
        run: () => client.query('SELECT pg_try_advisory_lock($1)', [key]),
        after: () => client.query('SELECT pg_advisory_unlock($1)', [key]),
      },
      {
        name: 'floor: try_advisory_lock + advisory_unlock',
        floor: true,
        run: async () => {
          await client.query('SELECT pg_try_advisory_lock($1)', [key]);
          await client.query('SELECT pg_advisory_unlock($1)', [key]);
        },
      },
      {
        name: 'SELECT 1 through pg.Pool (diagnostic)',
        run: () => pool.query('SELECT 1'),
      },
      ...leaseOps({ postgres: pool }, tableName, [
        { name: 'bare client', run: (sql, params) => client.query(dollars(sql), params) },
        {
          // Without waiting for the WAL flush: what the commit's flush costs.
          name: 'bare client, synchronous_commit off',
          run: (sql, params) => lazy.query(dollars(sql), params),
        },
      ]),
    ];
    printMicro(
      'PostgreSQL (pg 8, a pg.Pool of 4 handed to the locker; floors on one pg.Client)',
      await measure(ops, counter),
      'floor: SELECT pg_try_advisory_lock($1)',
    );
  } finally {
    await client.end();
    await lazy.end();
    await pool.end();
  }
}

async function microMysql(): Promise<void> {
  const tableName = newTable('mysql');
  const counter = { n: 0 };
  const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 4, flags: ['FOUND_ROWS'] });
  const conn = await mysql.createConnection({ uri: MYSQL_URL, flags: ['FOUND_ROWS'] });
  try {
    countCalls(pool, 'query', counter);
    countCalls(conn, 'query', counter);
    const setup = new LeaseDatabaseLocker({ database: { mysql: pool }, lockTableName: tableName });
    await setup.start();
    await setup.stop();
    const name = `bench_${runId}`;
    const ops: MicroOp[] = [
      {
        name: 'floor: SELECT GET_LOCK(name, 0)',
        floor: true,
        run: () => conn.query('SELECT GET_LOCK(?, 0)', [name]),
        after: () => conn.query('SELECT RELEASE_LOCK(?)', [name]),
      },
      {
        name: 'floor: GET_LOCK + RELEASE_LOCK',
        floor: true,
        run: async () => {
          await conn.query('SELECT GET_LOCK(?, 0)', [name]);
          await conn.query('SELECT RELEASE_LOCK(?)', [name]);
        },
      },
      {
        name: 'SELECT 1 through the mysql2 pool (diagnostic)',
        run: () => pool.query('SELECT 1'),
      },
      ...leaseOps({ mysql: pool }, tableName, [
        { name: 'bare connection', run: (sql, params) => conn.query(sql, params) },
      ]),
    ];
    printMicro(
      'MariaDB (mysql2 3, a pool of 4 handed to the locker; floors on one connection)',
      await measure(ops, counter),
      'floor: SELECT GET_LOCK(name, 0)',
    );
  } finally {
    await conn.end();
    await pool.end();
  }
}

async function microSqlite(): Promise<void> {
  const tableName = newTable('sqlite');
  const path = join(work, 'micro.db');
  const counter = { n: 0 };
  const handle = new Database(path, { timeout: 0 });
  const floorDb = new Database(path, { timeout: 0 });
  try {
    countCalls(handle, 'prepare', counter);
    countCalls(floorDb, 'prepare', counter);
    countCalls(floorDb, 'exec', counter);
    const setup = new LeaseDatabaseLocker({
      database: { sqlite: handle },
      lockTableName: tableName,
    });
    await setup.start();
    await setup.stop();
    const ops: MicroOp[] = [
      {
        name: 'floor: BEGIN IMMEDIATE (the write lock)',
        floor: true,
        run: async () => floorDb.exec('BEGIN IMMEDIATE'),
        after: async () => floorDb.exec('ROLLBACK'),
      },
      {
        name: 'floor: BEGIN IMMEDIATE + ROLLBACK',
        floor: true,
        run: async () => {
          floorDb.exec('BEGIN IMMEDIATE');
          floorDb.exec('ROLLBACK');
        },
      },
      ...leaseOps({ sqlite: handle }, tableName, [
        { name: 'bare handle', run: async (sql, params) => floorDb.prepare(sql).run(...params) },
      ]),
    ];
    printMicro(
      'SQLite (better-sqlite3 12, one handle handed to the locker; floors on a second handle)',
      await measure(ops, counter),
      'floor: BEGIN IMMEDIATE (the write lock)',
    );
  } finally {
    handle.close();
    floorDb.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

async function dropTables(): Promise<void> {
  const pgTables = tables.filter((t) => t.db === 'postgres');
  const myTables = tables.filter((t) => t.db === 'mysql');
  if (pgTables.length > 0) {
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    try {
      for (const t of pgTables) await client.query(`DROP TABLE IF EXISTS ${t.name}`);
    } finally {
      await client.end();
    }
  }
  if (myTables.length > 0) {
    const conn = await mysql.createConnection({ uri: MYSQL_URL });
    try {
      for (const t of myTables) await conn.query(`DROP TABLE IF EXISTS ${t.name}`);
    } finally {
      await conn.end();
    }
  }
}

async function cleanup(): Promise<void> {
  await killAll();
  try {
    await dropTables();
  } catch (err) {
    process.stderr.write(`dropping the bench tables failed: ${String(err)}\n`);
  }
  rmSync(work, { recursive: true, force: true });
  rmSync(snapshot, { recursive: true, force: true });
}

function takeSnapshot(): void {
  rmSync(snapshot, { recursive: true, force: true });
  for (const dir of ['src', 'bench']) {
    cpSync(join(repoRoot, 'dist-test', dir), join(snapshot, dir), { recursive: true });
  }
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const wanted = (p: string) => args.length === 0 || args.includes(p);
  const started = performance.now();
  takeSnapshot();
  await machine();
  say('## 1. Failover');
  say();
  let fastRows: FailoverRow[] = [];
  let defaultRows: FailoverRow[] = [];
  if (wanted('fast')) {
    await part('1. failover, fast configuration', async () => {
      fastRows = await failover(FAST, FAST_SAMPLES);
    });
    printFast(fastRows);
  }
  if (wanted('default')) {
    await part('1. failover, default configuration', async () => {
      defaultRows = await failover(DEFAULT, 1);
    });
    printDefault(defaultRows);
  }
  if (wanted('model')) {
    const list = models();
    printModels(list);
    if (defaultRows.length > 0) printComparison(fastRows, defaultRows, list);
  }
  if (wanted('micro')) {
    say('## 2. Round trips: lease operations against the database’s own lock');
    say();
    await part('2. round trips', async () => {
      await microPostgres();
      await microMysql();
      await microSqlite();
    });
  }
  say('## Noise');
  say();
  say(
    table(
      ['part', 'steal, % of all CPU time', 'load average (1 min) before → after'],
      loads.map((l) => [l.part, l.steal, l.load]),
    ),
  );
  say();
  say(`Total time: ${fmt((performance.now() - started) / 1000)} s`);
}

let interrupted = false;
process.on('SIGINT', () => {
  if (interrupted) return;
  interrupted = true;
  process.stderr.write('interrupted: killing the children and dropping the tables\n');
  const exit = () => process.exit(130);
  cleanup().then(exit, exit);
});

try {
  await main();
} catch (err) {
  process.stderr.write(
    `store benchmark failed: ${err instanceof Error ? err.stack : String(err)}\n`,
  );
  process.exitCode = 1;
} finally {
  await cleanup();
}
