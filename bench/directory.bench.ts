/**
 * Directory-lock benchmarks: `npm run bench:directory` (a script, never a test).
 *
 * 1. Uncontended obtain+release on a local directory: locksmith's NativeFS and SimpleFS
 *    factories against proper-lockfile, npm `lockfile`, and a C floor (bench/floor.c).
 * 2. Two-process handoff latency (release by close, and kill -9 of the holder, next to the
 *    kernel's own floor: a C waiter blocked in F_OFD_SETLKW) and the CPU cost of a waiting
 *    process over a 20 s wait (whole, one-time, steady state), against proper-lockfile's
 *    retrying wait.
 * 3. Stress throughput: `locksmith stress` + `locksmith verify-server` against Lucene's
 *    LockStressTest + LockVerifyServer (Java), same machine, same run.
 *
 * Prints Markdown tables (ratios included) and a goals table; docs/benchmarks.md records a run.
 * Missed goals are reported, not fatal: the exit code is non-zero only when something broke.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, release as kernelRelease, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import type * as Koffi from 'koffi';
import lockfile from 'lockfile';
import properLockfile from 'proper-lockfile';
import { Bench } from 'tinybench';
import { FSDirectory, NativeFSLockFactory, SimpleFSLockFactory } from '../src/directory/index.js';
import {
  fmt,
  LineChild,
  median,
  nowNs,
  percentile,
  ratio,
  repoRoot,
  sleep,
  table,
  timeKill,
  verdict,
} from './support.js';

const ROUNDS = 5;
/** Lock operations per timed sample, so the harness's own per-sample cost is amortised. */
const BATCH = 50;
const FLOOR_ITERATIONS = 100_000;
const HANDOFF_ITERATIONS = 200;
const HANDOFF_WARMUP = 10;
const KILL_ITERATIONS = 100;
const KILL_WARMUP = 3;
const CPU_WINDOW_MS = 20_000;
/** The steady state is judged on the last seconds of the wait, after every one-time cost. */
const CPU_STEADY_SECONDS = 10;
const STRESS_TRIES = 20_000;
const STRESS_RUNS = 5;

const childScript = join(repoRoot, 'dist-test/bench/handoff-child.js');
const cliPath = join(repoRoot, 'dist/cli/main.js');
const work = mkdtempSync(join(tmpdir(), 'locksmith-bench-'));

interface Goal {
  what: string;
  goal: string;
  measured: string;
  met: boolean | undefined;
}
const goals: Goal[] = [];

function say(text = ''): void {
  process.stdout.write(`${text}\n`);
}

function machine(): void {
  const fs = spawnSync('findmnt', ['-n', '-o', 'FSTYPE', '-T', work], { encoding: 'utf8' });
  const fsType = fs.status === 0 ? fs.stdout.trim() : 'unknown';
  say('# locksmith directory-lock benchmarks');
  say();
  say(`- node ${process.version}, ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown cpu'})`);
  say(`- kernel ${process.platform} ${kernelRelease()}, file system of ${tmpdir()}: ${fsType}`);
  const git = spawnSync('git', ['describe', '--always', '--dirty'], {
    cwd: repoRoot,
    encoding: 'utf8',
  });
  say(`- ${new Date().toISOString()}, commit ${git.status === 0 ? git.stdout.trim() : 'unknown'}`);
  say();
}

// ---------------------------------------------------------------------------------------------
// 1. Uncontended obtain+release
// ---------------------------------------------------------------------------------------------

/** Compiles bench/floor.c into bench/.build (git-ignored); undefined when no compiler works. */
function buildFloor(): string | undefined {
  const out = join(repoRoot, 'bench/.build');
  mkdirSync(out, { recursive: true });
  const exe = join(out, 'floor');
  const cc = spawnSync('cc', ['-O2', '-o', exe, join(repoRoot, 'bench/floor.c')], {
    encoding: 'utf8',
  });
  if (cc.error !== undefined || cc.status !== 0) {
    say(
      `floor: cannot compile bench/floor.c (${cc.error?.message ?? cc.stderr.trim()}); the floor is skipped`,
    );
    return undefined;
  }
  return exe;
}

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

// ---------------------------------------------------------------------------------------------
// 2. Handoff latency and waiter CPU
// ---------------------------------------------------------------------------------------------

