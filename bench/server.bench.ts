/**
 * Server benchmarks (issue 10): `npm run bench:server` (a script, never a test).
 *
 * The locksmith server runs in a child process (bench/server-child.ts) with its defaults
 * (durability `fsync`); everything is measured through the real client (`connect()`), side by
 * side with the local Redis (ioredis) and PostgreSQL (node-postgres) with the same number of
 * client connections and the same calls in flight per connection:
 *
 * 1. Lock cycles (lock + unlock of a key of one's own, so uncontended): `lockRow` +
 *    `unlockRow`, and `lockRow` + `lock.close()`; redis-semaphore's `Mutex` acquire + release;
 *    a bare `SET key val NX PX 30000` + compare-and-delete Lua script (EVALSHA);
 *    `pg_advisory_lock` + `pg_advisory_unlock` (one connection per client connection: node-postgres
 *    does not pipeline, so deeper "pipelining" only queues on the connection).
 * 2. put / get of one 100-byte cell against Redis SET / GET. The local Redis keeps no AOF and
 *    no RDB (memory only): it is the baseline of a put with durability `none`. The default put
 *    waits for its group-commit fsync: its baseline is a private Redis started here that
 *    answers a SET only once its append-only file is fsynced (`appendfsync always`).
 * 3. The loopback floor: `ping()` from the same client against an echo server with the same
 *    framing, and `ping()` against the real server (its dispatch without any row work). The
 *    goals table also says what the floor allows for each goal against Redis: a goal above it
 *    cannot be met by any server behind this client, however little work it does.
 * 4. Memory per session and per held lock, 10,000 bare-protocol sessions, each then holding one
 *    row lock (server RSS and heap after gc).
 * 5. An unrelated client's get/put latency with and without 1000 `lockRow` calls blocked on
 *    one hot row (one per bare session).
 *
 * Rates are calls (or cycles) per second over BENCH_SECONDS (default 2) after BENCH_WARMUP_MS
 * (default 500) of the same load. `node dist-test/bench/server.bench.js 1 3` runs only those
 * parts; BENCH_CELLS=1x1,8x16 picks the grid; BENCH_SERVER_PROF=<dir> makes every server child
 * write a CPU profile there. The machine may be shared: ratios within one run are steadier
 * than single figures.
 */

import { Redis } from 'ioredis';
import pg from 'pg';
import { Mutex } from 'redis-semaphore';
import { connect, type LocksmithClient } from '../src/client/locksmith-client.js';
import { Get, Put } from '../src/rows/index.js';
import {
  type Cell,
  cellName,
  DurableRedis,
  machineHeader,
  measureRate,
  openMany,
  RawSession,
  ServerChild,
  type Subject,
} from './server-support.js';
import { fmt, percentile, ratio, say, sayTable, sleep, verdict } from './support.js';

const REDIS = { host: '127.0.0.1', port: 6379 };
const POSTGRES = 'postgres://postgres@127.0.0.1:5432/test';
/** BENCH_CELLS=1x1,8x16 picks cells (connections × calls in flight per connection). */
const CELLS: Cell[] = (process.env.BENCH_CELLS ?? '1x1,8x1,8x16').split(',').map((text) => {
  const [conns, depth] = text.split('x').map(Number);
  return { conns: conns as number, depth: depth as number };
});
const VALUE = Buffer.alloc(100, 7);
const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 10_000);
const BLOCKED = 1000;
const LATENCY_CALLS = Number(process.env.BENCH_LATENCY_CALLS ?? 2000);
const TABLE = 'bench';
/** Parts to run: `node server.bench.js 1 4` runs only those (all by default). */
const PARTS = new Set(
  process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['1', '2', '3', '4', '5'],
);

// --- subjects ---------------------------------------------------------------------------------

async function clients(url: string, n: number): Promise<LocksmithClient[]> {
  return Promise.all(Array.from({ length: n }, () => connect(url)));
}

async function closeAll(list: { close(): Promise<unknown> }[]): Promise<void> {
  // A client closed while its calls are still in flight may reject its close: ignored here.
  await Promise.allSettled(list.map((c) => c.close()));
}

function locksmithLocks(url: string, how: 'unlockRow' | 'close') {
  return async (conns: number): Promise<Subject> => {
    const list = await clients(url, conns);
    const tables = list.map((c) => c.table(TABLE));
    return {
      async step(conn, worker) {
        const table = tables[conn] as (typeof tables)[number];
        const lock = await table.lockRow(`lock-${worker}`);
        if (how === 'unlockRow') await table.unlockRow(lock);
        else await lock.close();
      },
      close: () => closeAll(list),
    };
  };
}

