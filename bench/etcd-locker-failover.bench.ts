/**
 * Failover of `locksmith serve --ha etcd` against etcd's own Election and against `--ha
 * lease-database` on PostgreSQL, all at the same lease (2 s, renewed every third of it):
 * `npm run bench:etcd-failover` (a script, never a test). Skipped (exit 0) where `etcd` is not
 * installed; the PostgreSQL row is skipped where BENCH_PG (default
 * postgres://postgres@127.0.0.1:5432/test) does not answer.
 *
 * 1. `serve --ha etcd` on a 3-member etcd cluster (started once; a fresh election name and data
 *    directory per sample): two servers on one data directory, a client connected to both
 *    (`connect([a, b])`); from the kill -9 of the master to the first plain put that succeeds.
 * 2. etcd's own Election at TTL 2 s: two candidates (bench/etcd-election-child.ts, each its own
 *    process running Go's concurrency.Election recipe on the etcd3 client); from the kill -9 of
 *    the leader's process to the other one observing that it leads (CLOCK_MONOTONIC, shared by
 *    every process). No locker on etcd can fail over faster: this is the floor.
 * 3. `serve --ha lease-database --db <BENCH_PG>`, a fresh lock table per run (dropped at the
 *    end), measured as in 1.
 * 4. etcd's keep-alive cost: the CPU time (utime + stime, /proc/<pid>/stat) of the three members
 *    and the gRPC messages they received (grpc_server_msg_received_total of /metrics) over
 *    CPU_SECONDS (default 10) with one idle `serve --ha etcd` master and one slave, minus the
 *    same with no server.
 *
 * FAILOVER_SAMPLES (default 9) samples each. The kill falls at a random point of the renew
 * period (300 ms + U(0, renew period) after the put before it).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import pg from 'pg';
import {
  EtcdCluster,
  etcdVersion,
  freePort,
  killAll,
  LocksmithServe,
  type ServeFailover,
  serveFailover,
  tempDir,
} from './etcd-support.js';
import { machineHeader } from './server-support.js';
import { fmt, median, nowNs, ratio, repoRoot, say, sayTable, sleep, verdict } from './support.js';

const SAMPLES = Number(process.env.FAILOVER_SAMPLES ?? 9);
const CPU_SECONDS = Number(process.env.CPU_SECONDS ?? 10);
const PG_URL = process.env.BENCH_PG ?? 'postgres://postgres@127.0.0.1:5432/test';
const LEASE_S = 2;
/**
 * A third of the lease: what the etcd3 client's lease keep-alive (and so the Election row)
 * uses. The time from a kill to the lease's expiry is the TTL minus the time since the last
 * renewal, so a different period would tilt the comparison by half its difference.
 */
const RENEW_MS = Math.round((LEASE_S * 1000) / 3);
const LEASE_ARGS = ['--lease', `${LEASE_S}s`, '--renew', `${RENEW_MS}ms`];
const CHILD = join(repoRoot, 'dist-test/bench/etcd-election-child.js');
/** The election children: etcd-support's killAll does not know them. */
const children = new Set<ChildProcess>();

function progress(text: string): void {
  process.stderr.write(`  ${text}\n`);
}

function killChildren(): void {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  children.clear();
}

function rand(): string {
  return randomBytes(4).toString('hex');
}

/** Kill at a random point of the renew period. */
function settle(): Promise<void> {
  return sleep(300 + Math.random() * RENEW_MS);
}

// --- 1 and 3: locksmith serve ----------------------------------------------------------------

/** A sample of `serve` with `ha`: a plain put, the master killed at a random point of its renew period. */
function serveSample(ha: readonly string[]): Promise<ServeFailover> {
  return serveFailover(ha, { rowLock: false, killAfterMs: () => 300 + Math.random() * RENEW_MS });
}

