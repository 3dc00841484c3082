import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { FakeClock } from '../../src/core/clock.js';
import {
  AbortedError,
  InvalidArgumentError,
  LockIOError,
  LockObtainFailedError,
} from '../../src/core/errors.js';
import {
  LeaseDatabaseLocker,
  type LeaseDatabaseLockerOptions,
  type LockerStartOptions,
} from '../../src/store/index.js';
import {
  admin,
  dropTable,
  KINDS,
  type Kind,
  MYSQL_URL,
  POSTGRES_URL,
  uniqueTable,
  urlOf,
} from '../fixtures/db-servers.js';
import { eventually, sleep, tempDir } from '../helpers.js';
import { recordingLogger, tracked } from './store-helpers.js';

/** Reads the lock row of `table` straight from the database. */
async function row(kind: Kind, url: string, table: string) {
  const sql = `SELECT BROKER_NAME, TIME, EPOCH FROM ${table} WHERE ID = 1`;
  if (kind === 'sqlite') {
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(url.slice('sqlite:'.length));
    try {
      return db.prepare(sql).get() as Record<string, unknown>;
    } finally {
      db.close();
    }
  }
  const rows = (await admin(kind, sql)) as Record<string, unknown>[];
  const r = rows[0] ?? {};
  return Object.fromEntries(Object.entries(r).map(([k, v]) => [k.toUpperCase(), v]));
}

async function exec(kind: Kind, url: string, sql: string): Promise<void> {
  if (kind === 'sqlite') {
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(url.slice('sqlite:'.length));
    try {
      db.exec(sql);
    } finally {
      db.close();
    }
    return;
  }
  await admin(kind, sql);
}