/**
 * Retry schedule for proper-lockfile with the same bounds as acquireLock's fallback poll
 * (acquireLock backs off to 1 s once its release hints are live; 250 ms is its cap without
 * them). `forever` so that no wait here gives up (after 10,000 retries the `retry` package
 * starts the same schedule again). The retry count stays modest: the `retry` package
 * precomputes, sorts and copies one timeout per retry and shifts that array on every attempt,
 * so a count like 1e6 would make proper-lockfile itself slow (tens of ms per wait) and
 * unfairly so.
 */
const PL_BACKOFF = {
  retries: 10_000,
  forever: true,
  factor: 2,
  minTimeout: 2,
  maxTimeout: 250,
  randomize: true,
};
/** A tight fixed 1 ms poll: proper-lockfile's best latency, at a CPU price. */
const PL_1MS = { retries: 10_000, forever: true, factor: 1, minTimeout: 1, maxTimeout: 1 };

function child(role: string, path: string, options: object = {}): LineChild {
  return new LineChild(process.execPath, [childScript, role, path, JSON.stringify(options)], role);
}

/** A random pause so the release lands at an arbitrary point of the waiter's poll schedule. */
function randomPause(): Promise<void> {
  return sleep(5 + Math.random() * 45);
}

/** Release by close: µs from the holder's clock read before release to the waiter holding. */
async function handoffByRelease(
  tag: string,
  kind: 'native' | 'pl',
  retries?: object,
): Promise<number[]> {
  const path = join(work, `handoff-${tag}`);
  if (kind === 'native') mkdirSync(path, { recursive: true });
  else writeFileSync(path, '');
  const holder = child(`${kind}-holder`, path);
  const waiter = child(`${kind}-waiter`, path, { retries });
  try {
    await holder.expect('ready');
    await waiter.expect('ready');
    const latencies: number[] = [];
    for (let i = 0; i < HANDOFF_WARMUP + HANDOFF_ITERATIONS; i++) {
      holder.send('acquire');
      await holder.expect('held');
      waiter.send('wait');
      await waiter.expect('waiting');
      await randomPause();
      holder.send('release');
      const released = BigInt(await holder.expect('released'));
      const got = BigInt(await waiter.expect('got'));
      await waiter.expect('freed');
      if (i >= HANDOFF_WARMUP) latencies.push(Number(got - released) / 1000);
    }
    return latencies;
  } finally {
    await Promise.all([holder.close(), waiter.close()]);
  }
}

interface KillSample {
  /** µs from the parent's kill() to the waiter holding. */
  latency: number;
  /** µs from kill() to the parent seeing the holder exit (the kernel's teardown, roughly). */
  reaped: number;
}

type HolderKind = 'node' | 'c';
type WaiterKind = 'node' | 'c';

/** A waiter process that answers "wait" with "waiting", then "got <ns>" and "freed". */
function killWaiter(kind: WaiterKind, path: string, floorExe: string | undefined): LineChild {
  return kind === 'node'
    ? child('native-waiter', path)
    : new LineChild(floorExe ?? 'false', [join(path, 'write.lock'), 'wait'], 'C waiter');
}

/**
 * kill -9 of the holder, timed until a waiter holds. Holders: `node`, a locksmith holder
 * process (the measured case), or `c`, the C floor holding the same kernel lock, whose
 * teardown is nearly free. Waiters: `node`, locksmith's acquireLock, or `c`, the C floor
 * blocked in fcntl(F_OFD_SETLKW): the moment the kernel frees the lock. The waiters take
 * turns within each iteration (a fresh holder for every kill), so a slow phase of the machine
 * hits them alike.
 */
