/**
 * Row lock loss detection and handle cost: a script, never a test.
 *
 *   npm run build && npm run build:test && node dist-test/bench/rows-lease-loss.bench.js
 *
 * 1. Detection latency: from a lease's deadline (the exact value the region computed from its
 *    monotonic clock at the grant) to the moment the lock's `signal` fired `abort` in the
 *    holder. One lock at a time, then 1000 locks expiring together (the one lease timer
 *    serves them all, so the last one waits for the 999 before it).
 * 2. The cost of the handle on the explicit path: `region.lockRow` + `region.unlockRow`, and
 *    `await tryLockRow` + `await unlockRow`, per operation, over 1024 rows (uncontended, in memory).
 *
 * The machine may be shared: run it twice and look at the spread.
 */
import { systemClock } from '../src/core/clock.js';
import { Region } from '../src/rows/index.js';
import { median, percentile } from './support.js';

const LEASE_MS = 20;
const ROUNDS = 9;
const OPS = 100_000;
const ROWS = Array.from({ length: 1024 }, (_, i) => `row-${i}`);

/** The system clock, remembering the last monotonic reading (the grant reads it once). */
let lastReading = 0;
const clock = {
  ...systemClock,
  monotonic: () => {
    lastReading = performance.now();
    return lastReading;
  },
};

interface Handle {
  signal?: AbortSignal;
}

/** Lease deadline → abort event, in ms, for `count` locks granted together. */
async function latencies(region: Region, count: number, prefix: string): Promise<number[]> {
  const waits: Promise<number>[] = [];
  const keepAlive = setInterval(() => {}, 1000);
  for (let i = 0; i < count; i++) {
    const lock = (await region.tryLockRow(`${prefix}-${i}`, { renew: false })) as Handle | null;
    if (lock === null) throw new Error('row held');
    // As the row lock manager computes it: rounded up to a whole millisecond.
    const deadline = Math.ceil(lastReading + LEASE_MS);
    const signal = lock.signal as AbortSignal;
    waits.push(
      new Promise((resolve) =>
        signal.addEventListener('abort', () => resolve(performance.now() - deadline), {
          once: true,
        }),
      ),
    );
  }
  const result = await Promise.all(waits);
  clearInterval(keepAlive);
  return result;
}

function summary(label: string, ms: readonly number[]): string {
  const f = (v: number) => v.toFixed(3);
  return `| ${label} | ${ms.length} | ${f(percentile(ms, 50))} | ${f(percentile(ms, 99))} | ${f(Math.max(...ms))} |`;
}

async function ns(run: (region: Region) => Promise<void> | void): Promise<number> {
  const samples: number[] = [];
  for (let round = 0; round <= ROUNDS; round++) {
    const region = await Region.open({ families: ['f'] });
    const start = process.hrtime.bigint();
    await run(region);
    const elapsed = Number(process.hrtime.bigint() - start) / OPS;
    await region.close();
    if (round > 0) samples.push(elapsed);
  }
  return median(samples);
}

const region = await Region.open({ families: ['f'], leasePeriodMs: LEASE_MS, clock });
const probe = (await region.tryLockRow('probe', { renew: false })) as Handle | null;
if (probe?.signal === undefined) {
  console.log('(this RowLock has no signal: detection latency not measured)');
} else {
  const single: number[] = [];
  for (let i = 0; i < 300; i++) single.push(...(await latencies(region, 1, `single-${i}`)));
  const batch: number[] = [];
  for (let i = 0; i < 5; i++) batch.push(...(await latencies(region, 1000, `batch-${i}`)));
  console.log(`Node ${process.version}; lease ${LEASE_MS} ms; system clock.\n`);
  console.log('### Lease deadline → lock.signal aborted (ms)\n');
  console.log('| scenario | samples | p50 | p99 | max |\n|---|---:|---:|---:|---:|');
  console.log(summary('one lock at a time', single));
  console.log(summary('1000 locks expiring together', batch));
}
await region.close();

const lockUnlock = await ns(async (r) => {
  for (let i = 0; i < OPS; i++) await r.unlockRow(await r.lockRow(ROWS[i & 1023] as string));
});
const tryUnlock = await ns(async (r) => {
  for (let i = 0; i < OPS; i++) {
    const lock = await r.tryLockRow(ROWS[i & 1023] as string);
    if (lock === null) throw new Error('held');
    await r.unlockRow(lock);
  }
});
console.log('\n### Region explicit lock + unlock, uncontended (ns/op, median)\n');
console.log('| operation | ns/op |\n|---|---:|');
console.log(`| await lockRow + unlockRow | ${lockUnlock.toFixed(0)} |`);
console.log(`| tryLockRow + unlockRow | ${tryUnlock.toFixed(0)} |`);
