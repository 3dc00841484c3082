/**
 * What every directory-lock benchmark shares: the scratch directory, the C floor program
 * (bench/floor.c), the goals table, the machine header, and `runDirectoryBench`, which runs a
 * list of parts with the header, the steal per part and the goals around them. One run of
 * `directory.bench.js` is one call.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, release as kernelRelease, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fmt, repoRoot, say, sayTable, verdict } from './support.js';

/** Scratch directory of the run; removed at the end. */
export const work = mkdtempSync(join(tmpdir(), 'locksmith-bench-'));

/** One line of the goals table; `met` undefined when the measurement was skipped. */
export interface Goal {
  what: string;
  goal: string;
  measured: string;
  met: boolean | undefined;
}
/** Filled by the parts, printed at the end of the run. */
export const goals: Goal[] = [];

/** One part of the directory benchmarks, chosen on the command line by its key. */
export interface DirectoryPart {
  key: '1' | '2' | '3';
  /** Its row in the steal table. */
  name: string;
  /** `floorExe`: the compiled bench/floor.c, undefined when no compiler worked. */
  run(floorExe: string | undefined): Promise<void>;
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

/**
 * Runs the `parts` the command line names (`1`, `2`, `3`; all of them without any), in their
 * order, then the steal table and the goals. Missed goals are reported, not fatal.
 */
export async function runDirectoryBench(parts: readonly DirectoryPart[]): Promise<void> {
  const chosen = partsToRun();
  machine();
  try {
    const floorExe = buildFloor();
    const steal: string[][] = [];
    for (const part of parts) {
      if (!chosen.has(part.key)) continue;
      const before = cpuTicks();
      await part.run(floorExe);
      const after = cpuTicks();
      if (before !== undefined && after !== undefined) {
        const total = after.total - before.total;
        steal.push([part.name, `${fmt((100 * (after.steal - before.steal)) / total)} %`]);
      }
    }
    if (steal.length > 0) {
      sayTable(
        '## Noise: CPU time stolen by the hypervisor',
        ['part', 'steal, % of all CPU time'],
        steal,
      );
      say();
      say('From /proc/stat (all CPUs): time the virtual CPUs were ready to run but not running.');
      say();
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  sayTable(
    '## Goals',
    ['goal', 'target', 'measured', 'verdict'],
    goals.map((g) => [
      g.what,
      g.goal,
      g.measured,
      g.met === undefined ? 'skipped' : verdict(g.met),
    ]),
  );
}