async function handoffByKill(
  holderKind: HolderKind,
  waiterKinds: readonly WaiterKind[],
  floorExe: string | undefined,
): Promise<Map<WaiterKind, KillSample[]>> {
  const path = join(work, `handoff-kill-${holderKind}`);
  mkdirSync(path, { recursive: true });
  const waiters = new Map(waiterKinds.map((k) => [k, killWaiter(k, path, floorExe)] as const));
  const samples = new Map<WaiterKind, KillSample[]>(waiterKinds.map((k) => [k, []]));
  try {
    for (const [kind, waiter] of waiters) {
      if (kind === 'node') await waiter.expect('ready');
    }
    for (let i = 0; i < KILL_WARMUP + KILL_ITERATIONS; i++) {
      for (const [kind, waiter] of waiters) {
        let holder: LineChild;
        if (holderKind === 'node') {
          holder = child('native-holder', path);
          await holder.expect('ready');
          holder.send('acquire');
        } else {
          holder = new LineChild(
            floorExe ?? 'false',
            [join(path, 'write.lock'), 'hold'],
            'C holder',
          );
        }
        try {
          await holder.expect('held');
          waiter.send('wait');
          await waiter.expect('waiting');
          await randomPause();
          const { free, reaped } = await timeKill(holder, waiter);
          if (i >= KILL_WARMUP) samples.get(kind)?.push({ latency: free, reaped });
        } finally {
          await holder.close();
        }
      }
    }
    return samples;
  } finally {
    await Promise.all([...waiters.values()].map((w) => w.close()));
  }
}

interface CpuReport {
  /** The waiter process's uptime (ms) when the wait began. */
  startMs: number;
  /** One `[wall µs, CPU µs]` pair per second of the wait. */
  seconds: [number, number][];
  /** `[uptime ms, duration ms]` of each major GC of the waiter's main thread. */
  majorGcs: [number, number][];
}

interface CpuFigures {
  wallUs: number;
  cpuUs: number;
  /** CPU beyond the steady rate over the whole wait: start-up costs, one-off GCs. */
  oneTimeUs: number;
  steadyWallUs: number;
  steadyCpuUs: number;
}

function cpuFigures(r: CpuReport): CpuFigures {
  const sum = (list: [number, number][], i: 0 | 1) => list.reduce((a, s) => a + s[i], 0);
  const steady = r.seconds.slice(-CPU_STEADY_SECONDS);
  const wallUs = sum(r.seconds, 0);
  const cpuUs = sum(r.seconds, 1);
  const steadyWallUs = sum(steady, 0);
  const steadyCpuUs = sum(steady, 1);
  return {
    wallUs,
    cpuUs,
    oneTimeUs: cpuUs - (steadyCpuUs / steadyWallUs) * wallUs,
    steadyWallUs,
    steadyCpuUs,
  };
}

/** A waiter in its own process waiting CPU_WINDOW_MS for a lock another process holds. */
async function waiterCpu(tag: string, kind: 'native' | 'pl', retries?: object): Promise<CpuReport> {
  const path = join(work, `cpu-${tag}`);
  if (kind === 'native') mkdirSync(path, { recursive: true });
  else writeFileSync(path, '');
  const holder = child(`${kind}-holder`, path);
  const waiter = child(`${kind}-cpu`, path, { retries, windowMs: CPU_WINDOW_MS });
  try {
    await holder.expect('ready');
    holder.send('acquire');
    await holder.expect('held');
    await waiter.expect('ready');
    waiter.send('wait');
    return JSON.parse(await waiter.expect('cpu', CPU_WINDOW_MS + 15_000)) as CpuReport;
  } finally {
    await Promise.all([holder.close(), waiter.close()]);
  }
}