function etcdServeArgs(etcd: EtcdCluster, election: string): string[] {
  const urls = etcd.members.map((m) => m.clientUrl).join(',');
  return ['--ha', 'etcd', '--etcd', urls, '--election', election, ...LEASE_ARGS];
}

// --- 2. etcd's own Election ------------------------------------------------------------------

/** An election candidate process; `leader` resolves with the ns it saw itself lead. */
function candidate(
  etcd: EtcdCluster,
  election: string,
): { child: ChildProcess; leader: Promise<bigint> } {
  const urls = etcd.members.map((m) => m.clientUrl).join(',');
  const child = spawn(process.execPath, [CHILD, urls, election, String(LEASE_S)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const leader = new Promise<bigint>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    lines.on('line', (line) => {
      const m = /^leader (\d+)$/.exec(line);
      if (m !== null) resolve(BigInt(m[1] as string));
    });
    child.once('exit', (code, signal) =>
      reject(new Error(`election child exited (${code ?? signal}): ${stderr}`)),
    );
  });
  leader.catch(() => undefined);
  return { child, leader };
}

/** One sample: ms from the leader's kill -9 to the waiting candidate leading. */
async function electionFailover(etcd: EtcdCluster): Promise<number> {
  const election = `bench-election/${rand()}`;
  const probe = etcd.client();
  const first = candidate(etcd, election);
  let second: ReturnType<typeof candidate> | undefined;
  try {
    await withTimeout(first.leader, 30_000, 'first candidate leading');
    second = candidate(etcd, election);
    // The second candidate is waiting once its key is in.
    const deadline = Date.now() + 30_000;
    while ((await probe.getAll().prefix(`${election}/`).count()) < 2) {
      if (Date.now() > deadline) throw new Error('the second candidate never campaigned');
      await sleep(20);
    }
    await settle();
    const killed = nowNs();
    first.child.kill('SIGKILL');
    const led = await withTimeout(second.leader, 60_000, 'second candidate leading');
    return Number(led - killed) / 1e6;
  } finally {
    probe.close();
    first.child.kill('SIGKILL');
    second?.child.kill('SIGKILL');
  }
}

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

// --- 4. keep-alive cost ----------------------------------------------------------------------

const TICKS_PER_SECOND = 100; // USER_HZ, 100 on Linux

/** utime + stime of `pid`, ms. */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) in parentheses.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / TICKS_PER_SECOND;
}

/** The gRPC messages a member received so far, by method (its /metrics). */
async function grpcReceived(clientUrl: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${clientUrl}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^grpc_server_msg_received_total\{([^}]*)\} (\S+)$/.exec(line);
    if (m === null) continue;
    const method = /grpc_method="([^"]+)"/.exec(m[1] as string)?.[1] ?? '?';
    out.set(method, (out.get(method) ?? 0) + Number(m[2]));
  }
  return out;
}

interface Usage {
  cpuMsPerSecond: number;
  requestsPerSecond: number;
  byMethod: Map<string, number>;
}

/** The members' CPU ms and received gRPC messages per second over CPU_SECONDS. */
async function etcdUsage(etcd: EtcdCluster): Promise<Usage> {
  const pids = etcd.members.map((m) => m.proc.pid as number);
  const received = async () => {
    const total = new Map<string, number>();
    for (const m of etcd.members) {
      for (const [k, v] of await grpcReceived(m.clientUrl)) total.set(k, (total.get(k) ?? 0) + v);
    }
    return total;
  };
  const cpu0 = pids.map(cpuMs);
  const req0 = await received();
  const t0 = performance.now();
  await sleep(CPU_SECONDS * 1000);
  const cpu1 = pids.map(cpuMs);
  const req1 = await received();
  const seconds = (performance.now() - t0) / 1000;
  const byMethod = new Map<string, number>();
  for (const [k, v] of req1) {
    const d = (v - (req0.get(k) ?? 0)) / seconds;
    if (d > 0) byMethod.set(k, d);
  }
  return {
    cpuMsPerSecond: cpu1.reduce((s, v, i) => s + v - (cpu0[i] ?? 0), 0) / seconds,
    requestsPerSecond: [...byMethod.values()].reduce((a, b) => a + b, 0),
    byMethod,
  };
}

