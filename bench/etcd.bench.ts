/**
 * locksmith's server locks against etcd 3.4's own lock recipe: `npm run bench:etcd` (a
 * script, never a test). Skipped (exit 0) where `etcd` is not installed.
 *
 * Both servers are real processes started here on loopback ports in temporary directories:
 * `locksmith serve` (dist/cli/main.js, its defaults: durability fsync, durable sessions) and a
 * single etcd member (its defaults: the WAL fsynced on every commit). locksmith is driven
 * through its client (`connect`, `lockRow`, `lock.close()`); etcd through the etcd3 client with
 * the Go client's `concurrency.Mutex` recipe (bench/etcd-support.ts): one session lease per
 * client connection, a lock is one txn and an unlock one delete.
 *
 * 1. Lock cycles per second (lock + release of a key of the worker's own) at connections ×
 *    locks in flight per connection 1×1, 8×1, 8×16 (BENCH_CELLS).
 * 2. Contended hand-over: 8 and 64 clients (one connection and one session each) looping
 *    lock + release on one name: hand-overs per second and the p99 wait for the lock.
 * 3. Server RSS (VmRSS of its pid) per held lock (BENCH_LOCKS over 8 sessions) and per
 *    session (BENCH_SESSIONS sessions holding nothing): a locksmith session with a connection
 *    each, and sessions carried over one connection (`client.openSession()`); an etcd session
 *    is a lease (granted over one client connection).
 * 4. Failover with a lock kept (FAILOVER_SAMPLES, default 3): two `locksmith serve --ha
 *    lease-database` on SQLite against a 3-member etcd cluster; from the kill -9 of the master
 *    (the raft leader) to the first write guarded by the lock taken before the kill that
 *    succeeds.
 *
 * BENCH_PARTS picks parts (comma-separated, default all): cycles, handover, memory, failover.
 *
 * Rates are over BENCH_SECONDS (default 2) after BENCH_WARMUP_MS (default 500) of the same load.
 */
import { connect } from '../src/client/locksmith-client.js';
import {
  EtcdCluster,
  type EtcdHeld,
  EtcdSession,
  etcdVersion,
  killAll,
  LocksmithServe,
  rssOf,
  serveFailover,
  tempDir,
} from './etcd-support.js';
import {
  type Cell,
  cellName,
  machineHeader,
  measureRate,
  openMany,
  RawSession,
  SECONDS,
  type Subject,
  WARMUP_MS,
} from './server-support.js';
import { fmt, median, percentile, ratio, say, sayTable, sleep, verdict } from './support.js';

const CELLS: Cell[] = (process.env.BENCH_CELLS ?? '1x1,8x1,8x16').split(',').map((text) => {
  const [conns, depth] = text.split('x').map(Number);
  return { conns: conns as number, depth: depth as number };
});
const CONTENDERS = [8, 64];
const PARTS = new Set(
  (process.env.BENCH_PARTS ?? 'cycles,handover,memory,failover').split(',').map((p) => p.trim()),
);
/** Many, so that what grows once (V8's young generation, Go's heap target) is not counted per lock. */
const LOCKS_HELD = Number(process.env.BENCH_LOCKS ?? 50_000);
const LOCK_SESSIONS = 8;
const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 5_000);
const FAILOVER_SAMPLES = Number(process.env.FAILOVER_SAMPLES ?? 5);
/** The same timeout as etcd's followers wait before electing (its default election timeout, 1 s). */
const HA_LEASE_MS = 1000;
const HA_RENEW_MS = 250;
const TABLE = 'bench';
/** Enough sockets for part 3's sessions, all from 127.0.0.1. */
const SERVE_ARGS = [
  '--max-connections',
  '8192',
  '--max-connections-per-address',
  '8192',
  '--max-sessions-per-connection',
  '8192',
];

function progress(text: string): void {
  process.stderr.write(`  ${text}\n`);
}

async function closeAll(list: { close(): Promise<unknown> }[]): Promise<void> {
  await Promise.allSettled(list.map((c) => c.close()));
}

async function ourServer(): Promise<LocksmithServe> {
  const server = await LocksmithServe.start(SERVE_ARGS);
  const admin = await connect(server.url);
  await admin.createTable(TABLE, ['f']);
  await admin.close();
  return server;
}

