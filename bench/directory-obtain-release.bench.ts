/**
 * Directory locks, part 1: uncontended obtain+release on a local directory, locksmith's
 * NativeFS and SimpleFS factories against proper-lockfile, npm `lockfile`, and a C floor
 * (bench/floor.c). `node dist-test/bench/directory-obtain-release.bench.js` (also part 1 of
 * `npm run bench:directory`, a script, never a test).
 */
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type * as Koffi from 'koffi';
import lockfile from 'lockfile';
import properLockfile from 'proper-lockfile';
import { Bench } from 'tinybench';
import { FSDirectory, NativeFSLockFactory, SimpleFSLockFactory } from '../src/directory/index.js';
import { type DirectoryPart, goals, runDirectoryBench, work } from './directory-support.js';
import { fmt, isMain, median, ratio, say, table } from './support.js';

const ROUNDS = 5;
/** Lock operations per timed sample, so the harness's own per-sample cost is amortised. */
const BATCH = 50;
const FLOOR_ITERATIONS = 100_000;

/** One run of the C floor: mean ns per obtain+release. */
function runFloor(exe: string, lockFile: string, fence: boolean): number {
  const args = [lockFile, String(FLOOR_ITERATIONS), ...(fence ? ['fence'] : [])];
  const run = spawnSync(exe, args, { encoding: 'utf8' });
  const ns = Number(run.stdout.trim());
  if (run.status !== 0 || !Number.isFinite(ns))
    throw new Error(`floor failed: ${run.stderr.trim()}`);
  return ns;
}

interface Candidate {
  name: string;
  /** One obtain followed by one release. */
  op: () => Promise<void> | void;
}

/**
 * Diagnostic: the system calls one NativeFS obtain+release makes (open, fcntl(F_OFD_SETLK),
 * fstat, lstat of the fence file's path, pread of the kept-open fence file, close; and
 * fstat + pwrite + fstat of the fence file when its 10 ms reservation runs out), made through the same Node fs calls and koffi binding, with
 * none of locksmith's own code. Linux on 64-bit only, like the OFD layer.
 */
function nodeSyscallsOp(dir: string): Candidate | undefined {
  if (process.platform !== 'linux' || (process.arch !== 'x64' && process.arch !== 'arm64'))
    return undefined;
  const koffi = createRequire(import.meta.url)('koffi') as typeof Koffi;
  const fcntl = koffi.load('libc.so.6').func('int fcntl(int fd, int cmd, void *arg)') as (
    fd: number,
    cmd: number,
    arg: Buffer,
  ) => number;
  const F_OFD_SETLK = 37;
  const F_WRLCK = 1;
  mkdirSync(dir, { recursive: true });
  const lockPath = join(dir, 'write.lock');
  const fence = openSync(`${lockPath}.fence`, constants.O_RDWR | constants.O_CREAT, 0o644);
  const flock = Buffer.alloc(32);
  const counter = Buffer.alloc(21);
  // The reservation (µs of wall clock) this loop last wrote, and the last token it issued.
  let reserved = 0;
  let last = 0;
  return {
    name: "Node fs+koffi: NativeFS's syscalls only (diagnostic)",
    op: () => {
      const fd = openSync(
        lockPath,
        constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW,
        0o644,
      );
      flock.fill(0);
      flock.writeInt16LE(F_WRLCK, 0);
      if (fcntl(fd, F_OFD_SETLK, flock) !== 0) throw new Error('fcntl(F_OFD_SETLK) failed');
      fstatSync(fd);
      lstatSync(`${lockPath}.fence`);
      readSync(fence, counter, 0, 21, 0);
      last = Math.max(last + 1, Date.now() * 1000);
      if (last > reserved) {
        fstatSync(fence);
        reserved = last + 10_000;
        counter.write(`${String(reserved).padStart(20, '0')}\n`, 0, 'latin1');
        writeSync(fence, counter, 0, 21, 0);
        fstatSync(fence);
      }
      closeSync(fd);
    },
  };
}

