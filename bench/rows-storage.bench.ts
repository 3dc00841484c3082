/**
 * RowStorage append throughput: durability fsync / none × 1 / 64 concurrent appenders ×
 * 100 B / 1 KiB records, each for BENCH_SECONDS (default 2) in a fresh directory under
 * BENCH_DIR (default the OS temp dir; put it on the disk you care about). Reports appends/s,
 * write batches and fdatasyncs per second, records per batch and append latency, next to a
 * floor: a bare `write(100 B) + fdatasync` loop on the same file system. The `epoch` cases
 * open the storage with an epoch (a master's), so every batch is also checked (guard lock
 * valid, epoch file still ours) before it is acknowledged; last, the check alone. Then the
 * same appends on `PostgresRegionStorage` (BENCH_PG, default the local test database; left out
 * when it does not answer), where each batch is one statement with the fence in it and the
 * commit is PostgreSQL's WAL flush: the "fsyncs/s" column counts its commits.
 *
 *   npm run build && npm run build:test && node dist-test/bench/rows-storage.bench.js
 */
import { mkdtempSync, rmSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { takeOverLock } from '../src/directory/take-over-lock.js';
import { PostgresRegionStorage } from '../src/rows/postgres-region-storage.js';
import { RowStorage } from '../src/rows/row-storage.js';
import { EpochFence, writeEpochFile } from '../src/rows/storage-epoch.js';
import { percentile } from './support.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);
const BASE = process.env.BENCH_DIR ?? tmpdir();

interface Row {
  case: string;
  appendsPerSec: number;
  batchesPerSec: number;
  fsyncsPerSec: number;
  perBatch: number;
  p50us: number;
  p99us: number;
}

async function floor(): Promise<Row> {
  const dir = mkdtempSync(join(BASE, 'rows-storage-bench-'));
  try {
    const handle = await fsp.open(join(dir, 'floor'), 'w');
    const buf = Buffer.alloc(100, 1);
    const lat: number[] = [];
    let n = 0;
    const end = performance.now() + SECONDS * 1000;
    while (performance.now() < end) {
      const t0 = performance.now();
      await handle.write(buf, 0, buf.length, n * buf.length);
      await handle.datasync();
      lat.push((performance.now() - t0) * 1000);
      n++;
    }
    await handle.close();
    const rate = n / SECONDS;
    return row('floor: write 100 B + fdatasync, 1 at a time', rate, rate, rate, 1, lat);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const PG_URL = process.env.BENCH_PG ?? 'postgres://postgres@127.0.0.1:5432/test';
const PG_PREFIX = `bench_${process.pid}`;

async function measure(
  durability: 'fsync' | 'none',
  appenders: number,
  size: number,
  epoch?: number,
  on: 'files' | 'postgres' = 'files',
) {
  const dir = mkdtempSync(join(BASE, 'rows-storage-bench-'));
  try {
    const options = epoch === undefined ? { durability } : { durability, epoch };
    const { storage } =
      on === 'files'
        ? await RowStorage.open(dir, options)
        : await PostgresRegionStorage.open({
            ...options,
            database: PG_URL,
            tablePrefix: PG_PREFIX,
            region: `r-${durability}-${appenders}-${size}-${epoch ?? 0}`,
            directory: dir,
          });
    const record = Buffer.alloc(size, 7);
    const lat: number[] = [];
    const before = { ...storage.stats };
    const start = performance.now();
    const end = start + SECONDS * 1000;
    await Promise.all(
      Array.from({ length: appenders }, async () => {
        while (performance.now() < end) {
          const t0 = performance.now();
          await storage.append(record);
          lat.push((performance.now() - t0) * 1000);
        }
      }),
    );
    const elapsed = (performance.now() - start) / 1000;
    const after = storage.stats;
    await storage.close();
    const records = after.records - before.records;
    const batches = after.batches - before.batches;
    const syncs =
      'fileSyncs' in after ? after.fileSyncs - (before as typeof after).fileSyncs : batches;
    return row(
      `${on === 'postgres' ? 'PostgreSQL: ' : ''}${durability}, ${appenders} appender${appenders > 1 ? 's' : ''}, ${size} B` +
        (epoch === undefined ? '' : ', epoch'),
      records / elapsed,
      batches / elapsed,
      syncs / elapsed,
      records / Math.max(1, batches),
      lat,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function row(
  name: string,
  appendsPerSec: number,
  batchesPerSec: number,
  fsyncsPerSec: number,
  perBatch: number,
  lat: number[],
): Row {
  return {
    case: name,
    appendsPerSec,
    batchesPerSec,
    fsyncsPerSec,
    perBatch,
    p50us: percentile(lat, 50),
    p99us: percentile(lat, 99),
  };
}

const fmt = (n: number) =>
  n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(n >= 10 ? 1 : 2);

function print(rows: Row[]): void {
  const header = [
    'case',
    'appends/s',
    'batches/s',
    'fsyncs/s',
    'records/batch',
    'p50 µs',
    'p99 µs',
  ];
  const cells = rows.map((r) => [
    r.case,
    fmt(r.appendsPerSec),
    fmt(r.batchesPerSec),
    fmt(r.fsyncsPerSec),
    fmt(r.perBatch),
    fmt(r.p50us),
    fmt(r.p99us),
  ]);
  const widths = header.map((h, i) =>
    Math.max(h.length, ...cells.map((c) => (c[i] as string).length)),
  );
  const line = (c: string[]) =>
    `| ${c.map((v, i) => (i === 0 ? v.padEnd(widths[i] as number) : v.padStart(widths[i] as number))).join(' | ')} |`;
  console.log(line(header));
  console.log(
    `|${widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
  );
  for (const c of cells) console.log(line(c));
}

async function pgAnswers(): Promise<boolean> {
  const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3000 });
  try {
    await c.connect();
    await c.end();
    return true;
  } catch {
    return false;
  }
}

async function dropPgTables(): Promise<void> {
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  const t = PG_PREFIX;
  await c.query(
    `DROP TABLE IF EXISTS ${t}_schema, ${t}_regions, ${t}_log, ${t}_snapshots, ${t}_tables`,
  );
  await c.end();
}

/** Mean cost of one epoch check (what each batch pays with an epoch), in µs. */
async function checkCost(): Promise<number> {
  const dir = mkdtempSync(join(BASE, 'rows-storage-bench-'));
  try {
    const lock = await takeOverLock(dir);
    const fence = new EpochFence(dir, 1, lock, await recordEpoch(dir));
    const n = 100_000;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) fence.check('bench');
    const us = ((performance.now() - t0) * 1000) / n;
    await lock.close();
    return us;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function recordEpoch(dir: string) {
  const handle = await fsp.open(dir, 'r');
  try {
    return await writeEpochFile(dir, handle, 1);
  } finally {
    await handle.close();
  }
}

const rows: Row[] = [await floor()];
for (const durability of ['fsync', 'none'] as const) {
  for (const appenders of [1, 64]) {
    for (const size of [100, 1024]) rows.push(await measure(durability, appenders, size));
    rows.push(await measure(durability, appenders, 100, 1));
  }
}
if (await pgAnswers()) {
  try {
    for (const durability of ['fsync', 'none'] as const) {
      for (const appenders of [1, 64])
        rows.push(await measure(durability, appenders, 100, 1, 'postgres'));
    }
  } finally {
    await dropPgTables();
  }
} else {
  console.log(`(PostgreSQL at ${PG_URL} does not answer: its rows are left out)`);
}
console.log(`RowStorage appends, ${SECONDS} s per case, in ${BASE} (Node ${process.version})\n`);
print(rows);
console.log(
  `\nOne epoch check (lock.ensureValid + stat of the epoch file): ${fmt(await checkCost())} µs`,
);