/** `n` etcd client connections, each with its session. */
async function etcdSessions(etcd: EtcdCluster, n: number): Promise<EtcdSession[]> {
  return Promise.all(Array.from({ length: n }, () => EtcdSession.open(etcd.client())));
}

async function closeEtcd(list: EtcdSession[]): Promise<void> {
  await Promise.allSettled(list.map((s) => s.close()));
  for (const s of list) s.client.close();
}

// --- 1. lock cycles -----------------------------------------------------------------------------

function ourCycles(server: LocksmithServe) {
  return async (conns: number): Promise<Subject> => {
    const list = await Promise.all(Array.from({ length: conns }, () => connect(server.url)));
    const tables = list.map((c) => c.table(TABLE));
    return {
      async step(conn, worker) {
        const lock = await (tables[conn] as (typeof tables)[number]).lockRow(`lock-${worker}`);
        await lock.close();
      },
      close: () => closeAll(list),
    };
  };
}

function etcdCycles(etcd: EtcdCluster) {
  return async (conns: number): Promise<Subject> => {
    const list = await etcdSessions(etcd, conns);
    return {
      async step(conn, worker) {
        const session = list[conn] as EtcdSession;
        await session.unlock(await session.lock(`lock-${worker}`));
      },
      close: () => closeEtcd(list),
    };
  };
}

// --- 2. contended hand-over ---------------------------------------------------------------------

interface Contended {
  perSecond: number;
  p50: number;
  p99: number;
}

/** `take` resolves once the lock is held and returns its release. Waits in ms. */
async function contend(
  n: number,
  take: (i: number) => Promise<() => Promise<void>>,
): Promise<Contended> {
  let measuring = false;
  let stop = false;
  let count = 0;
  let failure: unknown;
  const waits: number[] = [];
  const loops = Array.from({ length: n }, (_, i) =>
    (async () => {
      while (!stop) {
        const t = performance.now();
        const release = await take(i);
        if (measuring) {
          waits.push(performance.now() - t);
          count++;
        }
        await release();
      }
    })().catch((err: unknown) => {
      failure ??= err;
      stop = true;
    }),
  );
  await sleep(WARMUP_MS);
  measuring = true;
  const t0 = performance.now();
  await sleep(SECONDS * 1000);
  measuring = false;
  const t1 = performance.now();
  stop = true;
  await Promise.all(loops);
  if (failure !== undefined) throw failure;
  return {
    perSecond: count / ((t1 - t0) / 1000),
    p50: percentile(waits, 50),
    p99: percentile(waits, 99),
  };
}

async function ourContended(server: LocksmithServe, n: number): Promise<Contended> {
  const list = await Promise.all(Array.from({ length: n }, () => connect(server.url)));
  try {
    const tables = list.map((c) => c.table(TABLE));
    return await contend(n, async (i) => {
      const lock = await (tables[i] as (typeof tables)[number]).lockRow('hot', {
        waitMs: 60_000,
      });
      return () => lock.close();
    });
  } finally {
    await closeAll(list);
  }
}

async function etcdContended(etcd: EtcdCluster, n: number): Promise<Contended> {
  const list = await etcdSessions(etcd, n);
  try {
    return await contend(n, async (i) => {
      const session = list[i] as EtcdSession;
      const held = await session.lock('hot');
      return () => session.unlock(held);
    });
  } finally {
    await closeEtcd(list);
  }
}

// --- 3. memory ----------------------------------------------------------------------------------

/** The server's RSS once it has settled (a second without work). */
async function settledRss(pid: number): Promise<number> {
  await sleep(1000);
  return rssOf(pid);
}

interface Memory {
  perLock: number;
  /** A session with a connection of its own (locksmith), a lease (etcd). */
  perSession: number;
  /** Sessions carried over one connection (`openSession`; locksmith only). */
  perCarriedSession?: number;
}

