/**
 * The server on its two storages (issue 23): `npm run bench:server-storage` (a script, never a
 * test). The same server child as bench/server.bench.ts (durability `fsync`, durable
 * sessions), once on the directory storage (log segments under its data directory) and once
 * on PostgreSQL (`serve --storage postgres://...`: every write batch one statement with its
 * fence, acknowledged on PostgreSQL's commit), each with its table in 1 region and split in 8.
 * Through the real client:
 *
 * 1. put (one 100-byte cell), get, and a lock cycle (lockRow + unlockRow: with durable sessions
 *    each is recorded) per second, at each cell of BENCH_CELLS (default 1x1,8x16).
 * 2. CPU per call over the measured window: the server process's (`process.cpuUsage`), and
 *    PostgreSQL's, summed over every `postgres` process of the machine (its backends, WAL
 *    writer, checkpointer; read from /proc, so Linux only and only meaningful while nothing else
 *    uses the database), and what that makes of N machines.
 *
 * BENCH_PG (default the local test database) is the PostgreSQL; its tables (prefix
 * `lsm_bench_<random>`) are dropped at the end. Rates are over BENCH_SECONDS (default 2) after
 * BENCH_WARMUP_MS (default 500).
 *
 *   npm run build && npm run build:test && node dist-test/bench/server-storage.bench.js
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { connect, type LocksmithClient } from '../src/client/locksmith-client.js';
import { Get, Put } from '../src/rows/index.js';
import { dropStoragePrefix, postgresAnswers } from './pg-support.js';
import {
  type Cell,
  cellName,
  machineHeader,
  measureRate,
  ServerChild,
  type Subject,
} from './server-support.js';
import { fmt, ratio, say, sayTable } from './support.js';

const PG = process.env.BENCH_PG ?? 'postgres://postgres@127.0.0.1:5432/test';
const CELLS: Cell[] = (process.env.BENCH_CELLS ?? '1x1,8x16').split(',').map((text) => {
  const [conns, depth] = text.split('x').map(Number);
  return { conns: conns as number, depth: depth as number };
});
const VALUE = Buffer.alloc(100, 7);
const TABLE = 'bench';
/** 8 regions: a worker's row starts with its number modulo 8, so each region gets 1/8. */
const SPLITS = ['1', '2', '3', '4', '5', '6', '7'];
const rowOf = (worker: number) => `${worker % 8}-row-${worker}`;

type Op = 'put' | 'get' | 'lock';
const OPS: Op[] = ['put', 'get', 'lock'];
const OP_NAME: Record<Op, string> = {
  put: 'put (fsync)',
  get: 'get',
  lock: 'lockRow + unlockRow',
};

/** CPU time (µs) of every `postgres` process now (utime + stime of /proc/<pid>/stat). */
function postgresCpuMicros(): number {
  const tick = 1_000_000 / 100; // USER_HZ is 100 on Linux
  let total = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      if (comm !== 'postgres') continue;
      const fields = stat.slice(close + 2).split(' ');
      // Fields 14 and 15 of stat (utime, stime) are at 11 and 12 after the comm.
      total += (Number(fields[11]) + Number(fields[12])) * tick;
    } catch {
      // The process ended meanwhile.
    }
  }
  return total;
}

function subject(url: string, op: Op) {
  return async (conns: number): Promise<Subject> => {
    const list: LocksmithClient[] = await Promise.all(
      Array.from({ length: conns }, () => connect(url)),
    );
    const tables = list.map((c) => c.table(TABLE));
    if (op === 'get') {
      await (tables[0] as (typeof tables)[number]).batch(
        Array.from({ length: 256 }, (_, w) => new Put(rowOf(w)).add('f', 'q', VALUE)),
      );
    }
    return {
      async step(conn, worker) {
        const table = tables[conn] as (typeof tables)[number];
        const row = rowOf(worker);
        if (op === 'put') await table.put(new Put(row).add('f', 'q', VALUE));
        else if (op === 'get') {
          if ((await table.get(new Get(row))).isEmpty) throw new Error('no row');
        } else await table.unlockRow(await table.lockRow(row));
      },
      close: async () => {
        await Promise.allSettled(list.map((c) => c.close()));
      },
    };
  };
}

interface Measured {
  rate: number;
  serverUs: number;
  postgresUs: number;
}

