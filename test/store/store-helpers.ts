// Shared by the store tests: a recording logger, scratch lock tables, the kill -9 failover scenario. Not a test file.
import assert from 'node:assert/strict';
import { readdirSync, readlinkSync } from 'node:fs';
import { after } from 'node:test';
import type { StoreLogger } from '../../src/store/logger.js';
import { dropTable, type Kind, uniqueTable } from '../fixtures/db-servers.js';
import { type FixtureProcess, masterToken, spawnFixture } from '../fixtures/fixture-process.js';
import { eventually, sleep, tempDir } from '../helpers.js';

export interface RecordingLogger extends StoreLogger {
  lines: { level: 'info' | 'debug' | 'warn'; message: string }[];
  count(level: 'info' | 'debug' | 'warn'): number;
}

export function recordingLogger(): RecordingLogger {
  const lines: RecordingLogger['lines'] = [];
  return {
    lines,
    info: (message) => lines.push({ level: 'info', message }),
    debug: (message) => lines.push({ level: 'debug', message }),
    warn: (message) => lines.push({ level: 'warn', message }),
    count: (level) => lines.filter((l) => l.level === level).length,
  };
}

/** Lets pending promise callbacks and immediates run. */
export const settle = () => new Promise<void>((r) => setImmediate(r));

/** The descriptors of this process open on `path` (to play "an external force"). */
export function descriptorsOf(path: string): number[] {
  const fds: number[] = [];
  for (const entry of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${entry}`) === path) fds.push(Number(entry));
    } catch {
      // Closed meanwhile.
    }
  }
  return fds;
}

/** Whether a promise has settled yet (without waiting for it). */
export function tracked<T>(promise: Promise<T>): {
  promise: Promise<T>;
  readonly settled: boolean;
} {
  let settled = false;
  promise.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  return {
    promise,
    get settled() {
      return settled;
    },
  };
}

/**
 * The kill -9 failover scenario: fixture `name` with `args` is started twice; `a` becomes
 * master, `b` reports `waiting` and, after `standbyMs` more as a slave, is asserted not to be
 * master; then `a` is SIGKILLed. Resolves once `b` is master, with both tokens and the
 * failover time (from the kill to `b`'s master line, ms). The caller stops `b` and reaps `a`.
 */
export async function killMasterFailover(
  name: string,
  args: string[],
  standbyMs: number,
): Promise<{
  a: FixtureProcess;
  b: FixtureProcess;
  tokenA: number;
  tokenB: number;
  failover: number;
}> {
  const a = spawnFixture(name, args);
  await eventually(() => a.line(/^master \d+/) !== undefined, 10_000);
  const tokenA = masterToken(a);
  const b = spawnFixture(name, args);
  await eventually(() => b.line(/^waiting$/) !== undefined, 10_000);
  await sleep(standbyMs);
  assert.equal(b.line(/^master/), undefined);
  const t0 = performance.now();
  a.proc.kill('SIGKILL');
  await eventually(() => b.line(/^master \d+/) !== undefined, 10_000);
  const failover = performance.now() - t0;
  return { a, b, tokenA, tokenB: masterToken(b), failover };
}

/**
 * For a `describe` block: a temporary directory (for SQLite files) and `table(kind)`, which
 * hands out a unique lock-table name; after the block every table handed out is dropped and
 * the directory removed.
 */
export function scratchTables(): { dir: { path: string }; table: (kind: Kind) => string } {
  const dir = tempDir();
  const tables: [Kind, string][] = [];
  after(async () => {
    for (const [kind, t] of tables) await dropTable(kind, t);
    dir[Symbol.dispose]();
  });
  return {
    dir,
    table: (kind) => {
      const t = uniqueTable();
      tables.push([kind, t]);
      return t;
    },
  };
}