async function handoff(floorExe: string | undefined): Promise<void> {
  say('## 2. Two-process handoff latency and waiter CPU');
  say();
  const rows: string[][] = [];
  const summarize = (name: string, how: string, us: number[], reaped?: number[]) => {
    const p50 = percentile(us, 50);
    const p99 = percentile(us, 99);
    rows.push([
      name,
      how,
      String(us.length),
      fmt(p50),
      fmt(p99),
      fmt(Math.max(...us)),
      reaped === undefined ? '' : fmt(percentile(reaped, 50)),
    ]);
    return { p50, p99 };
  };
  const OURS = 'locksmith acquireLock (NativeFS)';
  const KERNEL = 'kernel floor: C waiter in F_OFD_SETLKW';
  process.stderr.write('  handoff: locksmith, release by close\n');
  const ours = summarize(OURS, 'holder close()', await handoffByRelease('native', 'native'));
  process.stderr.write('  handoff: kill -9 of a Node holder\n');
  const nodeKills = await handoffByKill(
    'node',
    floorExe === undefined ? ['node'] : ['node', 'c'],
    floorExe,
  );
  const killsOf = (m: Map<WaiterKind, KillSample[]>, k: WaiterKind) => m.get(k) ?? [];
  const killSummary = (name: string, how: string, list: KillSample[]) =>
    summarize(
      name,
      how,
      list.map((k) => k.latency),
      list.map((k) => k.reaped),
    );
  const killed = killSummary(OURS, 'kill -9 of a Node holder', killsOf(nodeKills, 'node'));
  let kernel: { p50: number; p99: number } | undefined;
  if (floorExe !== undefined) {
    kernel = killSummary(KERNEL, 'kill -9 of a Node holder', killsOf(nodeKills, 'c'));
    process.stderr.write('  handoff: kill -9 of a C holder\n');
    const cKills = await handoffByKill('c', ['node', 'c'], floorExe);
    killSummary(OURS, 'kill -9 of a C holder (diagnostic)', killsOf(cKills, 'node'));
    killSummary(KERNEL, 'kill -9 of a C holder (diagnostic)', killsOf(cKills, 'c'));
  }
  process.stderr.write('  handoff: proper-lockfile\n');
  summarize(
    'proper-lockfile lock, retries 2→250 ms backoff',
    'holder release()',
    await handoffByRelease('pl-backoff', 'pl', PL_BACKOFF),
  );
  summarize(
    'proper-lockfile lock, retries every 1 ms',
    'holder release()',
    await handoffByRelease('pl-1ms', 'pl', PL_1MS),
  );
  say(
    table(['waiter', 'release by', 'n', 'p50 µs', 'p99 µs', 'max µs', 'kill→reaped p50 µs'], rows),
  );
  say();
  say('Latency: CLOCK_MONOTONIC read by the holder just before it releases (or by the parent just');
  say('before kill()), to the same clock read by the waiter once it holds; each release comes');
  say(
    `5–50 ms (random) after the wait started; ${HANDOFF_WARMUP} (kill: ${KILL_WARMUP}) warm-up handoffs dropped.`,
  );
  say('kill→reaped: from kill() to the parent seeing the holder exit; the kernel frees the lock');
  say('while it tears the process down, before that exit is reported. For each holder kind the');
  say('two waiters take turns, a fresh holder per kill.');
  say();
  if (kernel !== undefined) {
    say(
      table(
        ['kill -9 of a Node holder', 'p50 µs', 'p99 µs'],
        [
          [OURS, fmt(killed.p50), fmt(killed.p99)],
          [KERNEL, fmt(kernel.p50), fmt(kernel.p99)],
          [
            'ours − kernel floor (the waiter’s share)',
            fmt(killed.p50 - kernel.p50),
            fmt(killed.p99 - kernel.p99),
          ],
        ],
      ),
    );
    say();
  }
  goals.push({
    what: 'handoff after close(), p50 / p99',
    goal: '≤ 1 ms / ≤ 10 ms',
    measured: `${fmt(ours.p50)} µs / ${fmt(ours.p99)} µs`,
    met: ours.p50 <= 1000 && ours.p99 <= 10_000,
  });
  goals.push({
    what: 'handoff after kill -9, p50 / p99',
    goal: '≤ 1 ms / ≤ 10 ms',
    measured:
      `${fmt(killed.p50)} µs / ${fmt(killed.p99)} µs` +
      (kernel === undefined ? '' : ` (kernel floor ${fmt(kernel.p50)} / ${fmt(kernel.p99)} µs)`),
    met: killed.p50 <= 1000 && killed.p99 <= 10_000,
  });

  process.stderr.write(`  waiter CPU: ${CPU_WINDOW_MS} ms waits\n`);
  const pct = (cpu: number, wall: number) => (100 * cpu) / wall;
  const ourCpu = await waiterCpu('native', 'native');
  const [plBackoffCpu, pl1msCpu] = await Promise.all([
    waiterCpu('pl-backoff', 'pl', PL_BACKOFF),
    waiterCpu('pl-1ms', 'pl', PL_1MS),
  ]);
  const reports = [
    ['locksmith acquireLock (NativeFS)', ourCpu],
    ['proper-lockfile, retries 2→250 ms backoff', plBackoffCpu],
    ['proper-lockfile, retries every 1 ms', pl1msCpu],
  ] as const;
  say(
    table(
      [
        'waiter',
        'wait s',
        'CPU ms',
        'whole wait, % of one core',
        'one-time ms',
        `steady (last ${CPU_STEADY_SECONDS} s), % of one core`,
      ],
      reports.map(([name, r]) => {
        const f = cpuFigures(r);
        return [
          name,
          fmt(f.wallUs / 1e6),
          fmt(f.cpuUs / 1000),
          `${fmt(pct(f.cpuUs, f.wallUs))} %`,
          fmt(f.oneTimeUs / 1000),
          `${fmt(pct(f.steadyCpuUs, f.steadyWallUs))} %`,
        ];
      }),
    ),
  );
  say();
  say(
    table(
      [
        'waiter',
        'wait began at uptime s',
        'CPU ms in each second of the wait',
        'major GCs at uptime s',
      ],
      reports.map(([name, r]) => [
        name,
        fmt(r.startMs / 1000, 2),
        r.seconds.map((s) => fmt(s[1] / 1000, 2)).join(' '),
        r.majorGcs.map(([at]) => fmt(at / 1000, 2)).join(' '),
      ]),
    ),
  );
  say();
  say('CPU: process.cpuUsage() (all threads of the process) inside the waiter, sampled every');
  say('second from the start of the wait, so process startup is excluded. One-time: the CPU of');
  say('the whole wait beyond the steady rate. The proper-lockfile waiters ran side by side.');
  say('Major GCs: PerformanceObserver in the waiter (main thread only), from process start.');
  say();
  const f = cpuFigures(ourCpu);
  const steadyPct = pct(f.steadyCpuUs, f.steadyWallUs);
  goals.push({
    what: 'CPU of a waiting process (steady state)',
    goal: '< 1 % of one core',
    measured: `${fmt(steadyPct)} % (whole ${fmt(f.wallUs / 1e6)} s wait: ${fmt(pct(f.cpuUs, f.wallUs))} %, one-time ${fmt(f.oneTimeUs / 1000)} ms)`,
    met: steadyPct < 1,
  });
}