async function measure(server: ServerChild, cell: Cell, op: Op): Promise<Measured> {
  let s0 = 0;
  let p0 = 0;
  let serverUs = 0;
  let postgresUs = 0;
  let t0 = 0;
  const rate = await measureRate(cell, subject(server.url, op), {
    async start() {
      s0 = await server.cpuMicros();
      p0 = postgresCpuMicros();
      t0 = performance.now();
    },
    async end() {
      serverUs = (await server.cpuMicros()) - s0;
      postgresUs = postgresCpuMicros() - p0;
      // The window's calls: the rate is taken over the same window.
      const seconds = (performance.now() - t0) / 1000;
      serverUs /= seconds;
      postgresUs /= seconds;
    },
  });
  // CPU per second of the window ÷ calls per second = CPU per call.
  return { rate, serverUs: serverUs / rate, postgresUs: postgresUs / rate };
}

interface Setup {
  name: string;
  storage: 'directory' | 'postgres';
  regions: 1 | 8;
}

const SETUPS: Setup[] = [
  { name: 'directory, 1 region', storage: 'directory', regions: 1 },
  { name: 'directory, 8 regions', storage: 'directory', regions: 8 },
  { name: 'PostgreSQL, 1 region', storage: 'postgres', regions: 1 },
  { name: 'PostgreSQL, 8 regions', storage: 'postgres', regions: 8 },
];

async function main(): Promise<void> {
  const postgres = await postgresAnswers(PG);
  const load = await machineHeader([`PostgreSQL: ${postgres ?? `not answering at ${PG}`}`]);
  say();
  if (postgres === undefined) {
    say('PostgreSQL does not answer: nothing to compare.');
    return;
  }
  const results = new Map<string, Measured>();
  for (const setup of SETUPS) {
    const prefix = `lsm_bench_${randomBytes(4).toString('hex')}`;
    const server = await ServerChild.start(
      'locksmith',
      setup.storage === 'postgres' ? { pgStorage: { database: PG, tablePrefix: prefix } } : {},
    );
    try {
      const admin = await connect(server.url);
      await admin.createTable(TABLE, ['f'], setup.regions === 8 ? { splits: SPLITS } : {});
      await admin.close();
      for (const cell of CELLS) {
        for (const op of OPS) {
          results.set(`${setup.name}|${cellName(cell)}|${op}`, await measure(server, cell, op));
        }
      }
    } finally {
      await server.close();
      if (setup.storage === 'postgres') await dropStoragePrefix(PG, prefix);
    }
  }

  const at = (setup: string, cell: Cell, op: Op) =>
    results.get(`${setup}|${cellName(cell)}|${op}`) as Measured;
  const rows: string[][] = [];
  for (const cell of CELLS) {
    for (const op of OPS) {
      const base = at('directory, 1 region', cell, op).rate;
      rows.push([
        `${OP_NAME[op]}, ${cellName(cell)}`,
        ...SETUPS.map((s) => fmt(at(s.name, cell, op).rate)),
        ratio(at('PostgreSQL, 1 region', cell, op).rate / base),
        ratio(at('PostgreSQL, 8 regions', cell, op).rate / base),
      ]);
    }
  }
  sayTable(
    '## 1. Calls per second through the server',
    ['calls/s', ...SETUPS.map((s) => s.name), 'PG 1 ÷ dir 1', 'PG 8 ÷ dir 1'],
    rows,
  );
  say();

  const cpu: string[][] = [];
  for (const cell of CELLS) {
    for (const op of OPS) {
      for (const s of SETUPS) {
        const m = at(s.name, cell, op);
        cpu.push([
          `${OP_NAME[op]}, ${cellName(cell)}`,
          s.name,
          fmt(m.serverUs),
          s.storage === 'postgres' ? fmt(m.postgresUs) : '—',
        ]);
      }
    }
  }
  sayTable(
    '## 2. CPU per call (µs): the server process, and PostgreSQL (all its processes)',
    ['call', 'setup', 'server µs', 'PostgreSQL µs'],
    cpu,
  );
  say();
  const big = CELLS[CELLS.length - 1] as Cell;
  const put = at('PostgreSQL, 8 regions', big, 'put');
  say(
    `Model, put (fsync) on PostgreSQL at ${cellName(big)}: ${fmt(put.serverUs)} µs of server CPU and ${fmt(put.postgresUs)} µs of PostgreSQL CPU per put. One server core serves at most ${fmt(1e6 / put.serverUs)} puts/s; one PostgreSQL core ${fmt(1e6 / put.postgresUs)}/s. Here both share 2 cores: at most ${fmt(2e6 / (put.serverUs + put.postgresUs))} puts/s whatever the number of servers, so 2 or 3 servers on this machine only split the same 2 cores. On N server machines of C cores each beside a PostgreSQL of P cores, puts/s ≈ min(N·C·${fmt(1e6 / put.serverUs)}, P·${fmt(1e6 / put.postgresUs)}) until PostgreSQL's WAL flushes bound it.`,
  );
  say();
  say(`- ${await load()}`);
}

await main();
process.exit(0);
