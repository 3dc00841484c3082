/**
 * What every store benchmark shares: the databases, the lock tables a run creates (and drops),
 * the machine header, the steal and load record per part, and `runStoreBench`, which runs a
 * list of sections with all of that around them. One run of `store.bench.js` is one call.
 */

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, release as kernelRelease, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { killAll, removeSnapshot, takeSnapshot } from './store-contender.js';
import type { FailoverRow } from './store-failover.bench.js';
import { fmt, repoRoot, say, sayTable } from './support.js';

export const POSTGRES_URL =
  process.env.LOCKSMITH_TEST_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432/test';
export const MYSQL_URL = process.env.LOCKSMITH_TEST_MYSQL ?? 'mysql://root@127.0.0.1:3306/test';

/** Scratch directory of the run (file lockers, SQLite databases); removed at the end. */
export const work = mkdtempSync(join(tmpdir(), 'locksmith-store-bench-'));
/** Part of every lock table's name, so that concurrent runs never share a table. */
export const runId = randomBytes(4).toString('hex').toUpperCase();
let tableCount = 0;
const tables: { db: 'postgres' | 'mysql'; name: string }[] = [];

export type DbKind = 'file' | 'sqlite' | 'postgres' | 'mysql';

export function progress(text: string): void {
  process.stderr.write(`  ${text}\n`);
}

/** A fresh lock table name, remembered so that it is dropped at the end. */
export function newTable(db: DbKind): string {
  const name = `LOCK_BENCH_${runId}_${++tableCount}`;
  if (db === 'postgres' || db === 'mysql') tables.push({ db, name });
  return name;
}

/** Milliseconds, switching to seconds from 10 s on. */
export function ms(value: number): string {
  return value >= 10_000 ? `${(value / 1000).toFixed(2)} s` : `${fmt(value)} ms`;
}

/** Seconds, two decimals. */
export function sec(value: number): string {
  return `${(value / 1000).toFixed(2)} s`;
}

/** `/proc/stat` totals: [steal, all] jiffies; undefined off Linux. */
function cpuTimes(): [number, number] | undefined {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]?.trim().split(/\s+/).slice(1);
    if (fields === undefined) return undefined;
    const n = fields.map(Number);
    return [n[7] ?? 0, n.reduce((a, b) => a + b, 0)];
  } catch {
    return undefined;
  }
}

interface Load {
  part: string;
  steal: string;
  load: string;
}
const loads: Load[] = [];

/** Runs one part, recording the hypervisor's steal and the load averages around it. */
export async function part(name: string, body: () => Promise<void>): Promise<void> {
  const before = cpuTimes();
  const loadBefore = loadavg()[0] ?? 0;
  await body();
  const after = cpuTimes();
  const steal =
    before !== undefined && after !== undefined && after[1] > before[1]
      ? `${fmt((100 * (after[0] - before[0])) / (after[1] - before[1]))} %`
      : 'n/a';
  loads.push({
    part: name,
    steal,
    load: `${loadBefore.toFixed(2)} → ${(loadavg()[0] ?? 0).toFixed(2)}`,
  });
}