for (const kind of KINDS) {
  describe(`LeaseDatabaseLocker on ${kind}`, () => {
    const dir = tempDir();
    const url = urlOf(kind, dir.path);
    const tables: string[] = [];
    const lockers: LeaseDatabaseLocker[] = [];
    const make = (table: string, options: Partial<LeaseDatabaseLockerOptions> = {}) => {
      const locker = new LeaseDatabaseLocker({
        database: url,
        lockTableName: table,
        leaseMs: 1_000,
        ...options,
      });
      lockers.push(locker);
      return locker;
    };
    const table = () => {
      const t = uniqueTable();
      tables.push(t);
      return t;
    };
    after(async () => {
      await Promise.all(lockers.map((l) => l.stop().catch(() => {})));
      for (const t of tables) await dropTable(kind, t);
      dir[Symbol.dispose]();
    });

    it('creates the ActiveMQ table with EPOCH, acquires, renews, releases (conformance S24, S26, S27, S29, S33)', async () => {
      const t = table();
      const a = make(t, { leaseHolderId: 'broker-a' });
      await a.start();
      const r1 = await row(kind, url, t);
      assert.equal(r1.BROKER_NAME, 'broker-a');
      assert.equal(Number(r1.EPOCH), a.token);
      assert.ok(await a.keepAlive());
      assert.ok(Number((await row(kind, url, t)).TIME) >= Number(r1.TIME));
      await a.stop();
      const r2 = await row(kind, url, t);
      assert.equal(r2.BROKER_NAME, null);
      assert.equal(Number(r2.TIME), 0);
      assert.equal(await a.keepAlive(), false);
    });

    it('tokens (EPOCH) strictly increase across takeovers and a recreated table', async () => {
      const t = table();
      const seen: number[] = [];
      for (let i = 0; i < 3; i++) {
        const l = make(t);
        await l.start();
        seen.push(l.token as number);
        await l.stop();
      }
      await exec(kind, url, `DROP TABLE ${t}`);
      const l = make(t);
      await l.start();
      seen.push(l.token as number);
      await l.stop();
      for (let i = 1; i < seen.length; i++) {
        assert.ok((seen[i] as number) > (seen[i - 1] as number), `${seen}`);
      }
    });

    it('failIfLocked rejects at once; a held lease blocks, the release lets exactly one in (conformance S3, S31, S32)', async () => {
      const t = table();
      const a = make(t, { leaseMs: 1_000 });
      await a.start();
      await assert.rejects(make(t, { failIfLocked: true }).start(), LockObtainFailedError);
      // A foreign lease (an ActiveMQ broker, say), far from expiring.
      await a.stop();
      await exec(
        kind,
        url,
        `UPDATE ${t} SET BROKER_NAME = 'foreign', TIME = 99999999999999 WHERE ID = 1`,
      );
      // Lease 1 s: long enough that the winner's lease cannot expire during the check.
      const b = make(t, { leaseMs: 1_000 });
      const c = make(t, { leaseMs: 1_000 });
      const pb = tracked(b.start());
      const pc = tracked(c.start());
      await sleep(250);
      assert.equal(pb.settled || pc.settled, false);
      assert.equal(await b.keepAlive(), false);
      assert.equal(await c.keepAlive(), false);
      await exec(kind, url, `UPDATE ${t} SET BROKER_NAME = NULL, TIME = 0 WHERE ID = 1`);
      await eventually(() => pb.settled || pc.settled, 2_000);
      await sleep(150);
      assert.equal(pb.settled && pc.settled, false, 'exactly one wins');
      const [winner, loser, loserStart] = pb.settled ? [b, c, pc] : [c, b, pb];
      const t0 = performance.now();
      await winner.stop();
      await loserStart.promise;
      assert.ok(performance.now() - t0 < 2 * 1_000, 'the other wins within 2 intervals');
      assert.ok((loser.token as number) > 0);
      await loser.stop();
    });

    it('a waiting standby takes a released lease within about one renew period, not at its expiry', async (t) => {
      const tb = table();
      const LEASE = 3_000;
      const PERIOD = 250;
      const a = make(tb, { leaseMs: LEASE, maxEventLoopLagMs: 10_000 });
      await a.start();
      const b = make(tb, { leaseMs: LEASE });
      const logger = recordingLogger();
      const c = make(tb, { leaseMs: LEASE, logger });
      const pb = tracked(b.start({ keepAlivePeriodMs: PERIOD }));
      // c has no renew period: it polls once a lease, ActiveMQ's behaviour, and still only
      // takes the lease when it is free or expired.
      const pc = tracked(c.start());
      await sleep(600); // both read a's expiry ~2.4 s ahead
      assert.equal(pb.settled || pc.settled, false);
      const tokenA = a.token as number;
      const t0 = performance.now();
      await a.stop(); // releases: holder NULL, TIME 0
      await pb.promise;
      const takeover = performance.now() - t0;
      t.diagnostic(`standby master ${takeover.toFixed(0)} ms after the release (renew ${PERIOD})`);
      assert.ok(takeover < PERIOD + 250, `took ${takeover} ms (lease ${LEASE}, renew ${PERIOD})`);
      assert.ok((b.token as number) > tokenA);
      // The safety rule holds for the slower poller: b's lease is live, so c keeps waiting.
      await sleep(PERIOD * 2);
      assert.equal(pc.settled, false);
      assert.ok(await b.keepAlive());
      await b.stop();
      await pc.promise;
      assert.ok(logger.count('info') >= 1);
    });

    it('expiry is judged on the database clock: an expired lease is taken, the old holder cannot renew', async () => {
      const t = table();
      const a = make(t, { leaseMs: 1_000, maxEventLoopLagMs: 10_000 });
      await a.start();
      const aToken = a.token as number;
      const lost = new Promise((r) => a.once('lost', r));
      // a renews nothing; after 1 s its lease has expired in the database.
      const b = make(t, { leaseMs: 1_000 });
      await b.start();
      assert.ok((b.token as number) > aToken);
      await lost; // a self-fenced (750 ms) before b could take over (1 s)
      assert.equal(a.token, undefined, 'a lost mastership has no current token');
      assert.equal(await a.keepAlive(), false);
      assert.ok(await b.keepAlive());
    });

    it('a stolen lease: keepAlive false, with the owner logged (conformance S27)', async () => {
      const t = table();
      const logger = recordingLogger();
      const a = make(t, { logger });
      await a.start();
      await exec(kind, url, `UPDATE ${t} SET BROKER_NAME = 'thief' WHERE ID = 1`);
      assert.equal(await a.keepAlive(), false);
      assert.ok(logger.lines.some((l) => /held by thief/.test(l.message)));
    });

    it('stop during the wait rejects start with the ActiveMQ message, holding nothing (conformance S4)', async () => {
      const t = table();
      const a = make(t);
      await a.start();
      const b = make(t, { leaseMs: 1_000 });
      const p = b.start();
      await sleep(120);
      await b.stop();
      await assert.rejects(p, (err: unknown) => {
        assert.ok(err instanceof AbortedError);
        assert.match(err.message, /attempt to obtain lock aborted due to shutdown/);
        return true;
      });
      assert.ok(await a.keepAlive());
    });

    it('self-fences at lease − margin when renewals hang, before the lease expires', async (t) => {
      if (kind === 'sqlite') {
        t.skip('a SQLite statement cannot hang: the event loop would');
        return;
      }
      const tb = table();
      const a = make(tb, { leaseMs: 1_000, selfFencingMarginMs: 300 });
      await a.start();
      // Another session locks the row: a's renewal blocks in the database.
      let release: () => Promise<void>;
      if (kind === 'postgres') {
        const c = new pg.Client({ connectionString: POSTGRES_URL });
        await c.connect();
        await c.query('BEGIN');
        await c.query(`SELECT * FROM ${tb} WHERE ID = 1 FOR UPDATE`);
        release = async () => {
          await c.query('ROLLBACK');
          await c.end();
        };
      } else {
        const c = await mysql.createConnection({ uri: MYSQL_URL });
        await c.query('START TRANSACTION');
        await c.query(`SELECT * FROM ${tb} WHERE ID = 1 FOR UPDATE`);
        release = async () => {
          await c.query('ROLLBACK');
          await c.end();
        };
      }
      const t0 = performance.now();
      const lost = new Promise((r) => a.once('lost', r));
      const keepAlive = a.keepAlive();
      assert.equal(await keepAlive, false, 'the hanging renewal resolves false at the deadline');
      await lost;
      const elapsed = performance.now() - t0;
      t.diagnostic(
        `self-fenced ${elapsed.toFixed(0)} ms after a renewal hung (lease 1000, margin 300)`,
      );
      assert.ok(elapsed < 1_000 - 100, `${elapsed}`);
      const r = await row(kind, url, tb);
      assert.equal(r.BROKER_NAME, a.leaseHolderId, 'the lease was still ours in the database');
      await release();
    });

    it('a stalled event loop counts as a missed renewal', async () => {
      const t = table();
      const a = make(t, { leaseMs: 5_000, maxEventLoopLagMs: 100 });
      await a.start();
      const lost = new Promise<Error>((r) => a.once('lost', r));
      const end = performance.now() + 300;
      while (performance.now() < end) {
        // a synchronous stall
      }
      assert.match((await lost).message, /event loop stalled/);
      assert.equal(await a.keepAlive(), false);
    });
  });
}

