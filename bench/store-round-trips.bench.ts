/**
 * Store round trips: `node dist-test/bench/store-round-trips.bench.js` (also part of
 * `npm run bench:store`, a script, never a test). The lease locker's acquire, renew
 * (keepAlive), release and a standby's try, against the database's own cheapest lock
 * (PostgreSQL `pg_try_advisory_lock`, MariaDB `GET_LOCK(name, 0)`, SQLite `BEGIN IMMEDIATE`) on
 * the same database.
 *
 * Environment: LOCKSMITH_TEST_POSTGRES, LOCKSMITH_TEST_MYSQL (the URLs).
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { LockObtainFailedError } from '../src/core/errors.js';
import { defaultLeaseStatements, LeaseDatabaseLocker } from '../src/store/index.js';
import type { Dialect } from '../src/store/sql/dialect.js';
import { type DatabaseSource, openDialect } from '../src/store/sql/open-dialect.js';
// `?` → `$1, $2, …`: how the dialect runs our statements, here on a bare pg client.
import { dollars } from '../src/store/sql/postgres-dialect.js';
import {
  MYSQL_URL,
  newTable,
  POSTGRES_URL,
  part,
  runId,
  runStoreBench,
  type StoreSection,
  work,
} from './store-support.js';
import { fmt, isMain, median, nowNs, percentile, ratio, say, sayTable, sleep } from './support.js';

const MICRO_ROUNDS = 5;
const MICRO_PER_ROUND = 100;
const MICRO_WARMUP = 20;
/**
 * Untimed pause before every timed operation. Lock operations are never back to back in real
 * use, and the pause makes every renewal really write: within one millisecond of the database's
 * clock a renewal would store the same TIME, and SQLite and InnoDB then skip the write (and the
 * commit's flush) altogether.
 */
const MICRO_GAP_MS = 2;

interface MicroOp {
  name: string;
  /** Timed. */
  run(): Promise<unknown>;
  /** Untimed, around each run. */
  before?: () => Promise<unknown>;
  after?: () => Promise<unknown>;
  /** Untimed, around each round's block of runs. */
  enter?: () => Promise<unknown>;
  leave?: () => Promise<unknown>;
  floor?: boolean;
}

interface MicroResult {
  name: string;
  samples: number[];
  rounds: number[];
  statements: number;
  floor: boolean;
}

/** Counts the statements sent through `target[method]` (a bench-side wrapper, nothing in src). */
function countCalls(target: object, method: string, counter: { n: number }): void {
  const t = target as Record<string, unknown>;
  const original = t[method] as (...args: unknown[]) => unknown;
  t[method] = function (this: unknown, ...args: unknown[]) {
    counter.n++;
    return original.apply(this, args);
  };
}

async function measure(ops: MicroOp[], counter: { n: number }): Promise<MicroResult[]> {
  const results = ops.map((op) => ({
    name: op.name,
    samples: [] as number[],
    rounds: [] as number[],
    statements: 0,
    floor: op.floor === true,
  }));
  for (let round = 0; round < MICRO_ROUNDS; round++) {
    // Rotate the order so that no operation always follows the same one.
    for (let k = 0; k < ops.length; k++) {
      const index = (k + round) % ops.length;
      const op = ops[index] as MicroOp;
      const result = results[index] as MicroResult;
      await op.enter?.();
      try {
        const roundSamples: number[] = [];
        const total = MICRO_PER_ROUND + (round === 0 ? MICRO_WARMUP : 0);
        for (let i = 0; i < total; i++) {
          await sleep(MICRO_GAP_MS);
          await op.before?.();
          const n0 = counter.n;
          const t0 = nowNs();
          await op.run();
          const t1 = nowNs();
          const n1 = counter.n;
          await op.after?.();
          if (round === 0 && i < MICRO_WARMUP) continue;
          roundSamples.push(Number(t1 - t0) / 1000);
          result.statements += n1 - n0;
        }
        result.samples.push(...roundSamples);
        result.rounds.push(median(roundSamples));
      } finally {
        await op.leave?.();
      }
    }
  }
  for (const r of results) r.statements /= r.samples.length;
  return results;
}

