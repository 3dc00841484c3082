/**
 * Directory-lock loss detection latency: `node dist-test/bench/directory-loss.bench.js [runs]`
 * (a script, never a test). For NativeFS and SimpleFS locks it measures the time from an
 * external change of the held lock file (unlink; rename of another file or of a symbolic link
 * over it; rename of its directory) to the
 * moment `lock.signal` has aborted, over many runs, and prints median, p99 and max.
 * docs/directory.md records a run.
 */
import { mkdtempSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  FSDirectory as FSDir,
  type FSDirectory,
  type LockFactory,
  NativeFSLockFactory,
  SimpleFSLockFactory,
} from '../src/directory/index.js';
import { fmt, median, percentile, table } from './support.js';

const RUNS = Number(process.argv[2] ?? 500);

/** Changes the held lock file in `dir`; returns what puts the directory back for the next run. */
type Change = (dir: string) => (() => void) | undefined;
const changes: Record<string, Change> = {
  delete: (dir) => {
    unlinkSync(join(dir, 'write.lock'));
    return undefined;
  },
  'rename over': (dir) => {
    writeFileSync(join(dir, 'other'), '');
    renameSync(join(dir, 'other'), join(dir, 'write.lock'));
    return undefined;
  },
  'symlink over': (dir) => {
    symlinkSync('elsewhere', join(dir, 'link'));
    renameSync(join(dir, 'link'), join(dir, 'write.lock'));
    return undefined;
  },
  'directory moved': (dir) => {
    renameSync(dir, `${dir}.away`);
    return () => renameSync(`${dir}.away`, dir);
  },
};

async function measure(factory: LockFactory, change: Change): Promise<number[]> {
  const path = mkdtempSync(join(tmpdir(), 'locksmith-loss-'));
  const dir: FSDirectory = await FSDir.open(path, factory);
  const samples: number[] = [];
  try {
    for (let i = 0; i < RUNS; i++) {
      rmSync(join(path, 'write.lock'), { force: true });
      const lock = await dir.obtainLock('write.lock');
      const aborted = new Promise<number>((resolve) =>
        lock.signal.addEventListener('abort', () => resolve(performance.now()), { once: true }),
      );
      // Let the watch start (and its first check run) before the change.
      await new Promise((r) => setTimeout(r, 2));
      const start = performance.now();
      const restore = change(path);
      samples.push((await aborted) - start);
      restore?.();
      await lock.close().catch(() => {});
    }
  } finally {
    rmSync(path, { recursive: true, force: true });
  }
  return samples;
}

// The watch never keeps a process alive (by design), so this script keeps itself alive.
const keepAlive = setInterval(() => {}, 1000);
const rows: string[][] = [];
for (const [factoryName, factory] of [
  ['NativeFS', NativeFSLockFactory.INSTANCE],
  ['SimpleFS', SimpleFSLockFactory.INSTANCE],
] as const) {
  for (const [changeName, change] of Object.entries(changes)) {
    const samples = await measure(factory, change);
    rows.push([
      factoryName,
      changeName,
      String(samples.length),
      `${fmt(median(samples))} ms`,
      `${fmt(percentile(samples, 99))} ms`,
      `${fmt(Math.max(...samples))} ms`,
    ]);
  }
}
clearInterval(keepAlive);
console.log(table(['factory', 'change', 'runs', 'median', 'p99', 'max'], rows));