describe('LeaseDatabaseLocker configuration and ActiveMQ semantics', () => {
  it('refuses bad configuration at construction with InvalidArgumentError', () => {
    const database = 'sqlite:/tmp/never-opened.db';
    const bad: Partial<LeaseDatabaseLockerOptions>[] = [
      { leaseMs: -1 },
      { leaseMs: 0 },
      { leaseMs: 100 },
      { leaseMs: 999 },
      { leaseMs: Number.NaN },
      { selfFencingMarginMs: 0 },
      { leaseMs: 1000, selfFencingMarginMs: 1000 },
      { maxAllowableDiffFromDBTimeMs: -5 },
      { maxEventLoopLagMs: 0 },
      { queryTimeoutMs: -1 },
      { lockTableName: 'LOCK; DROP TABLE x' },
      { lockTableName: '1LOCK' },
      { lockTableName: 'a.b.c' },
      { lockTableName: '' },
      { leaseHolderId: '' },
      { leaseHolderId: 'x'.repeat(251) },
      { handleStartException: 'yes' as unknown as boolean },
      { statements: { acquire: '' } },
      { statements: { nope: 'SELECT 1' } as unknown as Record<string, string> },
    ];
    for (const options of bad) {
      assert.throws(
        () => new LeaseDatabaseLocker({ database, ...options }),
        InvalidArgumentError,
        JSON.stringify(options),
      );
    }
    for (const database of ['', 'ftp://x', 'sqlite:', 'sqlite::memory:', 'postgres://[bad']) {
      assert.throws(() => new LeaseDatabaseLocker({ database }), InvalidArgumentError, database);
    }
    assert.throws(
      () => new LeaseDatabaseLocker({ database: {} as unknown as string }),
      InvalidArgumentError,
    );
    // Accepted: schema-qualified and ActiveMQ's name.
    new LeaseDatabaseLocker({ database, lockTableName: 'public.ACTIVEMQ_LOCK' });
  });

  it('the default holder id is unique per locker; defaults follow ActiveMQ (lease 10 s) and ours (renew lease/4)', () => {
    const a = new LeaseDatabaseLocker({ database: 'sqlite:/tmp/x.db' });
    const b = new LeaseDatabaseLocker({ database: 'sqlite:/tmp/x.db' });
    assert.notEqual(a.leaseHolderId, b.leaseHolderId);
    assert.match(a.leaseHolderId, new RegExp(`:${process.pid}:[0-9a-f]{8}$`));
    assert.equal(a.leaseMs, 10_000);
    assert.equal(a.lockTableName, 'ACTIVEMQ_LOCK');
    assert.equal(a.defaultKeepAlivePeriodMs, 2_500);
    assert.equal(a.selfFencingMarginMs, 2_500);
    assert.equal(a.maxAllowableDiffFromDBTimeMs, 0);
  });

  it('an unreachable database fails the first start with a clear LockIOError', async () => {
    for (const database of [
      'postgres://postgres@127.0.0.1:1/test',
      'mysql://root@127.0.0.1:1/test',
      'postgres://postgres@127.0.0.1:5432/no_such_database_here',
    ]) {
      const l = new LeaseDatabaseLocker({ database, leaseMs: 1_000 });
      await assert.rejects(l.start(), (err: unknown) => {
        assert.ok(err instanceof LockIOError, String(err));
        assert.match(err.message, /unreachable|Cannot create or read/);
        assert.doesNotMatch(err.message, /password/);
        return true;
      });
    }
  });

  it('refuses a renew period the lease cannot survive at start, holding nothing; warns when it is 0 (conformance S25)', async () => {
    using dir = tempDir();
    const url = `sqlite:${dir.path}/w.db`;
    // ActiveMQ only warns (and lets the lease lapse between renewals); a period over 3/8 of
    // the lease is refused before anything is taken.
    for (const period of [2_000, 1_000, 900, 376]) {
      const l = new LeaseDatabaseLocker({ database: url, leaseMs: 1_000 });
      await assert.rejects(l.start({ keepAlivePeriodMs: period }), (err: unknown) => {
        assert.ok(err instanceof InvalidArgumentError, String(err));
        assert.match(err.message, /keepAlivePeriodMs .* must be at most 3\/8 of the lease/);
        return true;
      });
      assert.equal(l.token, undefined);
      // Nothing was taken: another locker takes the lease at once.
      const other = new LeaseDatabaseLocker({ database: url, leaseMs: 1_000, failIfLocked: true });
      await other.start();
      await other.stop();
    }
    // ActiveMQ's name for the period is accepted too.
    const amq = new LeaseDatabaseLocker({ database: url, leaseMs: 1_000 });
    await assert.rejects(
      amq.start({ lockKeepAlivePeriod: 1_000 } as LockerStartOptions),
      /lockKeepAlivePeriod|keepAlivePeriodMs/,
    );
    const logger = recordingLogger();
    const zero = new LeaseDatabaseLocker({ database: url, leaseMs: 1_000, logger });
    await zero.start({ keepAlivePeriodMs: 0 });
    await zero.stop();
    assert.ok(logger.lines.some((x) => x.level === 'warn' && /No keep-alive/.test(x.message)));
    const quiet = recordingLogger();
    const l = new LeaseDatabaseLocker({ database: url, leaseMs: 1_000, logger: quiet });
    await l.start({ keepAlivePeriodMs: 375 });
    await l.stop();
    assert.equal(quiet.count('warn'), 0);
  });

  it('an unknown option is refused, not ignored; ActiveMQ names are aliases, never both', () => {
    const database = 'sqlite:/tmp/never-opened.db';
    // The defect: `leaseMs` was unknown and silently ignored, so the lease was the 10 s default.
    assert.equal(new LeaseDatabaseLocker({ database, leaseMs: 5_000 }).leaseMs, 5_000);
    for (const [options, pattern] of [
      [{ leaseMS: 5_000 }, /unknown option "leaseMS" \(known: .*leaseMs/],
      [{ lease: 5_000 }, /unknown option "lease"/],
      [{ acquireIntervalMs: 5_000 }, /unknown option "acquireIntervalMs"/],
      [{ selfFencingMargin: 500 }, /unknown option "selfFencingMargin"/],
      [
        { leaseMs: 5_000, lockAcquireSleepInterval: 5_000 },
        /leaseMs and lockAcquireSleepInterval name the same option/,
      ],
    ] as const) {
      assert.throws(
        () => new LeaseDatabaseLocker({ database, ...(options as object) }),
        (err: unknown) => err instanceof InvalidArgumentError && pattern.test(err.message),
        JSON.stringify(options),
      );
    }
    const amq = new LeaseDatabaseLocker({
      database,
      ...({
        lockAcquireSleepInterval: 4_000,
        queryTimeout: 700,
        maxAllowableDiffFromDBTime: 9,
      } as object),
    });
    assert.equal(amq.leaseMs, 4_000);
    assert.equal(amq.acquireIntervalMs, 4_000);
    assert.equal(amq.queryTimeoutMs, 700);
    assert.equal(amq.maxAllowableDiffFromDBTimeMs, 9);
    assert.throws(
      () => new LeaseDatabaseLocker({ database, ...({ lockAcquireSleepInterval: 500 } as object) }),
      /Invalid lockAcquireSleepInterval 500: must be >= 1000 ms/,
    );
  });

  it('skew check (conformance S28): 0 queries nothing; above 0 and over the max, offset = db − local', async () => {
    using dir = tempDir();
    const url = `sqlite:${dir.path}/s.db`;
    const wall = Date.now();
    const ahead = new FakeClock(0, wall + 60_000); // local clock 60 s ahead of the database
    const l1 = new LeaseDatabaseLocker({
      database: url,
      clock: ahead,
      leaseMs: 1000,
    });
    await l1.start();
    assert.equal(l1.timeOffset, 0);
    await l1.stop();
    const logger = recordingLogger();
    const l2 = new LeaseDatabaseLocker({
      database: url,
      clock: new FakeClock(0, Date.now() + 60_000),
      maxAllowableDiffFromDBTimeMs: 1_000,
      leaseMs: 1000,
      logger,
    });
    await l2.start();
    assert.ok(l2.timeOffset < -59_000 && l2.timeOffset > -61_000, `${l2.timeOffset}`);
    assert.ok(logger.lines.some((x) => /differs from the database/.test(x.message)));
    await l2.stop();
    const l3 = new LeaseDatabaseLocker({
      database: url,
      clock: new FakeClock(0, Date.now() - 500),
      maxAllowableDiffFromDBTimeMs: 1_000,
      leaseMs: 1000,
    });
    await l3.start();
    assert.equal(l3.timeOffset, 0, 'within the maximum: no offset');
    await l3.stop();
  });

  it('the user can pass their own pg pool, which the locker never closes', async () => {
    const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 2 });
    const t = uniqueTable();
    try {
      const l = new LeaseDatabaseLocker({ database: { postgres: pool }, lockTableName: t });
      await l.start();
      assert.ok(await l.keepAlive());
      await l.stop();
      assert.equal((await pool.query('SELECT 1 AS one')).rows[0].one, 1);
    } finally {
      await pool.query(`DROP TABLE IF EXISTS ${t}`);
      await pool.end();
    }
  });

  it('pg_terminate_backend of the lease master connections: no second master; it keeps or cleanly gives up its lease', async () => {
    const t = uniqueTable();
    const app = `lk_${t.toLowerCase()}`;
    const a = new LeaseDatabaseLocker({
      database: `${POSTGRES_URL}?application_name=${app}`,
      lockTableName: t,
      leaseMs: 1_000,
    });
    const b = new LeaseDatabaseLocker({
      database: POSTGRES_URL,
      lockTableName: t,
      leaseMs: 1_000,
    });
    try {
      await a.start();
      const pb = tracked(b.start());
      let lost = false;
      a.on('lost', () => {
        lost = true;
      });
      await admin(
        'postgres',
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '${app}'`,
      );
      // Renewals every 250 ms, as the supervisor would: each is true (a new pooled
      // connection) or, if ever false, a is no longer master before b can be.
      for (let i = 0; i < 6; i++) {
        await sleep(250);
        const alive = await a.keepAlive().catch(() => false);
        if (!alive) lost = true;
        if (!lost) assert.equal(pb.settled, false, 'b must not be master while a is');
      }
      assert.equal(lost, false, 'a killed connection alone does not lose the lease');
    } finally {
      await a.stop();
      await b.stop();
      await dropTable('postgres', t);
    }
  });

  it('an existing ActiveMQ table without EPOCH gets the column and works', async () => {
    const t = uniqueTable();
    await admin(
      'postgres',
      `CREATE TABLE ${t} (ID BIGINT NOT NULL PRIMARY KEY, TIME BIGINT, BROKER_NAME VARCHAR(250))`,
    );
    await admin('postgres', `INSERT INTO ${t} (ID) VALUES (1)`);
    try {
      const l = new LeaseDatabaseLocker({ database: POSTGRES_URL, lockTableName: t });
      await l.start();
      assert.ok((l.token as number) > 0);
      await l.stop();
    } finally {
      await dropTable('postgres', t);
    }
  });

  it('concurrent start-up of 8 lockers on a fresh table: one table, one row, one master', async () => {
    for (const kind of ['postgres', 'mysql'] as const) {
      const t = uniqueTable();
      const lockers = Array.from(
        { length: 8 },
        () =>
          new LeaseDatabaseLocker({
            database: urlOf(kind, '/tmp'),
            lockTableName: t,
            failIfLocked: true,
          }),
      );
      try {
        const results = await Promise.allSettled(lockers.map((l) => l.start()));
        const won = results.filter((r) => r.status === 'fulfilled').length;
        assert.equal(
          won,
          1,
          `${kind}: ${results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))}`,
        );
        for (const r of results) {
          if (r.status === 'rejected')
            assert.ok(r.reason instanceof LockObtainFailedError, String(r.reason));
        }
        const rows = (await admin(kind, `SELECT COUNT(*) AS N FROM ${t}`)) as Record<
          string,
          unknown
        >[];
        assert.equal(Number(Object.values(rows[0] ?? {})[0]), 1);
      } finally {
        await Promise.all(lockers.map((l) => l.stop()));
        await dropTable(kind, t);
      }
    }
  });
});