function locksmithData(url: string, op: 'put' | 'get' | 'ping') {
  return async (conns: number): Promise<Subject> => {
    const list = await clients(url, conns);
    const tables = list.map((c) => c.table(TABLE));
    if (op === 'get') {
      // Every row a worker reads exists: 8×16 workers at most, one row each.
      await tables[0]?.mutateRows(
        Array.from({ length: 256 }, (_, w) => new Put(`row-${w}`).add('f', 'q', VALUE)),
      );
    }
    return {
      async step(conn, worker) {
        if (op === 'ping') {
          await (list[conn] as LocksmithClient).ping();
          return;
        }
        const table = tables[conn] as (typeof tables)[number];
        if (op === 'put') await table.put(new Put(`row-${worker}`).add('f', 'q', VALUE));
        else if ((await table.get(new Get(`row-${worker}`))).isEmpty) throw new Error('no row');
      },
      close: () => closeAll(list),
    };
  };
}

async function redisClients(n: number, port = REDIS.port): Promise<Redis[]> {
  const list = Array.from({ length: n }, () => new Redis({ ...REDIS, port, lazyConnect: true }));
  await Promise.all(list.map((r) => r.connect()));
  return list;
}

async function quitAll(list: Redis[]): Promise<void> {
  await Promise.all(list.map((r) => r.quit()));
}

async function redisSemaphore(conns: number): Promise<Subject> {
  const list = await redisClients(conns);
  return {
    async step(conn, worker) {
      // A Mutex per acquisition, as its README does; it refreshes its key while held.
      const mutex = new Mutex(list[conn] as Redis, `bench-mutex-${worker}`);
      await mutex.acquire();
      await mutex.release();
    },
    close: () => quitAll(list),
  };
}