async function ourMemory(): Promise<Memory> {
  const server = await ourServer();
  const pid = server.proc.pid as number;
  let perLock: number;
  try {
    const holders = await Promise.all(
      Array.from({ length: LOCK_SESSIONS }, () => connect(server.url)),
    );
    const before = await settledRss(pid);
    const tables = holders.map((c) => c.table(TABLE));
    for (let i = 0; i < LOCKS_HELD; i += 500) {
      await Promise.all(
        Array.from({ length: 500 }, (_, k) =>
          (tables[(i + k) % LOCK_SESSIONS] as (typeof tables)[number]).lockRow(`held-${i + k}`),
        ),
      );
    }
    perLock = ((await settledRss(pid)) - before) / LOCKS_HELD;
    await closeAll(holders);
  } finally {
    await server.kill();
  }
  // Sessions on a fresh server: what the locks freed would otherwise be counted back.
  const fresh = await ourServer();
  try {
    const base = await settledRss(fresh.proc.pid as number);
    const hello = { sessionLeaseMs: 600_000 };
    const sessions = await openMany(SESSIONS, 250, () => RawSession.open(fresh.port, hello));
    const opened = await settledRss(fresh.proc.pid as number);
    for (const s of sessions) s.destroy();
    return { perLock, perSession: (opened - base) / SESSIONS, perCarriedSession: 0 };
  } finally {
    await fresh.kill();
  }
}

/** Sessions carried over one connection, as etcd's leases over one client connection. */
async function ourCarriedMemory(): Promise<number> {
  const fresh = await ourServer();
  try {
    const client = await connect(fresh.url);
    const base = await settledRss(fresh.proc.pid as number);
    for (let i = 0; i < SESSIONS; i += 250) {
      await Promise.all(
        Array.from({ length: Math.min(250, SESSIONS - i) }, () =>
          client.openSession({ sessionLeaseMs: 600_000 }),
        ),
      );
    }
    const opened = await settledRss(fresh.proc.pid as number);
    await client.close();
    return (opened - base) / SESSIONS;
  } finally {
    await fresh.kill();
  }
}

async function etcdMemory(): Promise<Memory> {
  const etcd = await EtcdCluster.start(1);
  let perLock: number;
  try {
    const pid = etcd.members[0]?.proc.pid as number;
    const holders = await etcdSessions(etcd, LOCK_SESSIONS);
    const before = await settledRss(pid);
    for (let i = 0; i < LOCKS_HELD; i += 500) {
      await Promise.all(
        Array.from({ length: 500 }, (_, k) =>
          (holders[(i + k) % LOCK_SESSIONS] as EtcdSession).lock(`held-${i + k}`),
        ),
      );
    }
    perLock = ((await settledRss(pid)) - before) / LOCKS_HELD;
    await closeEtcd(holders);
  } finally {
    await etcd.close();
  }
  // Leases on a fresh member: Go's collector returning the deleted keys' memory made the
  // figure negative when measured on the same one.
  const fresh = await EtcdCluster.start(1);
  try {
    const pid = fresh.members[0]?.proc.pid as number;
    const client = fresh.client();
    await client.leaseClient.leaseGrant({ TTL: 600 });
    const base = await settledRss(pid);
    for (let i = 0; i < SESSIONS; i += 250) {
      await Promise.all(
        Array.from({ length: Math.min(250, SESSIONS - i) }, () =>
          client.leaseClient.leaseGrant({ TTL: 600 }),
        ),
      );
    }
    const opened = await settledRss(pid);
    client.close();
    return { perLock, perSession: (opened - base) / SESSIONS };
  } finally {
    await fresh.close();
  }
}

// --- 4. failover with a lock kept ---------------------------------------------------------------

/** ms from the master's kill -9 to a put under the lock taken before it succeeding. */
async function ourFailover(): Promise<number> {
  const work = tempDir('locksmith-bench-etcd-ha-');
  const ha = ['--ha', 'lease-database', '--db', `sqlite:${work}/lock.sqlite`];
  ha.push('--lease', `${HA_LEASE_MS}ms`, '--renew', `${HA_RENEW_MS}ms`);
  const sample = await serveFailover(ha, {
    rowLock: true,
    killAfterMs: () => 300 + Math.random() * HA_RENEW_MS,
  });
  return sample.put;
}

