/**
 * Row-store throughput: puts and gets per second, in memory, durable to the OS (`none`) and
 * durable to disk (`fsync`), with 1 and with 64 concurrent writers. Group commit is what lets
 * the fsync figures grow with concurrency. Run: `npm run bench:rows` (after the lock part).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Get, Put, Region } from '../src/rows/index.js';

const VALUE = Buffer.alloc(100, 7);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);

type Mode = 'memory' | 'none' | 'fsync';

async function withRegion<T>(mode: Mode, body: (region: Region) => Promise<T>): Promise<T> {
  const dir = mode === 'memory' ? undefined : mkdtempSync(join(tmpdir(), 'locksmith-bench-rows-'));
  const region = await Region.open({
    families: ['f'],
    ...(dir === undefined ? {} : { dir, durability: mode as 'none' | 'fsync' }),
  });
  try {
    return await body(region);
  } finally {
    await region.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  }
}

/** Puts per second with `concurrency` writers on distinct rows, each put one 100-byte cell. */
async function putRate(mode: Mode, concurrency: number): Promise<number> {
  return withRegion(mode, async (region) => {
    let count = 0;
    const deadline = performance.now() + SECONDS * 1000;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async (_, w) => {
        let i = 0;
        while (performance.now() < deadline) {
          await region.put(new Put(`row-${w}-${i++ % 1000}`).add('f', 'q', VALUE));
          count++;
        }
      }),
    );
    return count / ((performance.now() - started) / 1000);
  });
}

/** Gets per second of single rows out of 10 000. */
async function getRate(): Promise<number> {
  return withRegion('memory', async (region) => {
    for (let i = 0; i < 10_000; i++) await region.put(new Put(`row-${i}`).add('f', 'q', VALUE));
    let count = 0;
    const started = performance.now();
    const deadline = started + SECONDS * 1000;
    while (performance.now() < deadline) {
      for (let k = 0; k < 1000; k++) {
        const result = await region.get(new Get(`row-${(count + k) % 10_000}`));
        if (result.isEmpty) throw new Error('missing row');
      }
      count += 1000;
    }
    return count / ((performance.now() - started) / 1000);
  });
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const rows: [string, string][] = [];
for (const mode of ['memory', 'none', 'fsync'] as const) {
  for (const concurrency of [1, 64]) {
    rows.push([
      `put, ${mode}, ${concurrency} writer${concurrency > 1 ? 's' : ''}`,
      fmt(await putRate(mode, concurrency)),
    ]);
  }
}
rows.push(['get (one row of 10 000, in memory)', fmt(await getRate())]);
console.log(`\nRow store throughput (${SECONDS} s each, 100-byte values)\n`);
console.log('| operation | per second |\n|---|---:|');
for (const [name, rate] of rows) console.log(`| ${name} | ${rate} |`);