async function machine(): Promise<void> {
  say('# locksmith store-locker benchmarks');
  say();
  say(`- node ${process.version}, ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown cpu'}),`);
  say(`  ${(totalmem() / 2 ** 30).toFixed(0)} GiB, kernel ${kernelRelease()}`);
  const versions: string[] = [];
  try {
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    try {
      const r = await client.query(
        "SELECT current_setting('server_version') AS v, current_setting('synchronous_commit') AS s, current_setting('fsync') AS f",
      );
      const row = r.rows[0] as { v: string; s: string; f: string };
      versions.push(`PostgreSQL ${row.v} (synchronous_commit ${row.s}, fsync ${row.f})`);
    } finally {
      await client.end();
    }
  } catch (err) {
    versions.push(`PostgreSQL unreachable (${String(err)})`);
  }
  try {
    const conn = await mysql.createConnection({ uri: MYSQL_URL });
    try {
      const [rows] = await conn.query(
        'SELECT VERSION() AS v, @@innodb_flush_log_at_trx_commit AS f, @@innodb_lock_wait_timeout AS w',
      );
      const row = (rows as { v: string; f: number; w: number }[])[0];
      versions.push(
        `MariaDB/MySQL ${row?.v} (innodb_flush_log_at_trx_commit ${row?.f}, innodb_lock_wait_timeout ${row?.w} s)`,
      );
    } finally {
      await conn.end();
    }
  } catch (err) {
    versions.push(`MariaDB/MySQL unreachable (${String(err)})`);
  }
  const memory = new Database(':memory:');
  const sqliteVersion = memory.prepare('SELECT sqlite_version()').pluck().get() as string;
  memory.close();
  versions.push(`SQLite ${sqliteVersion} (better-sqlite3, default rollback journal)`);
  for (const v of versions) say(`- ${v}`);
  const git = spawnSync('git', ['describe', '--always', '--dirty'], {
    cwd: repoRoot,
    encoding: 'utf8',
  });
  say(`- ${new Date().toISOString()}, commit ${git.status === 0 ? git.stdout.trim() : 'unknown'}`);
  const [l1, l5, l15] = loadavg();
  say(
    `- load average at start ${l1?.toFixed(2)} / ${l5?.toFixed(2)} / ${l15?.toFixed(2)} (1 / 5 / 15 min)`,
  );
  say();
}

async function dropTables(): Promise<void> {
  const pgTables = tables.filter((t) => t.db === 'postgres');
  const myTables = tables.filter((t) => t.db === 'mysql');
  if (pgTables.length > 0) {
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    try {
      for (const t of pgTables) await client.query(`DROP TABLE IF EXISTS ${t.name}`);
    } finally {
      await client.end();
    }
  }
  if (myTables.length > 0) {
    const conn = await mysql.createConnection({ uri: MYSQL_URL });
    try {
      for (const t of myTables) await conn.query(`DROP TABLE IF EXISTS ${t.name}`);
    } finally {
      await conn.end();
    }
  }
}

async function cleanup(): Promise<void> {
  await killAll();
  try {
    await dropTables();
  } catch (err) {
    process.stderr.write(`dropping the bench tables failed: ${String(err)}\n`);
  }
  rmSync(work, { recursive: true, force: true });
  removeSnapshot();
}

/** What the failover sections measured, for the sections after them (the model's comparison). */
export interface StoreResults {
  fast: FailoverRow[];
  default: FailoverRow[];
}

/** One part of the store benchmarks, chosen on the command line by its name. */
export interface StoreSection {
  name: 'fast' | 'default' | 'model' | 'micro';
  run(results: StoreResults): Promise<void>;
}

/**
 * Runs the `sections` the command line names (all of them without arguments), in their order,
 * between the machine header and the noise table; cleans up at the end, after an error or on
 * Ctrl-C. Failures set the exit code to 1.
 */
export async function runStoreBench(sections: readonly StoreSection[]): Promise<void> {
  let interrupted = false;
  process.on('SIGINT', () => {
    if (interrupted) return;
    interrupted = true;
    process.stderr.write('interrupted: killing the children and dropping the tables\n');
    const exit = () => process.exit(130);
    cleanup().then(exit, exit);
  });
  try {
    const args = process.argv.slice(2);
    const wanted = (p: string) => args.length === 0 || args.includes(p);
    const started = performance.now();
    takeSnapshot();
    await machine();
    // Printed whatever parts run: the round trips' heading is numbered after it.
    say('## 1. Failover');
    say();
    const results: StoreResults = { fast: [], default: [] };
    for (const section of sections) {
      if (wanted(section.name)) await section.run(results);
    }
    sayTable(
      '## Noise',
      ['part', 'steal, % of all CPU time', 'load average (1 min) before → after'],
      loads.map((l) => [l.part, l.steal, l.load]),
    );
    say();
    say(`Total time: ${fmt((performance.now() - started) / 1000)} s`);
  } catch (err) {
    process.stderr.write(
      `store benchmark failed: ${err instanceof Error ? err.stack : String(err)}\n`,
    );
    process.exitCode = 1;
  } finally {
    await cleanup();
  }
}
