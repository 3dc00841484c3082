/**
 * Why the kernel frees the lock of a kill -9'd Node process late: a diagnostic for
 * docs/benchmarks.md, not part of `npm run bench:directory`. Linux only; run after a build.
 *
 *   node dist-test/bench/kill-trace.js series [kills]   # any user
 *   node dist-test/bench/kill-trace.js trace [node|<MiB>] # root: kernel trace events
 *
 * `series`: the kernel floor of a kill -9 handoff (bench/floor.c waiting in F_OFD_SETLKW, as in
 * part 2 of the benchmark) for C holders that first touch 0 to 128 MiB of memory, and for a
 * locksmith Node holder, `kills` times each (default 30), interleaved. Prints p50/p90 of
 * kill → lock free and the holders' memory, to show that the delay grows with the address
 * space the kernel has to tear down.
 *
 * `trace`: one kill of a Node holder (or of a C holder with `<MiB>` touched) under kernel
 * trace events (tracefs, mounted on /sys/kernel/tracing if it is not), printed as a timeline
 * in µs after kill(): the threads exiting, the mmap lock taken by `exit_mmap`, the RSS
 * counter updates while pages are unmapped, the OFD lock removed when the files are closed,
 * and the waiter's F_OFD_SETLKW succeeding.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fmt, LineChild, nowNs, percentile, repoRoot, sleep, table, timeKill } from './support.js';

const floorExe = join(repoRoot, 'bench/.build/floor');
const childScript = join(repoRoot, 'dist-test/bench/handoff-child.js');
const work = mkdtempSync(join(tmpdir(), 'locksmith-kill-trace-'));

function say(text = ''): void {
  process.stdout.write(`${text}\n`);
}

function buildFloor(): void {
  mkdirSync(join(repoRoot, 'bench/.build'), { recursive: true });
  const cc = spawnSync('cc', ['-O2', '-o', floorExe, join(repoRoot, 'bench/floor.c')], {
    encoding: 'utf8',
  });
  if (cc.status !== 0) throw new Error(`cannot compile bench/floor.c: ${cc.stderr}`);
}

/** `node` for a locksmith holder, else the MiB a C holder touches first. */
type Holder = 'node' | number;

async function startHolder(holder: Holder, lockDir: string): Promise<LineChild> {
  if (holder === 'node') {
    const child = new LineChild(
      process.execPath,
      [childScript, 'native-holder', lockDir, '{}'],
      'Node holder',
    );
    await child.expect('ready');
    child.send('acquire');
    await child.expect('held');
    return child;
  }
  const child = new LineChild(
    floorExe,
    [join(lockDir, 'write.lock'), 'hold', String(holder)],
    'C holder',
  );
  await child.expect('held');
  return child;
}

function memoryOf(pid: number | undefined): string {
  if (pid === undefined) return '';
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(status)?.[1]);
  return `RSS ${fmt(kb('VmRSS') / 1024)} MiB (anon ${fmt(kb('RssAnon') / 1024)}), page tables ${fmt(kb('VmPTE'))} KiB, ${kb('Threads')} threads`;
}

/** One kill: µs from kill() to the C waiter holding, and to the parent seeing the exit. */
async function killOnce(
  holder: Holder,
  lockDir: string,
  waiter: LineChild,
  beforeKill?: () => void,
): Promise<{ free: number; reaped: number; memory: string }> {
  const h = await startHolder(holder, lockDir);
  try {
    waiter.send('wait');
    await waiter.expect('waiting');
    await sleep(5 + Math.random() * 45);
    const memory = memoryOf(h.child.pid);
    beforeKill?.();
    return { ...(await timeKill(h, waiter)), memory };
  } finally {
    await h.close();
  }
}

async function series(kills: number): Promise<void> {
  const holders: Holder[] = [0, 16, 32, 64, 128, 'node'];
  const lockDir = join(work, 'series');
  mkdirSync(lockDir, { recursive: true });
  const waiter = new LineChild(floorExe, [join(lockDir, 'write.lock'), 'wait'], 'C waiter');
  const results = new Map<Holder, { free: number[]; reaped: number[]; memory: string }>();
  try {
    for (let i = 0; i < kills + 2; i++) {
      for (const holder of holders) {
        const r = await killOnce(holder, lockDir, waiter);
        if (i < 2) continue; // warm-up
        const entry = results.get(holder) ?? { free: [], reaped: [], memory: r.memory };
        entry.free.push(r.free);
        entry.reaped.push(r.reaped);
        results.set(holder, entry);
      }
    }
  } finally {
    await waiter.close();
  }
  say(
    table(
      ['holder', 'n', 'kill→lock free p50 µs', 'p90 µs', 'kill→reaped p50 µs', 'holder memory'],
      holders.map((holder) => {
        const r = results.get(holder);
        return [
          holder === 'node' ? 'locksmith Node holder' : `C holder, ${holder} MiB touched`,
          String(r?.free.length ?? 0),
          fmt(percentile(r?.free ?? [Number.NaN], 50)),
          fmt(percentile(r?.free ?? [Number.NaN], 90)),
          fmt(percentile(r?.reaped ?? [Number.NaN], 50)),
          r?.memory ?? '',
        ];
      }),
    ),
  );
}

