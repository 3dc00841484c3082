/**
 * A fleet of `locksmith serve --fleet` processes on PostgreSQL (issue 23): `npm run
 * bench:fleet` (a script, never a test). A table of 12 regions (split at b..l) on the test
 * database (`BENCH_PG`), each run its own table prefix, dropped afterwards. Measured:
 *
 * 1. **Takeover after kill -9** of one of 3 servers (`FLEET_SAMPLES` times, default 5, at the
 *    lease `FLEET_LEASE`, default 2s, renewed every quarter of it): from the kill to (a) every
 *    region served by a live server, as the survivors' status says, and (b) the first put to a
 *    row of the killed server's regions that succeeds, through a client that was connected to
 *    a survivor and had routed to the killed one (so it finds the new server itself).
 * 2. **Handover on SIGTERM**: the same, with a lease of 30 s, so that the time shows the
 *    handover, not the lease running out.
 * 3. **Puts per second through 1, 2 and 3 servers**: 8 clients (each connected to the first
 *    server and routing by key) × 16 puts in flight of 100-byte rows spread over the 12
 *    regions, fsync on, for BENCH_SECONDS after BENCH_WARMUP_MS.
 *
 * 4. **A live split in the fleet** under write load: 3 servers, 2 × N rows in the first region
 *    (N = 1,000 and 10,000), 32 puts in flight through one client, half on the rows the split
 *    moves; the split sent through a client of the first server (routed to the region's
 *    server): how long it took, and the slowest put that overlapped it.
 *
 * 5. **Row lock cycles** (lockRow + unlock) per second through 3 servers, 8 clients × 16 in
 *    flight on rows spread over the 12 regions: `--sessions durable` (each grant and unlock
 *    recorded in PostgreSQL, so locks move with their regions) beside `--sessions memory`.
 * 6. **A held lock through kill -9 of its server**: a client holds a lock on a row of the
 *    third server's region; from the kill to the first put under that same lock (adopted on
 *    the region's new server) that succeeds.
 * 7. **Leases in etcd** (`--fleet --ha etcd`, a 3-member etcd 3.4 cluster on loopback with
 *    etcd's default timings, started by the bench; skipped without Debian's `etcd-server`):
 *    1 and 6 at the same lease, with the leases in PostgreSQL and in etcd, one after the other.
 *    `FLEET_ONLY=etcd` runs 7 alone.
 *
 *   npm run build && npm run build:test && node dist-test/bench/fleet.bench.js
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { connect, type LocksmithClient } from '../src/client/locksmith-client.js';
import { parseDuration } from '../src/core/duration.js';
import { Put } from '../src/rows/index.js';
import { EtcdCluster, etcdVersion } from './etcd-support.js';
import { postgresAnswers } from './pg-support.js';
import { machineHeader, SECONDS, WARMUP_MS } from './server-support.js';
import { fmt, median, repoRoot, say, sayTable, sleep } from './support.js';

const PG = process.env.BENCH_PG ?? 'postgres://postgres@127.0.0.1:5432/test';
const SAMPLES = Number(process.env.FLEET_SAMPLES ?? 5);
const LEASE_MS = parseDuration(process.env.FLEET_LEASE ?? '2s', 'FLEET_LEASE');
const SPLITS = 'bcdefghijkl'.split('');
const PREFIXES = ['a', ...SPLITS];
const VALUE = Buffer.alloc(100, 7);
const cli = join(repoRoot, 'dist/cli/main.js');
/** Where the fleets started from now on keep their leases: PostgreSQL, or these etcd members. */
let etcdEndpoints: string | undefined;

interface Member {
  child: ChildProcess;
  port: number;
  address: string;
}

class BenchFleet {
  readonly prefix = `lsm_bench_${randomBytes(4).toString('hex')}`;
  readonly dir = mkdtempSync(join(tmpdir(), 'locksmith-fleet-bench-'));
  readonly members: Member[] = [];
  #n = 0;

  constructor(
    readonly leaseMs: number,
    readonly sessions: 'durable' | 'memory' = 'durable',
  ) {}

  async start(): Promise<Member> {
    const child = spawn(
      process.execPath,
      [
        cli,
        'serve',
        '--data',
        join(this.dir, `m${this.#n++}`),
        '--port',
        '0',
        '--storage',
        PG,
        '--storage-prefix',
        this.prefix,
        '--fleet',
        '--lease',
        `${this.leaseMs}ms`,
        '--renew',
        `${Math.floor(this.leaseMs / 4)}ms`,
        '--sessions',
        this.sessions,
        ...(etcdEndpoints === undefined ? [] : ['--ha', 'etcd', '--etcd', etcdEndpoints]),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const port = await new Promise<number>((resolve, reject) => {
      let out = '';
      child.stdout?.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /listening on locksmith:\/\/[^:]+:(\d+)/.exec(out);
        if (m !== null) resolve(Number(m[1]));
      });
      child.once('exit', (code) => reject(new Error(`serve exited (${code}): ${out}`)));
    });
    const member = { child, port, address: `127.0.0.1:${port}` };
    this.members.push(member);
    return member;
  }