function printMicro(title: string, results: MicroResult[], floorName: string): void {
  const floor = results.find((r) => r.name === floorName);
  const floorP50 = floor === undefined ? Number.NaN : median(floor.samples);
  sayTable(
    `#### ${title}`,
    ['operation', 'statements', 'p50 µs', 'p99 µs', 'vs floor (p50)', 'round medians µs'],
    results.map((r) => [
      r.name,
      fmt(r.statements, 2),
      fmt(median(r.samples)),
      fmt(percentile(r.samples, 99)),
      ratio(median(r.samples) / floorP50),
      r.rounds.map((v) => fmt(v)).join(' '),
    ]),
  );
  say();
}

const LEASE = 10_000;

/**
 * The lease locker's operations on one database, given its handle, plus its renew statement run
 * on bare connections (diagnostics: the statement without the locker).
 */
function leaseOps(
  source: DatabaseSource,
  tableName: string,
  raws: { name: string; run: (sql: string, params: unknown[]) => Promise<unknown> }[],
): MicroOp[] {
  const make = (failIfLocked: boolean) =>
    new LeaseDatabaseLocker({
      database: source,
      lockTableName: tableName,
      leaseMs: LEASE,
      failIfLocked,
    });
  const tryer = make(true);
  const holder = make(false);
  const keeper = make(false);
  const dialect: Dialect = openDialect(source);
  const statements = defaultLeaseStatements(dialect, tableName);
  const free = `UPDATE ${tableName} SET BROKER_NAME = NULL, TIME = 0 WHERE ID = 1`;
  const expectTrue = async (p: Promise<boolean>) => {
    if (!(await p)) throw new Error('keepAlive() returned false while holding the lease');
  };
  return [
    ...raws.map(
      (raw): MicroOp => ({
        name: `renew UPDATE, ${raw.name} (diagnostic)`,
        enter: () => keeper.start(),
        run: () => raw.run(statements.renew, [LEASE, keeper.leaseHolderId, keeper.token as number]),
        leave: () => keeper.stop(),
      }),
    ),
    {
      name: 'ours: keepAlive() (renew)',
      enter: () => keeper.start(),
      run: () => expectTrue(keeper.keepAlive()),
      leave: () => keeper.stop(),
    },
    {
      name: 'ours: acquire statement, one try, free lease',
      run: async () => {
        const r = await dialect.query(statements.acquire, [tryer.leaseHolderId, LEASE]);
        if (r.affected !== 1) throw new Error(`acquire changed ${r.affected} rows`);
      },
      after: () => dialect.query(free),
    },
    {
      name: 'ours: start(), free lease (acquire + confirm)',
      run: () => tryer.start(),
      after: () => tryer.stop(),
    },
    {
      name: 'ours: stop() (release)',
      before: () => tryer.start(),
      run: () => tryer.stop(),
    },
    {
      name: "ours: a standby's try, held lease (start() rejects)",
      enter: () => holder.start(),
      run: async () => {
        try {
          await tryer.start();
        } catch (err) {
          if (err instanceof LockObtainFailedError) return;
          throw err;
        }
        throw new Error('start() succeeded on a held lease');
      },
      leave: () => holder.stop(),
    },
  ];
}

async function microPostgres(): Promise<void> {
  const tableName = newTable('postgres');
  const counter = { n: 0 };
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 4 });
  pool.on('error', () => {});
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  const lazy = new pg.Client({ connectionString: POSTGRES_URL });
  await lazy.connect();
  try {
    await lazy.query('SET synchronous_commit TO off');
    countCalls(pool, 'query', counter);
    countCalls(client, 'query', counter);
    countCalls(lazy, 'query', counter);
    // Create the table once, outside the timing.
    const setup = new LeaseDatabaseLocker({
      database: { postgres: pool },
      lockTableName: tableName,
    });
    await setup.start();
    await setup.stop();
    const key = 0x10c5;
    const ops: MicroOp[] = [
      {
        name: 'floor: SELECT pg_try_advisory_lock($1)',
        floor: true,
        run: () => client.query('SELECT pg_try_advisory_lock($1)', [key]),
        after: () => client.query('SELECT pg_advisory_unlock($1)', [key]),
      },
      {
        name: 'floor: try_advisory_lock + advisory_unlock',
        floor: true,
        run: async () => {
          await client.query('SELECT pg_try_advisory_lock($1)', [key]);
          await client.query('SELECT pg_advisory_unlock($1)', [key]);
        },
      },
      {
        name: 'SELECT 1 through pg.Pool (diagnostic)',
        run: () => pool.query('SELECT 1'),
      },
      ...leaseOps({ postgres: pool }, tableName, [
        { name: 'bare client', run: (sql, params) => client.query(dollars(sql), params) },
        {
          // Without waiting for the WAL flush: what the commit's flush costs.
          name: 'bare client, synchronous_commit off',
          run: (sql, params) => lazy.query(dollars(sql), params),
        },
      ]),
    ];
    printMicro(
      'PostgreSQL (pg 8, a pg.Pool of 4 handed to the locker; floors on one pg.Client)',
      await measure(ops, counter),
      'floor: SELECT pg_try_advisory_lock($1)',
    );
  } finally {
    await client.end();
    await lazy.end();
    await pool.end();
  }
}