// ---------------------------------------------------------------------------------------------
// 3. Stress throughput against Lucene
// ---------------------------------------------------------------------------------------------

class Skip extends Error {}

interface StressResult {
  wallMs: number;
  fromGunMs: number | undefined;
}

/** Lucene's core jar: $LUCENE_CORE_JAR, else Debian's liblucene8-java location. */
function luceneJar(): string | undefined {
  const fromEnv = process.env.LUCENE_CORE_JAR;
  if (fromEnv !== undefined && existsSync(fromEnv)) return fromEnv;
  const dir = '/usr/share/java';
  if (existsSync(join(dir, 'lucene-core.jar'))) return join(dir, 'lucene-core.jar');
  if (!existsSync(dir)) return undefined;
  const versioned = readdirSync(dir)
    .filter((f) => /^lucene-core-\d[\d.]*\.jar$/.test(f))
    .sort();
  const last = versioned.at(-1);
  return last === undefined ? undefined : join(dir, last);
}

function exited(p: ChildProcess): Promise<number | null> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve(p.exitCode);
  return new Promise((r) => p.once('exit', (code) => r(code)));
}

function collect(p: ChildProcess): () => string {
  let text = '';
  const add = (d: Buffer) => {
    text = (text + d.toString()).slice(-4000);
  };
  p.stdout?.on('data', add);
  p.stderr?.on('data', add);
  return () => text;
}

/**
 * One stress run: a verify server for 2 clients, then 2 stress clients started together.
 * Wall time runs from spawning the clients to both exiting (runtime startup included);
 * `fromGunMs` from the server's "fire gun" line (all clients registered) to both exiting.
 */
