/**
 * One large write with and without a scan pinning an old read point (issue 18 §3): an
 * in-process Region, a put of N cells of one column (one timestamp; then falling timestamps),
 * timed as one call. With a scan open no version can be pruned, which used to make each cell's
 * trim walk the whole column. Also the longest gap of a 5 ms timer during the put: how long the
 * event loop was held in one piece.
 *
 *   npm run build && npm run build:test && node dist-test/bench/rows-large-write.bench.js
 */
import { Put, Region, Scan } from '../src/rows/index.js';

const SIZES = (process.env.BENCH_CELLS ?? '5000,10000,20000,40000,100000').split(',').map(Number);

async function once(cells: number, scan: boolean, falling: boolean) {
  const region = await Region.open({ families: ['f'] });
  await region.put(new Put('r0').add('f', 'q', 'v'));
  const scanner = region.scan(new Scan())[Symbol.asyncIterator]();
  if (scan) await scanner.next();
  const put = new Put('big');
  for (let i = 0; i < cells; i++) put.add('f', 'q', `v${i}`, falling ? cells - i : undefined);
  let last = performance.now();
  let stall = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    stall = Math.max(stall, now - last);
    last = now;
  }, 5);
  const start = performance.now();
  await region.put(put);
  const ms = performance.now() - start;
  clearInterval(timer);
  stall = Math.max(stall, performance.now() - last);
  await scanner.return();
  await region.close();
  return { ms, stall };
}

const rows: Record<string, string | number>[] = [];
for (const falling of [false, true]) {
  for (const cells of SIZES) {
    const without = await once(cells, false, falling);
    const withScan = await once(cells, true, falling);
    rows.push({
      timestamps: falling ? 'falling' : 'one',
      cells,
      'ms, no scan': Math.round(without.ms),
      'ms, scan open': Math.round(withScan.ms),
      'longest stall ms, scan open': Math.round(withScan.stall),
    });
  }
}
console.table(rows);