const DEL_IF_EQUAL = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`;

async function redisSetNx(conns: number): Promise<Subject> {
  const list = await redisClients(conns);
  for (const r of list) r.defineCommand('delIfEqual', { numberOfKeys: 1, lua: DEL_IF_EQUAL });
  let n = 0;
  return {
    async step(conn, worker) {
      const r = list[conn] as Redis & {
        delIfEqual(key: string, value: string): Promise<number>;
      };
      const key = `bench-nx-${worker}`;
      const token = `t${n++}`;
      if ((await r.set(key, token, 'PX', 30_000, 'NX')) !== 'OK') throw new Error('held');
      if ((await r.delIfEqual(key, token)) !== 1) throw new Error('lost');
    },
    close: () => quitAll(list),
  };
}

function redisData(op: 'set' | 'get', port = REDIS.port) {
  return async (conns: number): Promise<Subject> => {
    const list = await redisClients(conns, port);
    if (op === 'get') {
      for (let w = 0; w < 256; w++) await list[0]?.set(`bench-row-${w}`, VALUE);
    }
    return {
      async step(conn, worker) {
        const r = list[conn] as Redis;
        if (op === 'set') await r.set(`bench-row-${worker}`, VALUE);
        else if ((await r.getBuffer(`bench-row-${worker}`)) === null) throw new Error('no key');
      },
      close: () => quitAll(list),
    };
  };
}

async function pgAdvisory(conns: number): Promise<Subject> {
  const list = Array.from({ length: conns }, () => new pg.Client({ connectionString: POSTGRES }));
  await Promise.all(list.map((c) => c.connect()));
  // node-postgres runs one query at a time per connection: deeper workers queue here (its own
  // queue does the same, but is deprecated).
  const tails: Promise<unknown>[] = list.map(() => Promise.resolve());
  const query = (conn: number, text: string, key: number) => {
    const c = list[conn] as pg.Client;
    const next = (tails[conn] as Promise<unknown>).then(() => c.query(text, [key]));
    tails[conn] = next.catch(() => undefined);
    return next;
  };
  return {
    async step(conn, worker) {
      await query(conn, 'SELECT pg_advisory_lock($1)', 900_000 + worker);
      await query(conn, 'SELECT pg_advisory_unlock($1)', 900_000 + worker);
    },
    close: async () => {
      await Promise.all(list.map((c) => c.end()));
    },
  };
}

/** The same subject with every worker on one key: lock cycles that queue for each other. */
function oneKey(open: (conns: number) => Promise<Subject>) {
  return async (conns: number): Promise<Subject> => {
    const subject = await open(conns);
    return { step: (conn) => subject.step(conn, 0), close: () => subject.close() };
  };
}

/** Contended cycles: 8 connections, one worker each, all on one key. */
async function contended(url: string): Promise<string[][]> {
  const cell = { conns: 8, depth: 1 };
  const subjects: [string, (conns: number) => Promise<Subject>][] = [
    [LOCKS.oursClose, oneKey(locksmithLocks(url, 'close'))],
    [LOCKS.semaphore, oneKey(redisSemaphore)],
    [LOCKS.advisory, oneKey(pgAdvisory)],
  ];
  const rates: number[] = [];
  for (const [, open] of subjects) rates.push(await measureRate(cell, open));
  const semaphore = rates[1] as number;
  return subjects.map(([name], i) => [
    name,
    fmt(rates[i] as number),
    ratio((rates[i] as number) / semaphore),
  ]);
}

// --- 1-3. throughput grid -----------------------------------------------------------------------

type Rates = Record<string, Record<string, number>>;

async function grid(
  names: readonly string[],
  opens: Record<string, (conns: number) => Promise<Subject>>,
): Promise<Rates> {
  const rates: Rates = {};
  for (const cell of CELLS) {
    const row: Record<string, number> = {};
    for (const name of names) {
      row[name] = await measureRate(cell, opens[name] as (conns: number) => Promise<Subject>);
    }
    rates[cellName(cell)] = row;
  }
  return rates;
}

function printGrid(heading: string, unit: string, names: readonly string[], rates: Rates): void {
  const cells = Object.keys(rates);
  sayTable(
    heading,
    [`${unit} (conns×depth)`, ...cells],
    names.map((name) => [name, ...cells.map((c) => fmt(rates[c]?.[name] ?? Number.NaN))]),
  );
  say();
}

// --- 4. memory ----------------------------------------------------------------------------------

async function memoryPerSession(): Promise<string[][]> {
  const server = await ServerChild.start('locksmith', {
    leasePeriodMs: 3_600_000,
    sessionLeaseMs: 3_600_000,
    // Every session is a connection of its own, all from this machine: past the defaults.
    maxConnections: SESSIONS + 100,
    maxConnectionsPerAddress: SESSIONS + 100,
    maxSessions: SESSIONS + 100,
  });
  const admin = await connect(server.url);
  await admin.createTable(TABLE, ['f']);
  try {
    const base = await server.memory();
    const hello = { sessionLeaseMs: 3_600_000 };
    const sessions = await openMany(SESSIONS, 250, () => RawSession.open(server.port, hello));
    const opened = await server.memory();
    const open = await server.sessions();
    if (open < SESSIONS) throw new Error(`only ${open} sessions open`);
    for (let i = 0; i < SESSIONS; i += 500) {
      await Promise.all(
        sessions
          .slice(i, i + 500)
          .map((s, k) => s.call('tryLockRow', [TABLE, Buffer.from(`held-${i + k}`)])),
      );
    }
    const locked = await server.memory();
    for (const s of sessions) s.destroy();
    const perSession = (k: 'rss' | 'heapUsed') => (opened[k] - base[k]) / SESSIONS;
    const perLock = (k: 'rss' | 'heapUsed') => (locked[k] - opened[k]) / SESSIONS;
    return [
      ['baseline (after gc)', fmt(base.rss / 2 ** 20), fmt(base.heapUsed / 2 ** 20), '', ''],
      [
        `${SESSIONS.toLocaleString('en-US')} sessions open`,
        fmt(opened.rss / 2 ** 20),
        fmt(opened.heapUsed / 2 ** 20),
        fmt(perSession('rss')),
        fmt(perSession('heapUsed')),
      ],
      [
        '+ one row lock held by each',
        fmt(locked.rss / 2 ** 20),
        fmt(locked.heapUsed / 2 ** 20),
        fmt(perLock('rss')),
        fmt(perLock('heapUsed')),
      ],
    ];
  } finally {
    await admin.close();
    await server.close();
  }
}

// --- 5. latency under blocked lockers -----------------------------------------------------------

/** µs of each of `n` sequential calls alternating put and get on a row of its own. */
async function latencies(table: ReturnType<LocksmithClient['table']>, n: number) {
  const put: number[] = [];
  const get: number[] = [];
  for (let i = 0; i < n; i++) {
    let t = performance.now();
    await table.put(new Put('unrelated').add('f', 'q', VALUE));
    put.push((performance.now() - t) * 1000);
    t = performance.now();
    await table.get(new Get('unrelated'));
    get.push((performance.now() - t) * 1000);
  }
  return { put, get };
}

/**
 * One blocked `lockRow` per bare session: several waiters of one session on one row, queued
 * between other sessions' waiters, make the wait-for graph report false deadlocks (see
 * docs/benchmarks.md), which would unblock them.
 */
async function latencyUnderBlocked(server: ServerChild): Promise<string[][]> {
  const probe = await connect(server.url);
  const holder = await connect(server.url);
  const table = probe.table(TABLE);
  const hello = { sessionLeaseMs: 600_000 };
  const lockers = await openMany(BLOCKED, 250, () => RawSession.open(server.port, hello));
  try {
    await latencies(table, 200);
    const idle = await latencies(table, LATENCY_CALLS);
    const hot = await holder.table(TABLE).lockRow('hot');
    const outcomes: string[] = [];
    for (const s of lockers) {
      s.call('lockRow', [TABLE, Buffer.from('hot'), 600_000]).then(
        () => outcomes.push('granted'),
        (err: Error) => outcomes.push(err.message),
      );
    }
    let waiting = 0;
    for (let i = 0; i < 200 && waiting < BLOCKED; i++) {
      await sleep(50);
      // `waiting` counts every blocked request (the status lists only some sessions).
      waiting = (await probe.status()).waiting as number;
    }
    if (waiting < BLOCKED || outcomes.length > 0) {
      throw new Error(`only ${waiting} lockers blocked; ${outcomes.slice(0, 3).join('; ')}`);
    }
    const loaded = await latencies(table, LATENCY_CALLS);
    if (outcomes.length > 0) throw new Error(`a blocked locker ended: ${outcomes[0]}`);
    await hot.close();
    const rows: string[][] = [];
    for (const op of ['get', 'put'] as const) {
      const p50 = [percentile(idle[op], 50), percentile(loaded[op], 50)];
      const p99 = [percentile(idle[op], 99), percentile(loaded[op], 99)];
      rows.push([
        op,
        fmt(p50[0] as number),
        fmt(p50[1] as number),
        fmt(p99[0] as number),
        fmt(p99[1] as number),
        ratio((p99[1] as number) / (p99[0] as number)),
        verdict((p99[1] as number) <= 2 * (p99[0] as number)),
      ]);
    }
    return rows;
  } finally {
    for (const s of lockers) s.destroy();
    await closeAll([probe, holder]);
  }
}

// --- main ---------------------------------------------------------------------------------------

async function versions(): Promise<string[]> {
  const out: string[] = [];
  const r = new Redis({ ...REDIS, lazyConnect: true });
  await r.connect();
  const info = await r.info('server');
  const aof = (await r.config('GET', 'appendonly')) as string[];
  const save = (await r.config('GET', 'save')) as string[];
  await r.quit();
  out.push(
    `Redis ${/redis_version:(\S+)/.exec(info)?.[1]} (appendonly ${aof[1]}, save "${save[1]}"), ioredis, redis-semaphore`,
  );
  const c = new pg.Client({ connectionString: POSTGRES });
  await c.connect();
  const v = await c.query("SELECT current_setting('server_version') AS v");
  await c.end();
  out.push(`PostgreSQL ${(v.rows[0] as { v: string }).v}, node-postgres (pg)`);
  out.push(
    'locksmith server in a child process, default options (durability fsync, durable sessions, 10 handlers)',
  );
  return out;
}

const LOCKS = {
  ours: 'locksmith lockRow + unlockRow',
  oursClose: 'locksmith lockRow + lock.close()',
  oursMemory: 'locksmith lockRow + unlockRow (sessions in memory)',
  semaphore: 'redis-semaphore Mutex',
  setNx: 'SET NX PX + Lua delete',
  advisory: 'pg_advisory_lock/unlock',
};
const DATA = {
  put: 'locksmith put (fsync)',
  putNone: 'locksmith put (durability none)',
  set: 'Redis SET',
  setDurable: 'Redis SET (appendfsync always)',
  get: 'locksmith get',
  redisGet: 'Redis GET',
};
const FLOOR = { echo: 'echo server ping (floor)', ping: 'locksmith ping' };

/**
 * The ratios of one cell: [what, measured, goal (NaN: none), higher is better, the best the
 * floor allows (NaN: not bounded by it)]. The bound is what a server doing no work at all
 * would reach behind the same client, framing and TCP path (the echo floor's round trips per
 * second), against the same baseline: a goal above it cannot be met by any server work.
 */
function cellRatios(
  l: Record<string, number>,
  d: Record<string, number>,
  f: Record<string, number>,
): [string, number, number, boolean, number][] {
  const echo = f[FLOOR.echo] ?? Number.NaN;
  const at = (r: Record<string, number>, k: string) => r[k] ?? Number.NaN;
  // A lockRow + unlockRow cycle waits for two answers; a lockRow + lock.close() cycle for one
  // (the unlock leaves with the next lock and is not answered before it).
  const twoTrips = echo / 2;
  const none = Number.NaN;
  return [
    [
      'lock cycles vs redis-semaphore',
      at(l, LOCKS.ours) / at(l, LOCKS.semaphore),
      2,
      true,
      twoTrips / at(l, LOCKS.semaphore),
    ],
    [
      'lock cycles vs SET NX PX',
      at(l, LOCKS.ours) / at(l, LOCKS.setNx),
      1,
      true,
      twoTrips / at(l, LOCKS.setNx),
    ],
    [
      'lock.close() cycles vs redis-semaphore',
      at(l, LOCKS.oursClose) / at(l, LOCKS.semaphore),
      2,
      true,
      echo / at(l, LOCKS.semaphore),
    ],
    [
      'lock.close() cycles vs SET NX PX',
      at(l, LOCKS.oursClose) / at(l, LOCKS.setNx),
      1,
      true,
      echo / at(l, LOCKS.setNx),
    ],
    [
      'lock cycles vs pg_advisory_lock',
      at(l, LOCKS.ours) / at(l, LOCKS.advisory),
      none,
      true,
      none,
    ],
    // Durable against durable: this Redis answers a SET only once its AOF is fsynced. Against
    // the memory-only Redis the fair locksmith figure is the put with durability `none`.
    [
      'put (fsync) vs Redis SET (appendfsync always)',
      at(d, DATA.put) / at(d, DATA.setDurable),
      0.5,
      true,
      none,
    ],
    ['put (fsync) vs Redis SET (memory only)', at(d, DATA.put) / at(d, DATA.set), none, true, none],
    [
      'put (durability none) vs Redis SET',
      at(d, DATA.putNone) / at(d, DATA.set),
      0.5,
      true,
      echo / at(d, DATA.set),
    ],
    [
      'get vs Redis GET',
      at(d, DATA.get) / at(d, DATA.redisGet),
      0.5,
      true,
      echo / at(d, DATA.redisGet),
    ],
    // Against the floor, in calls per second: a lock cycle counts as two calls. A put with
    // fsync has no goal here: the floor writes nothing to disk (its durable baseline is the
    // Redis with appendfsync always above).
    [
      'floor ÷ lock + unlockRow calls (2 per cycle)',
      echo / (2 * at(l, LOCKS.ours)),
      2,
      false,
      none,
    ],
    ['floor ÷ lock + close() calls', echo / (2 * at(l, LOCKS.oursClose)), 2, false, none],
    ['floor ÷ put (fsync) calls', echo / at(d, DATA.put), none, false, none],
    ['floor ÷ put (durability none) calls', echo / at(d, DATA.putNone), 2, false, none],
    ['floor ÷ get calls', echo / at(d, DATA.get), 2, false, none],
    ['floor ÷ locksmith ping calls', echo / at(f, FLOOR.ping), 2, false, none],
  ];
}

async function withServer<T>(
  options: Record<string, unknown>,
  body: (server: ServerChild) => Promise<T>,
): Promise<T> {
  const server = await ServerChild.start('locksmith', options);
  try {
    const admin = await connect(server.url);
    await admin.createTable(TABLE, ['f']);
    await admin.close();
    return await body(server);
  } finally {
    await server.close();
  }
}

async function main(): Promise<void> {
  const load = await machineHeader(await versions());
  say();
  let locks: Rates = {};
  let data: Rates = {};
  let floor: Rates = {};
  await withServer({}, async (server) => {
    if (PARTS.has('1')) {
      // The default server records every grant and release (durable sessions); a second one
      // keeps them in memory, for the cost of that choice.
      locks = await withServer({ sessions: 'memory' }, (memory) =>
        grid(Object.values(LOCKS), {
          [LOCKS.ours]: locksmithLocks(server.url, 'unlockRow'),
          [LOCKS.oursClose]: locksmithLocks(server.url, 'close'),
          [LOCKS.oursMemory]: locksmithLocks(memory.url, 'unlockRow'),
          [LOCKS.semaphore]: redisSemaphore,
          [LOCKS.setNx]: redisSetNx,
          [LOCKS.advisory]: pgAdvisory,
        }),
      );
      printGrid(
        '## 1. Lock cycles per second (lock + unlock, a key per worker)',
        'cycles/s',
        Object.values(LOCKS),
        locks,
      );
      sayTable(
        '### 1b. Contended: 8 connections × 1 worker, all on one key (redis-semaphore polls every 10 ms)',
        ['cycles/s', '8×1, one key', 'vs redis-semaphore'],
        await contended(server.url),
      );
      say();
    }
    if (PARTS.has('2')) {
      const durable = await DurableRedis.start();
      if (durable === undefined) say('(redis-server is not installed: no durable Redis baseline)');
      const names = Object.values(DATA).filter(
        (n) => durable !== undefined || n !== DATA.setDurable,
      );
      try {
        data = await withServer({ durability: 'none' }, (fast) =>
          grid(names, {
            [DATA.put]: locksmithData(server.url, 'put'),
            [DATA.putNone]: locksmithData(fast.url, 'put'),
            [DATA.set]: redisData('set'),
            [DATA.setDurable]: redisData('set', durable?.port),
            [DATA.get]: locksmithData(server.url, 'get'),
            [DATA.redisGet]: redisData('get'),
          }),
        );
      } finally {
        await durable?.close();
      }
      printGrid(
        '## 2. put / get per second (one 100-byte cell)',
        'calls/s',
        Object.values(DATA).filter((n) => Object.values(data).some((row) => n in row)),
        data,
      );
    }
    if (PARTS.has('3')) {
      const echo = await ServerChild.start('echo');
      try {
        floor = await grid(Object.values(FLOOR), {
          [FLOOR.echo]: locksmithData(echo.url, 'ping'),
          [FLOOR.ping]: locksmithData(server.url, 'ping'),
        });
      } finally {
        await echo.close();
      }
      printGrid(
        '## 3. Loopback floor: round trips per second',
        'calls/s',
        Object.values(FLOOR),
        floor,
      );
    }
  });

  const ratios: string[][] = [];
  const goals: string[][] = [];
  for (const cell of CELLS.map(cellName)) {
    for (const [what, value, goal, higher, bound] of cellRatios(
      locks[cell] ?? {},
      data[cell] ?? {},
      floor[cell] ?? {},
    )) {
      if (Number.isNaN(value)) continue;
      const target = Number.isNaN(goal) ? '(no goal)' : `${higher ? '≥' : '≤'} ${goal}×`;
      ratios.push([cell, what, ratio(value), target]);
      if (!Number.isNaN(goal)) {
        const met = higher ? value >= goal : value <= goal;
        // A goal above what the do-nothing floor reaches is out of reach of any server.
        const beyond = !met && !Number.isNaN(bound) && bound < goal;
        goals.push([
          `${what}, ${cell}`,
          target,
          ratio(value),
          Number.isNaN(bound) ? '' : ratio(bound),
          beyond ? 'MISSED (beyond the floor)' : verdict(met),
        ]);
      }
    }
  }
  if (ratios.length > 0) {
    sayTable('## Ratios', ['cell', 'ratio', 'measured', 'goal'], ratios);
    say();
  }

  if (PARTS.has('4')) {
    sayTable(
      `## 4. Memory: ${SESSIONS.toLocaleString('en-US')} sessions (bare protocol connections), then one lock each`,
      ['state', 'RSS MiB', 'heap MiB', 'RSS B/each', 'heap B/each'],
      await memoryPerSession(),
    );
    say();
  }

  if (PARTS.has('5')) {
    const latency = await withServer({}, (server) => latencyUnderBlocked(server));
    sayTable(
      `## 5. Unrelated put/get latency (µs, ${LATENCY_CALLS} each, one client) with ${BLOCKED} lockRow calls blocked on one row`,
      ['call', 'p50 idle', 'p50 loaded', 'p99 idle', 'p99 loaded', 'p99 loaded/idle', '≤ 2×'],
      latency,
    );
    say();
    for (const row of latency) {
      goals.push([
        `${row[0]} p99 with ${BLOCKED} blocked lockers`,
        '≤ 2× idle',
        row[5] as string,
        '',
        row[6] as string,
      ]);
    }
  }

  sayTable('## Goals', ['goal', 'target', 'measured', 'floor allows', 'verdict'], goals);
  say();
  say(`- ${await load()}`);
}

await main();
process.exit(0);