async function stressRun(
  server: string[],
  client: (id: number, port: number, dir: string) => string[],
  tag: string,
): Promise<StressResult> {
  const dir = join(work, `stress-${tag}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const [serverCmd = '', ...serverArgs] = server;
  const srv = spawn(serverCmd, serverArgs, { stdio: ['ignore', 'pipe', 'pipe'] });
  const serverOutput = collect(srv);
  try {
    let gun: bigint | undefined;
    const port = await new Promise<number>((resolvePort, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no "Listening" line: ${serverOutput()}`)),
        20_000,
      );
      srv.once('error', (err) => {
        clearTimeout(timer);
        reject(new Skip(`cannot start ${serverCmd}: ${err.message}`));
      });
      srv.once('exit', () => {
        clearTimeout(timer);
        const out = serverOutput();
        reject(
          /not implemented/i.test(out)
            ? new Skip('stress CLI not available')
            : new Error(`server exited: ${out}`),
        );
      });
      createInterface({ input: srv.stdout }).on('line', (line) => {
        const m = /Listening on .*:(\d+)/.exec(line);
        if (m?.[1] !== undefined) {
          clearTimeout(timer);
          resolvePort(Number(m[1]));
        }
        if (/fire gun/i.test(line)) gun ??= nowNs();
      });
    });
    const start = nowNs();
    const clients = [1, 2].map((id) => {
      const [cmd = '', ...args] = client(id, port, dir);
      const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      return { p, output: collect(p) };
    });
    const codes = await Promise.all(clients.map((c) => exited(c.p)));
    const end = nowNs();
    for (const [i, code] of codes.entries()) {
      if (code === 0) continue;
      const out = clients[i]?.output() ?? '';
      throw /not implemented/i.test(out)
        ? new Skip('stress CLI not available')
        : new Error(`client ${i + 1} exited ${code}: ${out}`);
    }
    const serverCode = await Promise.race([
      exited(srv),
      sleep(10_000).then(() => 'timeout' as const),
    ]);
    if (serverCode !== 0)
      throw new Error(`verify server ended with ${serverCode}: ${serverOutput()}`);
    return {
      wallMs: Number(end - start) / 1e6,
      fromGunMs: gun === undefined ? undefined : Number(end - gun) / 1e6,
    };
  } finally {
    if (srv.exitCode === null && srv.signalCode === null) srv.kill('SIGKILL');
  }
}

async function stress(): Promise<void> {
  say(`## 3. Stress: 2 processes × ${STRESS_TRIES} tries, sleep 0, with the verify server`);
  say();
  // Both sides take Lucene's command lines: server `<host> <clients>`, client `<id> <host>
  // <port> <factory> <dir> <sleep ms> <tries>`.
  const serverArgs = ['127.0.0.1', '2'];
  const factory = 'org.apache.lucene.store.NativeFSLockFactory';
  const clientArgs = (id: number, port: number, dir: string) => [
    String(id),
    '127.0.0.1',
    String(port),
    factory,
    dir,
    '0',
    String(STRESS_TRIES),
  ];
  const ourServer = [process.execPath, cliPath, 'verify-server', ...serverArgs];
  const ourClient = (id: number, port: number, dir: string) => [
    process.execPath,
    cliPath,
    'stress',
    ...clientArgs(id, port, dir),
  ];
  const jar = luceneJar();
  const java = spawnSync('java', ['-version'], { encoding: 'utf8' });
  let javaSkip: string | undefined;
  if (java.error !== undefined || java.status !== 0) javaSkip = 'skipped: java not found';
  else if (jar === undefined) javaSkip = 'skipped: lucene-core jar not found (set LUCENE_CORE_JAR)';
  const javaServer = [
    'java',
    '-cp',
    jar ?? '',
    'org.apache.lucene.store.LockVerifyServer',
    ...serverArgs,
  ];
  const javaClient = (id: number, port: number, dir: string) => [
    'java',
    '-cp',
    jar ?? '',
    'org.apache.lucene.store.LockStressTest',
    ...clientArgs(id, port, dir),
  ];

  const runs: { ours: StressResult[]; java: StressResult[] } = { ours: [], java: [] };
  let ourSkip: string | undefined;
  for (let i = 0; i < STRESS_RUNS; i++) {
    if (javaSkip === undefined) {
      process.stderr.write(`  stress: Lucene run ${i + 1}/${STRESS_RUNS}\n`);
      try {
        runs.java.push(await stressRun(javaServer, javaClient, `java-${i}`));
      } catch (err) {
        if (!(err instanceof Skip)) throw err;
        javaSkip = `skipped: ${err.message}`;
      }
    }
    if (ourSkip === undefined) {
      process.stderr.write(`  stress: locksmith run ${i + 1}/${STRESS_RUNS}\n`);
      try {
        runs.ours.push(await stressRun(ourServer, ourClient, `ours-${i}`));
      } catch (err) {
        if (!(err instanceof Skip)) throw err;
        ourSkip = `skipped: ${err.message}`;
      }
    }
  }
  const totalTries = 2 * STRESS_TRIES;
  const row = (name: string, list: StressResult[], skip: string | undefined) => {
    if (skip !== undefined || list.length === 0) return [name, skip ?? 'skipped', '', '', '', ''];
    const wall = median(list.map((r) => r.wallMs));
    const guns = list.flatMap((r) => (r.fromGunMs === undefined ? [] : [r.fromGunMs]));
    const gun = guns.length > 0 ? median(guns) : undefined;
    return [
      name,
      fmt(wall / 1000),
      fmt(totalTries / (wall / 1000)),
      gun === undefined ? 'n/a' : fmt(gun / 1000),
      gun === undefined ? 'n/a' : fmt(totalTries / (gun / 1000)),
      list.map((r) => fmt(r.wallMs / 1000)).join(' '),
    ];
  };
  say(
    table(
      ['implementation', 'wall s', 'tries/s', 'from gun s', 'tries/s from gun', 'runs (wall s)'],
      [
        row('locksmith stress + verify-server (Node)', runs.ours, ourSkip),
        row('Lucene 8.7 LockStressTest + LockVerifyServer (Java)', runs.java, javaSkip),
      ],
    ),
  );
  say();
  say(
    `Median of ${STRESS_RUNS} alternating runs. Wall: spawning both clients to both exiting (runtime start`,
  );
  say('included). From gun: the server printing "fire gun" (both registered) to both exiting.');
  say();
  if (
    ourSkip !== undefined ||
    javaSkip !== undefined ||
    runs.ours.length === 0 ||
    runs.java.length === 0
  ) {
    goals.push({
      what: 'stress tries/s vs Lucene',
      goal: 'ours ≥ Lucene',
      measured: ourSkip ?? javaSkip ?? 'skipped',
      met: undefined,
    });
    return;
  }
  const ourWall = median(runs.ours.map((r) => r.wallMs));
  const javaWall = median(runs.java.map((r) => r.wallMs));
  goals.push({
    what: 'stress tries/s vs Lucene (wall)',
    goal: 'ours ≥ Lucene',
    measured: `${ratio(javaWall / ourWall)} Lucene's (${fmt(totalTries / (ourWall / 1000))} vs ${fmt(totalTries / (javaWall / 1000))} tries/s)`,
    met: ourWall <= javaWall,
  });
}