const TRACEFS = '/sys/kernel/tracing';
const EVENTS = [
  'signal/signal_generate',
  'sched/sched_process_exit',
  'mmap_lock/mmap_lock_start_locking',
  'mmap_lock/mmap_lock_released',
  'kmem/rss_stat',
  'filelock/locks_remove_posix',
  'filelock/fcntl_setlk',
];

async function trace(holder: Holder): Promise<void> {
  const mounted = !existsSync(join(TRACEFS, 'trace'));
  if (mounted) {
    const mount = spawnSync('mount', ['-t', 'tracefs', 'nodev', TRACEFS], { encoding: 'utf8' });
    if (mount.status !== 0) throw new Error(`cannot mount tracefs: ${mount.stderr.trim()}`);
  }
  const set = (file: string, value: string) => writeFileSync(join(TRACEFS, file), value);
  const get = (file: string) => readFileSync(join(TRACEFS, file), 'utf8');
  // Restored afterwards: the tracing settings are global to the kernel.
  const saved = {
    clock: /\[(\S+)\]/.exec(get('trace_clock'))?.[1] ?? 'local',
    tgid: get('options/record-tgid').trim(),
    on: get('tracing_on').trim(),
  };
  const lockDir = join(work, 'trace');
  mkdirSync(lockDir, { recursive: true });
  const waiter = new LineChild(floorExe, [join(lockDir, 'write.lock'), 'wait'], 'C waiter');
  let holderPid = 0;
  let killedAt = 0;
  let result: { free: number; reaped: number; memory: string };
  try {
    // One untraced kill first, so the waiter and the page cache are warm.
    await killOnce(holder, lockDir, waiter);
    set('trace_clock', 'mono'); // CLOCK_MONOTONIC, like process.hrtime.bigint()
    set('options/record-tgid', '1');
    set('trace', '');
    for (const e of EVENTS) set(`events/${e}/enable`, '1');
    set('tracing_on', '1'); // events before the kill are dropped below
    result = await killOnce(holder, lockDir, waiter, () => {
      killedAt = Number(nowNs()) / 1e9;
    });
    set('tracing_on', '0');
  } finally {
    for (const e of EVENTS) set(`events/${e}/enable`, '0');
    await waiter.close();
  }
  const lines = get('trace').split('\n');
  set('trace', '');
  set('trace_clock', saved.clock);
  set('options/record-tgid', saved.tgid);
  set('tracing_on', saved.on);
  if (mounted) spawnSync('umount', [TRACEFS]);
  const killLine = lines.find((l) => /signal_generate: sig=9 /.test(l));
  holderPid = Number(/ pid=(\d+) /.exec(killLine ?? '')?.[1]);
  say(`holder: ${holder === 'node' ? 'locksmith Node holder' : `C, ${holder} MiB`}`);
  say(`holder memory at the kill: ${result.memory}`);
  say(
    `µs after kill(): C waiter holds at ${fmt(result.free)}, parent sees the exit at ${fmt(result.reaped)}`,
  );
  say();
  let rss = { n: 0, first: '', last: '' };
  for (const line of lines) {
    const m = /^\s*(.*?)\s+\(\s*(\d+|-+)\)\s+\[\d+\]\s+\S+\s+([\d.]+): (\S+): (.*)$/.exec(line);
    if (m === null) continue;
    const [, task = '', tgid = '', ts = '', event = '', rest = ''] = m;
    const us = (Number(ts) - killedAt) * 1e6;
    if (us < 0) continue; // the holder starting up
    const at = fmt(us);
    const ofHolder = Number(tgid) === holderPid;
    if (event === 'rss_stat') {
      if (!ofHolder) continue;
      rss = { n: rss.n + 1, first: rss.first || at, last: at };
      continue;
    }
    if (!ofHolder && event !== 'fcntl_setlk' && !(event === 'signal_generate' && line === killLine))
      continue;
    if (event === 'fcntl_setlk' && ofHolder) continue;
    say(`${at.padStart(7)}  ${task.padEnd(20)} ${event} ${rest.slice(0, 72)}`);
  }
  say();
  say(
    `rss_stat (the holder's RSS counters changing as pages are unmapped): ${rss.n} events, from ${rss.first} to ${rss.last} µs`,
  );
}

try {
  const [mode = 'series', arg] = process.argv.slice(2);
  buildFloor();
  if (mode === 'trace') await trace(arg === undefined || arg === 'node' ? 'node' : Number(arg));
  else await series(arg === undefined ? 30 : Number(arg));
} finally {
  rmSync(work, { recursive: true, force: true });
}
