/**
 * Directory locks, part 2: two-process handoff latency (release by close, and kill -9 of the
 * holder, next to the kernel's own floor: a C waiter blocked in F_OFD_SETLKW) and the CPU cost
 * of a waiting process over a 20 s wait (whole, one-time, steady state), against
 * proper-lockfile's retrying wait. `node dist-test/bench/directory-handoff.bench.js` (also
 * part 2 of `npm run bench:directory`, a script, never a test); the processes are
 * bench/handoff-child.ts.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type DirectoryPart, goals, runDirectoryBench, work } from './directory-support.js';
import {
  fmt,
  isMain,
  LineChild,
  percentile,
  repoRoot,
  say,
  sleep,
  table,
  timeKill,
} from './support.js';

const HANDOFF_ITERATIONS = 200;
const HANDOFF_WARMUP = 10;
const KILL_ITERATIONS = 100;
const KILL_WARMUP = 3;
const CPU_WINDOW_MS = 20_000;
/** The steady state is judged on the last seconds of the wait, after every one-time cost. */
const CPU_STEADY_SECONDS = 10;

const childScript = join(repoRoot, 'dist-test/bench/handoff-child.js');

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

export const handoffAndWaiterCpu: DirectoryPart = {
  key: '2',
  name: '2. handoff and waiter CPU',
  run: (floorExe) => handoff(floorExe),
};

if (isMain(import.meta.url)) await runDirectoryBench([handoffAndWaiterCpu]);