// ---------------------------------------------------------------------------------------------

/** All CPUs' time in clock ticks (/proc/stat): total, and the part stolen by a hypervisor. */
function cpuTicks(): { total: number; steal: number } | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
    const fields = line.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal (guest time is already in user)
    const total = fields.slice(0, 8).reduce((a, b) => a + b, 0);
    return line.startsWith('cpu ') ? { total, steal: fields[7] ?? 0 } : undefined;
  } catch {
    return undefined;
  }
}

/** Which parts to run: `node dist-test/bench/directory.bench.js [1] [2] [3]` (default: all). */
function partsToRun(): Set<string> {
  const chosen = process.argv.slice(2).filter((a) => ['1', '2', '3'].includes(a));
  return new Set(chosen.length > 0 ? chosen : ['1', '2', '3']);
}

async function main(): Promise<void> {
  const parts = partsToRun();
  machine();
  try {
    const floorExe = buildFloor();
    const steal: string[][] = [];
    const part = async (name: string, run: () => Promise<void>) => {
      const before = cpuTicks();
      await run();
      const after = cpuTicks();
      if (before !== undefined && after !== undefined) {
        const total = after.total - before.total;
        steal.push([name, `${fmt((100 * (after.steal - before.steal)) / total)} %`]);
      }
    };
    if (parts.has('1')) await part('1. obtain+release', () => uncontended(floorExe));
    if (parts.has('2')) await part('2. handoff and waiter CPU', () => handoff(floorExe));
    if (parts.has('3')) await part('3. stress', () => stress());
    if (steal.length > 0) {
      say('## Noise: CPU time stolen by the hypervisor');
      say();
      say(table(['part', 'steal, % of all CPU time'], steal));
      say();
      say('From /proc/stat (all CPUs): time the virtual CPUs were ready to run but not running.');
      say();
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  say('## Goals');
  say();
  say(
    table(
      ['goal', 'target', 'measured', 'verdict'],
      goals.map((g) => [
        g.what,
        g.goal,
        g.measured,
        g.met === undefined ? 'skipped' : verdict(g.met),
      ]),
    ),
  );
}

await main();