async function uncontended(floorExe: string | undefined): Promise<void> {
  say('## 1. Uncontended obtain+release (one process, local directory)');
  say();
  const native = await FSDirectory.open(join(work, 'native'), NativeFSLockFactory.INSTANCE);
  const simple = await FSDirectory.open(join(work, 'simple'), SimpleFSLockFactory.INSTANCE);
  const plTarget = join(work, 'proper-lockfile-target');
  writeFileSync(plTarget, '');
  const npmLockPath = join(work, 'npm-lockfile.lock');
  const lockAsync = promisify((path: string, cb: (err: Error | null) => void) =>
    lockfile.lock(path, {}, cb),
  );
  const unlockAsync = promisify((path: string, cb: (err: Error | null) => void) =>
    lockfile.unlock(path, cb),
  );

  const candidates: Candidate[] = [
    {
      name: 'locksmith NativeFSLockFactory',
      op: async () => {
        const lock = await native.obtainLock('write.lock');
        await lock.close();
      },
    },
    {
      name: 'locksmith SimpleFSLockFactory',
      op: async () => {
        const lock = await simple.obtainLock('write.lock');
        await lock.close();
      },
    },
    {
      name: 'proper-lockfile lock/release',
      op: async () => {
        const release = await properLockfile.lock(plTarget);
        await release();
      },
    },
    {
      name: 'proper-lockfile lockSync/unlock',
      op: () => {
        const release = properLockfile.lockSync(plTarget);
        release();
      },
    },
    {
      name: 'npm lockfile lock/unlock',
      op: async () => {
        await lockAsync(npmLockPath);
        await unlockAsync(npmLockPath);
      },
    },
    {
      name: 'npm lockfile lockSync/unlockSync',
      op: () => {
        lockfile.lockSync(npmLockPath);
        lockfile.unlockSync(npmLockPath);
      },
    },
  ];

  const syscallsOnly = nodeSyscallsOp(join(work, 'syscalls-only'));
  if (syscallsOnly !== undefined) candidates.splice(2, 0, syscallsOnly);

  const samples = new Map<string, number[]>();
  const record = (name: string, nsPerOp: number) => {
    const list = samples.get(name) ?? [];
    list.push(nsPerOp);
    samples.set(name, list);
  };
  const FLOOR = 'floor: C open+OFD lock+fstat+unlock+close';
  const FLOOR_FENCE = "C: NativeFS's syscalls (open+lock+fstat+fence lstat+pread+close)";

  for (let round = 0; round < ROUNDS; round++) {
    // The first round warms up longer (JIT, page cache, dentries); every round interleaves all
    // candidates so a slow phase of the machine hits them all alike.
    const bench = new Bench({
      time: 400,
      warmupTime: round === 0 ? 500 : 100,
      iterations: 4,
      throws: true,
    });
    for (const c of candidates) {
      bench.add(c.name, async () => {
        for (let i = 0; i < BATCH; i++) await c.op();
      });
    }
    await bench.run();
    for (const task of bench.tasks) {
      const result = task.result;
      if (result.state !== 'completed') throw new Error(`${task.name}: ${result.state}`);
      record(task.name, (result.period * 1e6) / BATCH);
    }
    if (floorExe !== undefined) {
      record(FLOOR, runFloor(floorExe, join(work, 'floor.lock'), false));
      record(FLOOR_FENCE, runFloor(floorExe, join(work, 'floor-fence.lock'), true));
    }
    process.stderr.write(`  round ${round + 1}/${ROUNDS} done\n`);
  }

  const nsOf = (name: string) => median(samples.get(name) ?? [Number.NaN]);
  const nativeNs = nsOf('locksmith NativeFSLockFactory');
  const names = [
    ...(floorExe === undefined ? [] : [FLOOR, FLOOR_FENCE]),
    ...candidates.map((c) => c.name),
  ];
  say(
    table(
      ['implementation', 'ops/s', 'µs/op', 'time vs NativeFS', 'rounds (µs/op)'],
      names.map((name) => {
        const ns = nsOf(name);
        return [
          name,
          fmt(1e9 / ns),
          fmt(ns / 1000),
          ratio(ns / nativeNs),
          (samples.get(name) ?? []).map((v) => fmt(v / 1000)).join(' '),
        ];
      }),
    ),
  );
  say();
  say(
    `Median of ${ROUNDS} rounds; JS rows time batches of ${BATCH} sequential obtain+release pairs with tinybench`,
  );
  say(
    `(~400 ms per candidate per round), the floor runs ${FLOOR_ITERATIONS} iterations per round.`,
  );
  say();

  if (floorExe !== undefined) {
    const vsFloor = nativeNs / nsOf(FLOOR);
    goals.push({
      what: 'NativeFS obtain+release vs C floor',
      goal: '≤ 3× floor',
      measured: `${ratio(vsFloor)} (${fmt(nativeNs / 1000)} vs ${fmt(nsOf(FLOOR) / 1000)} µs)`,
      met: vsFloor <= 3,
    });
  } else {
    goals.push({
      what: 'NativeFS obtain+release vs C floor',
      goal: '≤ 3× floor',
      measured: 'skipped (no cc)',
      met: undefined,
    });
  }
  const plNs = nsOf('proper-lockfile lock/release');
  goals.push({
    what: 'NativeFS vs proper-lockfile lock/release',
    goal: '≥ 20× faster',
    measured: `${ratio(plNs / nativeNs)} faster`,
    met: plNs / nativeNs >= 20,
  });
}

export const obtainRelease: DirectoryPart = {
  key: '1',
  name: '1. obtain+release',
  run: (floorExe) => uncontended(floorExe),
};

if (isMain(import.meta.url)) await runDirectoryBench([obtainRelease]);