async function microMysql(): Promise<void> {
  const tableName = newTable('mysql');
  const counter = { n: 0 };
  const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 4, flags: ['FOUND_ROWS'] });
  const conn = await mysql.createConnection({ uri: MYSQL_URL, flags: ['FOUND_ROWS'] });
  try {
    countCalls(pool, 'query', counter);
    countCalls(conn, 'query', counter);
    const setup = new LeaseDatabaseLocker({ database: { mysql: pool }, lockTableName: tableName });
    await setup.start();
    await setup.stop();
    const name = `bench_${runId}`;
    const ops: MicroOp[] = [
      {
        name: 'floor: SELECT GET_LOCK(name, 0)',
        floor: true,
        run: () => conn.query('SELECT GET_LOCK(?, 0)', [name]),
        after: () => conn.query('SELECT RELEASE_LOCK(?)', [name]),
      },
      {
        name: 'floor: GET_LOCK + RELEASE_LOCK',
        floor: true,
        run: async () => {
          await conn.query('SELECT GET_LOCK(?, 0)', [name]);
          await conn.query('SELECT RELEASE_LOCK(?)', [name]);
        },
      },
      {
        name: 'SELECT 1 through the mysql2 pool (diagnostic)',
        run: () => pool.query('SELECT 1'),
      },
      ...leaseOps({ mysql: pool }, tableName, [
        { name: 'bare connection', run: (sql, params) => conn.query(sql, params) },
      ]),
    ];
    printMicro(
      'MariaDB (mysql2 3, a pool of 4 handed to the locker; floors on one connection)',
      await measure(ops, counter),
      'floor: SELECT GET_LOCK(name, 0)',
    );
  } finally {
    await conn.end();
    await pool.end();
  }
}

async function microSqlite(): Promise<void> {
  const tableName = newTable('sqlite');
  const path = join(work, 'micro.db');
  const counter = { n: 0 };
  const handle = new Database(path, { timeout: 0 });
  const floorDb = new Database(path, { timeout: 0 });
  try {
    countCalls(handle, 'prepare', counter);
    countCalls(floorDb, 'prepare', counter);
    countCalls(floorDb, 'exec', counter);
    const setup = new LeaseDatabaseLocker({
      database: { sqlite: handle },
      lockTableName: tableName,
    });
    await setup.start();
    await setup.stop();
    const ops: MicroOp[] = [
      {
        name: 'floor: BEGIN IMMEDIATE (the write lock)',
        floor: true,
        run: async () => floorDb.exec('BEGIN IMMEDIATE'),
        after: async () => floorDb.exec('ROLLBACK'),
      },
      {
        name: 'floor: BEGIN IMMEDIATE + ROLLBACK',
        floor: true,
        run: async () => {
          floorDb.exec('BEGIN IMMEDIATE');
          floorDb.exec('ROLLBACK');
        },
      },
      ...leaseOps({ sqlite: handle }, tableName, [
        { name: 'bare handle', run: async (sql, params) => floorDb.prepare(sql).run(...params) },
      ]),
    ];
    printMicro(
      'SQLite (better-sqlite3 12, one handle handed to the locker; floors on a second handle)',
      await measure(ops, counter),
      'floor: BEGIN IMMEDIATE (the write lock)',
    );
  } finally {
    handle.close();
    floorDb.close();
  }
}

/** The round trips on PostgreSQL, MariaDB and SQLite, in that order. */
export const roundTrips: StoreSection = {
  name: 'micro',
  run: async () => {
    say('## 2. Round trips: lease operations against the database’s own lock');
    say();
    await part('2. round trips', async () => {
      await microPostgres();
      await microMysql();
      await microSqlite();
    });
  },
};

if (isMain(import.meta.url)) await runStoreBench([roundTrips]);