/** ms from the raft leader's kill -9 to a txn guarded by the mutex held before it succeeding. */
async function etcdFailover(): Promise<number> {
  const etcd = await EtcdCluster.start(3);
  // A deadline per unary call, so that one sent to the dead member is given up and retried.
  const client = etcd.client({
    defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + 1000 }),
  });
  try {
    const session = await EtcdSession.open(client);
    const held: EtcdHeld = await session.lock('k');
    if (!(await session.putIfOwner(held, 'data', 'before'))) throw new Error('not the owner');
    const leader = await etcd.leader();
    await sleep(300 + Math.random() * 100);
    const killed = performance.now();
    await leader.kill9();
    for (;;) {
      if (performance.now() - killed > 60_000) throw new Error('no failover');
      try {
        if (await session.putIfOwner(held, 'data', 'after')) return performance.now() - killed;
        throw new Error('the mutex was lost in the failover');
      } catch (err) {
        if ((err as Error).message.includes('mutex was lost')) throw err;
        await sleep(10);
      }
    }
  } finally {
    client.close();
    await etcd.close();
  }
}

async function samples(label: string, sample: () => Promise<number>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < FAILOVER_SAMPLES; i++) {
    progress(`${label}: failover sample ${i + 1}/${FAILOVER_SAMPLES}`);
    out.push(await sample());
  }
  return out;
}