/** [baseline, with an idle master and a slave]. */
async function keepAliveCost(etcd: EtcdCluster): Promise<[Usage, Usage]> {
  progress(`keep-alive cost: baseline ${CPU_SECONDS} s`);
  await sleep(1000);
  const base = await etcdUsage(etcd);
  const work = tempDir('locksmith-bench-etcd-idle-');
  const args = etcdServeArgs(etcd, `bench-idle/${rand()}`);
  const start = async () => {
    const port = await freePort();
    return new LocksmithServe(`${work}/data`, port, [...args, '--advertise', `127.0.0.1:${port}`]);
  };
  const a = await start();
  let b: LocksmithServe | undefined;
  try {
    await a.waitFor(/master \(token/, 60_000);
    b = await start();
    await b.waitFor(/slave/, 60_000);
    await sleep(1000);
    progress(`keep-alive cost: master + slave ${CPU_SECONDS} s`);
    return [base, await etcdUsage(etcd)];
  } finally {
    await a.kill('SIGKILL');
    await b?.kill('SIGKILL');
  }
}

// --- main ------------------------------------------------------------------------------------

async function samples<T>(label: string, sample: () => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    progress(`${label}: sample ${i + 1}/${SAMPLES}`);
    out.push(await sample());
  }
  return out;
}

async function postgresAnswers(): Promise<boolean> {
  const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3000 });
  try {
    await c.connect();
    await c.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => undefined);
  }
}

async function dropTable(name: string): Promise<void> {
  const c = new pg.Client({ connectionString: PG_URL });
  try {
    await c.connect();
    await c.query(`DROP TABLE IF EXISTS ${name}`);
  } finally {
    await c.end().catch(() => undefined);
  }
}

