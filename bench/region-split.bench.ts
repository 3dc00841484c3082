/**
 * A live split under write load (issue 23): `npm run bench:region-split` (a script, never a
 * test). A server child (durability `fsync`) on the directory storage and on PostgreSQL
 * (`BENCH_PG`, default the local test database); a table of N rows of 100 bytes (each N of
 * BENCH_SPLIT_ROWS, default 1000,10000,100000); 8 connections put rows spread over the whole
 * table, one at a time each, while the table is split at its middle row. Measured:
 *
 * - the split: how long `splitTable` took, as its caller saw it;
 * - the writers: the longest put that overlapped the split (a put to the region being split
 *   waits for it) against the p99 of the puts outside it.
 *
 *   npm run build && npm run build:test && node dist-test/bench/region-split.bench.js
 */
import { randomBytes } from 'node:crypto';
import { connect } from '../src/client/locksmith-client.js';
import { Put } from '../src/rows/index.js';
import { dropStoragePrefix, postgresAnswers } from './pg-support.js';
import { machineHeader, ServerChild } from './server-support.js';
import { fmt, say, sayTable } from './support.js';

const PG = process.env.BENCH_PG ?? 'postgres://postgres@127.0.0.1:5432/test';
const SIZES = (process.env.BENCH_SPLIT_ROWS ?? '1000,10000,100000').split(',').map(Number);
const WRITERS = 8;
const VALUE = Buffer.alloc(100, 7);
const rowOf = (i: number) => `row-${String(i).padStart(7, '0')}`;

interface Sample {
  splitMs: number;
  worstDuringMs: number;
  p99OutsideMs: number;
  puts: number;
}

async function sample(url: string, rows: number): Promise<Sample> {
  const admin = await connect(url);
  try {
    await admin.createTable('t', ['f']);
    const t = admin.table('t');
    for (let i = 0; i < rows; i += 1000) {
      const n = Math.min(1000, rows - i);
      await t.batch(
        Array.from({ length: n }, (_, k) => new Put(rowOf(i + k)).add('f', 'q', VALUE)),
      );
    }
    const writers = await Promise.all(Array.from({ length: WRITERS }, () => connect(url)));
    const puts: { start: number; end: number }[] = [];
    let running = true;
    const loops = writers.map(async (c, w) => {
      for (let n = 0; running; n++) {
        const row = rowOf((w * 7919 + n * 104_729) % rows);
        const start = performance.now();
        await c.table('t').put(new Put(row).add('f', 'q', VALUE));
        puts.push({ start, end: performance.now() });
      }
    });
    await new Promise((r) => setTimeout(r, 1000));
    const splitStart = performance.now();
    await admin.splitTable('t', rowOf(Math.floor(rows / 2)));
    const splitEnd = performance.now();
    await new Promise((r) => setTimeout(r, 1000));
    running = false;
    await Promise.all(loops);
    await Promise.all(writers.map((c) => c.close()));
    const during = puts.filter((p) => p.end >= splitStart && p.start <= splitEnd);
    const outside = puts
      .filter((p) => p.end < splitStart || p.start > splitEnd)
      .map((p) => p.end - p.start)
      .sort((a, b) => a - b);
    return {
      splitMs: splitEnd - splitStart,
      worstDuringMs: Math.max(0, ...during.map((p) => p.end - p.start)),
      p99OutsideMs: outside[Math.floor(outside.length * 0.99)] ?? 0,
      puts: puts.length,
    };
  } finally {
    await admin.close();
  }
}

async function main(): Promise<void> {
  const postgres = await postgresAnswers(PG);
  const load = await machineHeader([`PostgreSQL: ${postgres ?? `not answering at ${PG}`}`]);
  say();
  const rows: string[][] = [];
  for (const storage of ['directory', 'PostgreSQL'] as const) {
    if (storage === 'PostgreSQL' && postgres === undefined) {
      say(`PostgreSQL does not answer at ${PG}: its rows are left out.`);
      continue;
    }
    for (const size of SIZES) {
      const prefix = `lsm_bench_${randomBytes(4).toString('hex')}`;
      const server = await ServerChild.start(
        'locksmith',
        storage === 'PostgreSQL' ? { pgStorage: { database: PG, tablePrefix: prefix } } : {},
      );
      try {
        const s = await sample(server.url, size);
        rows.push([
          storage,
          fmt(size),
          `${fmt(s.splitMs)} ms`,
          `${fmt(s.worstDuringMs)} ms`,
          `${fmt(s.p99OutsideMs)} ms`,
          fmt(s.puts),
        ]);
      } finally {
        await server.close();
        if (storage === 'PostgreSQL') await dropStoragePrefix(PG, prefix);
      }
    }
  }
  sayTable(
    `## A live split at the middle row, ${WRITERS} writers putting across the table`,
    ['storage', 'rows', 'split took', 'longest put during it', 'p99 put outside it', 'puts'],
    rows,
  );
  say();
  say(`- ${await load()}`);
}

await main();
process.exit(0);
