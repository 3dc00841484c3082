/**
 * Store-locker loss detection latency: `node dist-test/bench/store-loss.bench.js [runs]` (a
 * script, never a test). For a SharedFileLocker master it measures the time from an external
 * change of its lock file (unlink; another file renamed over it; a rewrite in place with
 * another nonce) to the moment the Mastership's `signal` aborted, with no keep-alive running,
 * and prints median, p99 and max. docs/store.md records a run.
 */
import { mkdtempSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { SharedFileLocker } from '../src/store/index.js';
import { fmt, median, percentile, table } from './support.js';

const RUNS = Number(process.argv[2] ?? 100);

const changes: Record<string, (path: string) => void> = {
  delete: (path) => unlinkSync(path),
  'rename over': (path) => {
    writeFileSync(`${path}.new`, 'x');
    renameSync(`${path}.new`, path);
  },
  rewrite: (path) => {
    const bytes = readFileSync(path);
    bytes.fill(7, 8, 24); // another holder's nonce
    writeFileSync(path, bytes);
  },
};

// What reports the loss never keeps the process alive; this does, for the awaits below.
const keep = setInterval(() => {}, 1_000);
const rows: string[][] = [];
for (const [name, change] of Object.entries(changes)) {
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const dir = mkdtempSync(join(tmpdir(), 'locksmith-store-loss-'));
    const locker = new SharedFileLocker({ directory: dir });
    const m = await locker.start();
    const aborted = new Promise<void>((resolve) =>
      m.signal.addEventListener('abort', () => resolve(), { once: true }),
    );
    await new Promise((r) => setTimeout(r, 5));
    const t0 = performance.now();
    change(locker.path);
    await aborted;
    times.push(performance.now() - t0);
    await m.close();
    rmSync(dir, { recursive: true, force: true });
  }
  rows.push([name, fmt(median(times)), fmt(percentile(times, 99)), fmt(Math.max(...times))]);
}
clearInterval(keep);
console.log(`SharedFileLocker loss → Mastership.signal aborted, ${RUNS} runs each (ms)`);
console.log(table(['change', 'median', 'p99', 'max'], rows));