// --- main ---------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const version = etcdVersion();
  if (version === undefined) {
    say('bench:etcd skipped: `etcd` is not installed (Debian: apt-get install etcd-server).');
    return;
  }
  const loadReport = await machineHeader([
    `${version}, single member for parts 1–3 (defaults: WAL fsync per commit), 3 members for part 4; etcd3 client with the Go concurrency.Mutex recipe`,
    'locksmith serve process, defaults (durability fsync, durable sessions, 10 handlers)',
  ]);
  say();

  const cycles: string[][] = [];
  const cycleFigures = new Map<string, [number, number]>();
  if (PARTS.has('cycles')) {
    progress('lock cycles');
    const server = await ourServer();
    const etcd = await EtcdCluster.start(1);
    try {
      for (const cell of CELLS) {
        const ours = await measureRate(cell, ourCycles(server));
        const theirs = await measureRate(cell, etcdCycles(etcd));
        cycleFigures.set(cellName(cell), [ours, theirs]);
        cycles.push([cellName(cell), fmt(ours), fmt(theirs), ratio(ours / theirs)]);
      }
    } finally {
      await server.kill();
      await etcd.close();
    }
    sayTable(
      '### Lock cycles per second (lock + release of a key of its own)',
      ['connections × in flight', 'locksmith', 'etcd Mutex', 'locksmith / etcd'],
      cycles,
    );
    say();
  }

  const contended = new Map<number, [Contended, Contended]>();
  if (PARTS.has('handover')) {
    progress('contended hand-over');
    const server = await ourServer();
    const etcd = await EtcdCluster.start(1);
    try {
      for (const n of CONTENDERS) {
        contended.set(n, [await ourContended(server, n), await etcdContended(etcd, n)]);
      }
    } finally {
      await server.kill();
      await etcd.close();
    }
    sayTable(
      '### Contended hand-over: n clients looping lock + release on one lock',
      ['clients', 'figure', 'locksmith', 'etcd Mutex', 'locksmith / etcd'],
      [...contended].flatMap(([n, [ours, theirs]]) => [
        [
          String(n),
          'hand-overs/s',
          fmt(ours.perSecond),
          fmt(theirs.perSecond),
          ratio(ours.perSecond / theirs.perSecond),
        ],
        [String(n), 'p50 wait (ms)', fmt(ours.p50), fmt(theirs.p50), ratio(ours.p50 / theirs.p50)],
        [String(n), 'p99 wait (ms)', fmt(ours.p99), fmt(theirs.p99), ratio(ours.p99 / theirs.p99)],
      ]),
    );
    say();
  }

  let memory: [Memory, Memory] | undefined;
  if (PARTS.has('memory')) {
    progress('memory');
    const ourMem = await ourMemory();
    ourMem.perCarriedSession = await ourCarriedMemory();
    const etcdMem = await etcdMemory();
    memory = [ourMem, etcdMem];
    sayTable(
      `### Server RSS growth (VmRSS): ${LOCKS_HELD.toLocaleString('en-US')} locks held over ${LOCK_SESSIONS} sessions; ${SESSIONS.toLocaleString('en-US')} sessions holding nothing`,
      ['bytes', 'locksmith', 'etcd', 'locksmith / etcd'],
      [
        [
          'per held lock',
          fmt(ourMem.perLock),
          fmt(etcdMem.perLock),
          ratio(ourMem.perLock / etcdMem.perLock),
        ],
        [
          'per session, a connection each',
          fmt(ourMem.perSession),
          fmt(etcdMem.perSession),
          ratio(ourMem.perSession / etcdMem.perSession),
        ],
        [
          'per session, over one connection',
          fmt(ourMem.perCarriedSession ?? 0),
          fmt(etcdMem.perSession),
          ratio((ourMem.perCarriedSession ?? 0) / etcdMem.perSession),
        ],
      ],
    );
    say();
  }

  let failover: [number[], number[]] | undefined;
  if (PARTS.has('failover')) {
    failover = [await samples('locksmith', ourFailover), await samples('etcd', etcdFailover)];
    const row = (name: string, s: number[]) => [
      name,
      `${fmt(median(s))} ms`,
      `${fmt(Math.min(...s))} ms`,
      `${fmt(Math.max(...s))} ms`,
    ];
    sayTable(
      `### Failover with a lock kept: kill -9 of the master / raft leader → first guarded write (${FAILOVER_SAMPLES} samples)`,
      ['system', 'median', 'min', 'max'],
      [
        row(
          `locksmith serve --ha lease-database (SQLite, lease ${HA_LEASE_MS} ms, renew ${HA_RENEW_MS} ms)`,
          failover[0],
        ),
        row('etcd, 3 members (election timeout 1000 ms, heartbeat 100 ms)', failover[1]),
      ],
    );
    say();
  }

  const cell = (name: string) => cycleFigures.get(name) ?? [Number.NaN, Number.NaN];
  const goals: string[][] = [];
  const cycleGoal = (name: string, times: number) => {
    const [ours, theirs] = cell(name);
    goals.push([
      `lock cycles at ${name}`,
      `≥ ${times}× etcd`,
      ratio(ours / theirs),
      verdict(ours >= times * theirs),
    ]);
  };
  if (cycleFigures.size > 0) {
    cycleGoal('8×16', 10);
    cycleGoal('1×1', 3);
  }
  for (const [n, [ours, theirs]] of contended) {
    goals.push([
      `hand-overs/s, ${n} clients`,
      '≥ 20× etcd',
      ratio(ours.perSecond / theirs.perSecond),
      verdict(ours.perSecond >= 20 * theirs.perSecond),
    ]);
    goals.push([
      `p99 wait, ${n} clients`,
      '≤ 1/10 of etcd',
      ratio(ours.p99 / theirs.p99),
      verdict(ours.p99 * 10 <= theirs.p99),
    ]);
  }
  if (memory !== undefined) {
    const [ourMem, etcdMem] = memory;
    goals.push([
      'memory per held lock',
      '≤ etcd',
      ratio(ourMem.perLock / etcdMem.perLock),
      verdict(ourMem.perLock <= etcdMem.perLock),
    ]);
    // etcd's leases share one client connection: so do the sessions compared with them.
    const carried = ourMem.perCarriedSession ?? 0;
    goals.push([
      'memory per session (over one connection)',
      '≤ etcd',
      ratio(carried / etcdMem.perSession),
      verdict(carried <= etcdMem.perSession),
    ]);
  }
  if (failover !== undefined) {
    const [ours, theirs] = failover.map(median) as [number, number];
    goals.push([
      'failover, lock kept (median)',
      '< etcd, same timeout',
      ratio(ours / theirs),
      verdict(ours < theirs),
    ]);
  }
  sayTable('### Goals', ['goal', 'target', 'locksmith / etcd', 'verdict'], goals);
  say();
  say(`- ${await loadReport()}`);
}

process.on('exit', killAll);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    killAll();
    process.exit(130);
  });
}
try {
  await main();
} finally {
  killAll();
}