  /** Resolves once the `live` members serve every region, as `asked` says. */
  async served(asked: Member, live: readonly Member[]): Promise<void> {
    const addresses = new Set(live.map((m) => m.address));
    const c = await connect(`locksmith://${asked.address}`);
    try {
      for (;;) {
        const s = await c.status();
        if (
          s.regions.length > 0 &&
          s.regions.every((r) => r.server !== null && addresses.has(r.server))
        )
          return;
        await sleep(10);
      }
    } finally {
      await c.close();
    }
  }

  /** The rows (one per region prefix) that `member` serves now. */
  async rowsOf(asked: Member, member: Member): Promise<string[]> {
    const c = await connect(`locksmith://${asked.address}`);
    try {
      const { regions } = await c.status();
      return PREFIXES.filter(
        (p) => [...regions].reverse().find((r) => r.startKey <= p)?.server === member.address,
      );
    } finally {
      await c.close();
    }
  }

  async close(): Promise<void> {
    for (const m of this.members) m.child.kill('SIGKILL');
    const c = new pg.Client({ connectionString: PG });
    await c.connect();
    const p = this.prefix;
    await c.query(
      `DROP TABLE IF EXISTS ${p}_schema, ${p}_regions, ${p}_log, ${p}_snapshots, ${p}_tables, ${p}_fleet_members, ${p}_fleet_regions, ${p}_fleet_locks`,
    );
    await c.end();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

async function fleetOf(
  n: number,
  leaseMs: number,
  sessions: 'durable' | 'memory' = 'durable',
): Promise<{ fleet: BenchFleet; client: LocksmithClient }> {
  const fleet = new BenchFleet(leaseMs, sessions);
  for (let i = 0; i < n; i++) await fleet.start();
  const first = fleet.members[0] as Member;
  const client = await connect(`locksmith://${first.address}`);
  await client.createTable('t', ['f'], { splits: SPLITS });
  await fleet.served(first, fleet.members);
  // Every region routed once, so the client has its map and a session on every server.
  for (const p of PREFIXES) await client.table('t').put(new Put(`${p}-warm`).add('f', 'q', VALUE));
  return { fleet, client };
}

/** One takeover: kill -9 (or SIGTERM) of the third server; ms to all served, and to a put there. */
async function takeover(signal: 'SIGKILL' | 'SIGTERM', leaseMs: number): Promise<[number, number]> {
  const { fleet, client } = await fleetOf(3, leaseMs);
  try {
    const [first, , victim] = fleet.members as [Member, Member, Member];
    const rows = await fleet.rowsOf(first, victim);
    await sleep(Math.random() * (leaseMs / 4));
    const t0 = performance.now();
    victim.child.kill(signal);
    const served = fleet
      .served(first, fleet.members.slice(0, 2))
      .then(() => performance.now() - t0);
    const put = (async () => {
      for (;;) {
        try {
          await client.table('t').put(new Put(`${rows[0]}-after`).add('f', 'q', VALUE));
          return performance.now() - t0;
        } catch {
          // CONNECTION_LOST (the call in flight), or the call's timeout: again.
        }
      }
    })();
    return [await served, await put];
  } finally {
    await client.close();
    await fleet.close();
  }
}

async function throughput(n: number): Promise<number> {
  const { fleet, client } = await fleetOf(n, 10_000);
  const clients = [
    client,
    ...(await Promise.all(
      Array.from({ length: 7 }, () =>
        connect(`locksmith://${(fleet.members[0] as Member).address}`),
      ),
    )),
  ];
  try {
    let count = 0;
    let stop = false;
    const loops = clients.flatMap((c, ci) =>
      Array.from({ length: 16 }, async (_, d) => {
        const t = c.table('t');
        for (let i = 0; !stop; i++) {
          const p = PREFIXES[(i * 7 + ci * 3 + d) % PREFIXES.length];
          await t.put(new Put(`${p}-${ci}-${d}-${i % 100}`).add('f', 'q', VALUE));
          count++;
        }
      }),
    );
    await sleep(WARMUP_MS);
    const c0 = count;
    const t0 = performance.now();
    await sleep(SECONDS * 1000);
    const rate = (count - c0) / ((performance.now() - t0) / 1000);
    stop = true;
    await Promise.all(loops);
    return rate;
  } finally {
    await Promise.all(clients.map((c) => c.close()));
    await fleet.close();
  }
}

/** Lock cycles per second through 3 servers, 8 clients × 16 in flight, rows over every region. */
async function lockCycles(sessions: 'durable' | 'memory'): Promise<number> {
  const { fleet, client } = await fleetOf(3, 10_000, sessions);
  const clients = [
    client,
    ...(await Promise.all(
      Array.from({ length: 7 }, () =>
        connect(`locksmith://${(fleet.members[0] as Member).address}`),
      ),
    )),
  ];
  try {
    // Every client routed once: its map read, a session open on every server.
    for (const c of clients)
      for (const p of PREFIXES) await c.table('t').put(new Put(`${p}-warm`).add('f', 'q', VALUE));
    let count = 0;
    let stop = false;
    const loops = clients.flatMap((c, ci) =>
      Array.from({ length: 16 }, async (_, d) => {
        const t = c.table('t');
        for (let i = 0; !stop; i++) {
          const lock = await t.lockRow(`${PREFIXES[(i + ci + d) % PREFIXES.length]}-${ci}-${d}`);
          await t.unlockRow(lock);
          count++;
        }
      }),
    );
    await sleep(WARMUP_MS);
    const c0 = count;
    const t0 = performance.now();
    await sleep(SECONDS * 1000);
    const rate = (count - c0) / ((performance.now() - t0) / 1000);
    stop = true;
    await Promise.all(loops);
    return rate;
  } finally {
    await Promise.all(clients.map((c) => c.close()));
    await fleet.close();
  }
}

/** kill -9 of the server of a held lock's row: ms to the first put under that lock that succeeds. */
async function heldThroughKill(leaseMs: number): Promise<number> {
  const { fleet, client } = await fleetOf(3, leaseMs);
  try {
    const [first, , victim] = fleet.members as [Member, Member, Member];
    const rows = await fleet.rowsOf(first, victim);
    const t = client.table('t');
    const lock = await t.lockRow(`${rows[0]}-held`);
    await sleep(Math.random() * (leaseMs / 4));
    const t0 = performance.now();
    victim.child.kill('SIGKILL');
    for (;;) {
      try {
        await t.put(new Put(`${rows[0]}-held`, { rowLock: lock }).add('f', 'q', VALUE));
        if (lock.signal.aborted) throw new Error('the lock was lost');
        return performance.now() - t0;
      } catch (err) {
        if (lock.signal.aborted) throw err;
        // CONNECTION_LOST (the call in flight), or the call's timeout: again.
      }
    }
  } finally {
    await client.close();
    await fleet.close();
  }
}

/** A split of the first region at its middle (N rows move) under writes: ms it took, slowest put. */
async function liveSplit(moved: number): Promise<[number, number, number]> {
  const { fleet, client } = await fleetOf(3, 10_000);
  const key = (i: number) => `a-${String(i).padStart(7, '0')}`;
  try {
    const t = client.table('t');
    for (let i = 0; i < 2 * moved; i += 1000) {
      const batch = Array.from({ length: Math.min(1000, 2 * moved - i) }, (_, j) =>
        new Put(key(i + j)).add('f', 'q', VALUE),
      );
      await t.batch(batch);
    }
    let stop = false;
    let window: [number, number] = [Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY];
    const overlapping: number[] = [];
    const loops = Array.from({ length: 32 }, async (_, w) => {
      for (let i = 0; !stop; i++) {
        const row =
          w % 2 === 0 ? key(moved + ((i * 37 + w) % moved)) : `${PREFIXES[(i + w) % 12]}-${w}`;
        const began = performance.now();
        await t.put(new Put(row).add('f', 'q', VALUE));
        const ended = performance.now();
        if (began < window[1] && ended > window[0]) overlapping.push(ended - began);
      }
    });
    await sleep(WARMUP_MS);
    const t0 = performance.now();
    window = [t0, Number.POSITIVE_INFINITY];
    await client.splitTable('t', key(moved));
    const took = performance.now() - t0;
    window = [t0, t0 + took];
    await sleep(300);
    stop = true;
    await Promise.all(loops);
    return [took, Math.max(...overlapping), overlapping.length];
  } finally {
    await client.close();
    await fleet.close();
  }
}

async function beforeLocks(): Promise<void> {
  const rows: string[][] = [];
  for (const [what, signal, lease] of [
    ['kill -9', 'SIGKILL', LEASE_MS],
    ['SIGTERM', 'SIGTERM', 30_000],
  ] as const) {
    const served: number[] = [];
    const put: number[] = [];
    for (let i = 0; i < SAMPLES; i++) {
      const [s, p] = await takeover(signal, lease);
      served.push(s);
      put.push(p);
    }
    const range = (v: number[]) =>
      `${fmt(median(v))} ms (${fmt(Math.min(...v))}–${fmt(Math.max(...v))})`;
    rows.push([what, `${lease / 1000} s, renew ${lease / 4000} s`, range(served), range(put)]);
  }
  sayTable(
    `## One of 3 servers goes, 12 regions (${SAMPLES} samples; median (min–max))`,
    ['how', 'lease', 'its regions served again', 'a put to its rows succeeds'],
    rows,
  );
  say();
  const rates: string[][] = [];
  let one = 0;
  for (const n of [1, 2, 3]) {
    const rate = await throughput(n);
    if (n === 1) one = rate;
    rates.push([String(n), fmt(rate), `${fmt(rate / one)}×`]);
  }
  sayTable(
    '## Puts per second, 8 clients × 16 in flight over 12 regions (fsync on)',
    ['servers', 'puts/s', 'vs 1 server'],
    rates,
  );
  say();
  const splits: string[][] = [];
  for (const moved of [1_000, 10_000]) {
    const [took, slowest, puts] = await liveSplit(moved);
    splits.push([fmt(moved), `${fmt(took)} ms`, `${fmt(slowest)} ms`, fmt(puts)]);
  }
  sayTable(
    '## A live split in a fleet of 3 under 32 puts in flight (half on the moved rows)',
    ['rows moved', 'the split took', 'slowest put overlapping it', 'puts overlapping it'],
    splits,
  );
  say();
}

async function main(): Promise<void> {
  const postgres = await postgresAnswers(PG);
  if (postgres === undefined) {
    say(`PostgreSQL does not answer at ${PG}: nothing to measure.`);
    return;
  }
  const load = await machineHeader([`PostgreSQL: ${postgres}`]);
  say();
  // FLEET_ONLY=locks: the row lock parts (5 and 6) alone; FLEET_ONLY=etcd: part 7 alone.
  const only = process.env.FLEET_ONLY;
  if (only === 'etcd') {
    await leasesInEtcd();
    say();
    say(`- ${await load()}`);
    return;
  }
  if (only !== 'locks') await beforeLocks();
  const durable = await lockCycles('durable');
  const memory = await lockCycles('memory');
  sayTable(
    '## Row lock cycles (lockRow + unlockRow) per second, 3 servers, 8 clients × 16 in flight',
    ['--sessions', 'cycles/s', 'vs memory'],
    [
      [
        'durable (recorded: locks move with their region)',
        fmt(durable),
        `${fmt(durable / memory)}×`,
      ],
      ['memory (a region that moves loses its locks)', fmt(memory), '1×'],
    ],
  );
  say();
  const held: number[] = [];
  for (let i = 0; i < SAMPLES; i++) held.push(await heldThroughKill(LEASE_MS));
  sayTable(
    `## A held lock through kill -9 of its server (lease ${LEASE_MS / 1000} s; ${SAMPLES} samples)`,
    ['from the kill to a put under the same lock', 'min', 'max'],
    [[`${fmt(median(held))} ms`, `${fmt(Math.min(...held))} ms`, `${fmt(Math.max(...held))} ms`]],
  );
  say();
  if (only !== 'locks') {
    await leasesInEtcd();
    say();
  }
  say(`- ${await load()}`);
}

/** Part 7: a takeover and a held lock through kill -9, leases in PostgreSQL, then in etcd. */
async function leasesInEtcd(): Promise<void> {
  const version = etcdVersion();
  if (version === undefined) {
    say('## Leases in etcd: skipped (no etcd here; Debian: apt-get install etcd-server)');
    return;
  }
  if (LEASE_MS % 1000 !== 0) {
    say(`## Leases in etcd: skipped (FLEET_LEASE ${LEASE_MS} ms is not whole seconds)`);
    return;
  }
  const cluster = await EtcdCluster.start(3);
  const rows: string[][] = [];
  try {
    for (const where of [
      'PostgreSQL',
      `etcd ${version.replace(/^etcd Version:\s*/, '')}, 3 members`,
    ] as const) {
      etcdEndpoints = where === 'PostgreSQL' ? undefined : cluster.endpoints.join(',');
      const served: number[] = [];
      const put: number[] = [];
      const held: number[] = [];
      for (let i = 0; i < SAMPLES; i++) {
        const [a, b] = await takeover('SIGKILL', LEASE_MS);
        served.push(a);
        put.push(b);
        held.push(await heldThroughKill(LEASE_MS));
      }
      const cell = (xs: number[]) =>
        `${fmt(median(xs))} ms (${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))})`;
      rows.push([where, cell(served), cell(put), cell(held)]);
    }
  } finally {
    etcdEndpoints = undefined;
    await cluster.close();
  }
  sayTable(
    `## kill -9 of 1 of 3 servers, leases in PostgreSQL and in etcd (lease ${LEASE_MS / 1000} s, renew ${LEASE_MS / 4} ms; median (min–max) of ${SAMPLES})`,
    [
      'leases in',
      'its regions served again',
      'a put to its rows succeeds',
      'a put under a held lock succeeds',
    ],
    rows,
  );
}

await main();
process.exit(0);