async function main(): Promise<void> {
  const version = etcdVersion();
  if (version === undefined) {
    say(
      'bench:etcd-failover skipped: `etcd` is not installed (Debian: apt-get install etcd-server).',
    );
    return;
  }
  const withPg = await postgresAnswers();
  const loadReport = await machineHeader([
    `${version}, 3 members on loopback (defaults: WAL fsync per commit, heartbeat 100 ms, election timeout 1 s)`,
    `every locker at lease ${LEASE_S} s, renew ${RENEW_MS} ms (etcd3 client: keep-alive every TTL / 3 for the raw Election)`,
    withPg ? `PostgreSQL at ${PG_URL}` : `PostgreSQL at ${PG_URL} did not answer: its row skipped`,
  ]);
  say();

  const etcd = await EtcdCluster.start(3);
  let etcdServe: ServeFailover[];
  let election: number[];
  let cost: [Usage, Usage];
  try {
    cost = await keepAliveCost(etcd);
    etcdServe = await samples('serve --ha etcd', () =>
      serveSample(etcdServeArgs(etcd, `bench-serve/${rand()}`)),
    );
    election = await samples('etcd Election', () => electionFailover(etcd));
  } finally {
    killChildren();
    await etcd.close();
  }

  let pgServe: ServeFailover[] | undefined;
  if (withPg) {
    const lockTable = `bench_lock_${rand()}`;
    const ha = ['--ha', 'lease-database', '--db', PG_URL, '--lock-table', lockTable, ...LEASE_ARGS];
    try {
      pgServe = await samples('serve --ha lease-database (PostgreSQL)', () => serveSample(ha));
    } finally {
      await dropTable(lockTable);
    }
  }

  const floor = median(election);
  const row = (name: string, s: readonly number[], promoted?: readonly number[]) => [
    name,
    `${fmt(median(s))} ms`,
    `${fmt(Math.min(...s))} ms`,
    `${fmt(Math.max(...s))} ms`,
    ratio(median(s) / floor),
    promoted === undefined ? '—' : `${fmt(median(promoted))} ms`,
  ];
  const serveRow = (name: string, f: readonly ServeFailover[]) =>
    row(
      name,
      f.map((x) => x.put),
      f.map((x) => x.promoted),
    );
  const rows = [
    serveRow('locksmith serve --ha etcd (3 members)', etcdServe),
    row("etcd's own Election (Go recipe, etcd3 client)", election),
  ];
  if (pgServe !== undefined) {
    rows.push(serveRow('locksmith serve --ha lease-database (PostgreSQL)', pgServe));
  }
  sayTable(
    `### Failover: kill -9 of the master / leader → first put through the client / new leader (lease ${LEASE_S} s, renew ${RENEW_MS} ms, ${SAMPLES} samples)`,
    ['system', 'median', 'min', 'max', '/ etcd Election', 'slave says master (median)'],
    rows,
  );
  say();
  const samplesOf = (name: string, s: readonly number[]) =>
    say(`- ${name} samples (ms): ${s.map((v) => fmt(v)).join(', ')}`);
  samplesOf(
    'serve --ha etcd, put',
    etcdServe.map((x) => x.put),
  );
  samplesOf(
    'serve --ha etcd, slave says master',
    etcdServe.map((x) => x.promoted),
  );
  samplesOf('etcd Election', election);
  if (pgServe !== undefined) {
    samplesOf(
      'serve --ha lease-database, put',
      pgServe.map((x) => x.put),
    );
    samplesOf(
      'serve --ha lease-database, slave says master',
      pgServe.map((x) => x.promoted),
    );
  }
  say();

  const [base, idle] = cost;
  const methods = [...new Set([...base.byMethod.keys(), ...idle.byMethod.keys()])].sort();
  sayTable(
    `### etcd's side of an idle serve --ha etcd master + one slave (3 members summed, ${CPU_SECONDS} s each)`,
    ['figure', 'no server (baseline)', 'master + slave', 'difference'],
    [
      [
        'etcd CPU (ms per second)',
        fmt(base.cpuMsPerSecond),
        fmt(idle.cpuMsPerSecond),
        fmt(idle.cpuMsPerSecond - base.cpuMsPerSecond),
      ],
      [
        'gRPC messages received per second',
        fmt(base.requestsPerSecond),
        fmt(idle.requestsPerSecond),
        fmt(idle.requestsPerSecond - base.requestsPerSecond),
      ],
      ...methods.map((m) => {
        const b = base.byMethod.get(m) ?? 0;
        const i = idle.byMethod.get(m) ?? 0;
        return [`… ${m} per second`, fmt(b), fmt(i), fmt(i - b)];
      }),
    ],
  );
  say();
  say(
    `- etcd CPU ms per second per master (with its slave): ${fmt(idle.cpuMsPerSecond - base.cpuMsPerSecond)}`,
  );
  say();

  const ours = median(etcdServe.map((x) => x.put));
  const goals: string[][] = [
    [
      'serve --ha etcd vs etcd Election (median)',
      '≤ 1.1× etcd Election',
      ratio(ours / floor),
      verdict(ours <= 1.1 * floor),
    ],
  ];
  if (pgServe !== undefined) {
    const theirs = median(pgServe.map((x) => x.put));
    goals.push([
      'serve --ha etcd vs lease-database on PostgreSQL (median)',
      '< lease-database, same lease',
      ratio(ours / theirs),
      verdict(ours < theirs),
    ]);
  }
  sayTable('### Goals', ['goal', 'target', 'ratio', 'verdict'], goals);
  say();
  say(`- ${await loadReport()}`);
}

function cleanUp(): void {
  killChildren();
  killAll();
}

process.on('exit', cleanUp);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    cleanUp();
    process.exit(130);
  });
}
try {
  await main();
} finally {
  cleanUp();
}
