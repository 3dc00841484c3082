// Interoperability with a real ActiveMQ Classic 5.17 broker (Debian packages `activemq` and
// `libpostgresql-jdbc-java`), run as a plain child JVM with the configurations in
// test/fixtures/activemq/ (never the system service):
//
// - the lease row ACTIVEMQ_LOCK of a PostgreSQL database, shared by our LeaseDatabaseLocker
//   and the broker's lease-database-locker (each test in a database of its own, so ActiveMQ's
//   fixed table names collide with nothing), with either side creating the table;
// - the KahaDB `lock` file, shared by our SharedFileLocker and the broker's shared-file-locker.
//
// Through every handover, in both directions, a witness samples who holds the lock (the row or
// the lock file, our supervisor's state, the broker's log) and records any moment where both
// sides held it. Without Java, the jars or PostgreSQL the tests skip with a message.
import assert from 'node:assert/strict';
import { closeSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { DatabaseLocker } from '../../src/store/database-locker.js';
import { LeaseDatabaseLocker } from '../../src/store/lease-database-locker.js';
import type { Locker } from '../../src/store/locker.js';
import { SharedFileLocker } from '../../src/store/shared-file-locker.js';
import { Supervisor } from '../../src/store/supervisor.js';
import {
  Broker,
  brokerMissing,
  createDatabase,
  postgresMissing,
  type TestDatabase,
} from '../fixtures/activemq-broker.js';
import { eventually, sleep, tempDir } from '../helpers.js';

/** Broker timing: the lease (= acquire poll) and the renewal / keep-alive period, in ms. */
const AMQ_LEASE = 1000;
const AMQ_RENEW = 250;
const AMQ_FILE_POLL = 500;
const AMQ_FILE_KEEP_ALIVE = 500;
/** Ours. */
// Three times the broker's: our renewals run in this test's process, which shares two cores with
// a starting JVM (and, on a loaded machine, more); a 1 s lease there can lapse for real.
const OUR_LEASE = 3000;
const OUR_RENEW = 250;
const OUR_FILE_POLL = 250;
const OUR_FILE_KEEP_ALIVE = 250;
/** How long a contender must keep waiting while the other side is master. */
const OBSERVE = 3000;
/** A JVM on a busy 2-core machine: time to start a broker. */
const BROKER_START = 30_000;

/** Skips `t` (and returns true) when the broker or PostgreSQL is not available. */
async function skipUnlessAvailable(t: TestContext, needPostgres: boolean): Promise<boolean> {
  const reason =
    brokerMissing(needPostgres) ?? (needPostgres ? await postgresMissing() : undefined);
  if (reason === undefined) return false;
  t.skip(reason);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Our side

/** A supervisor around `locker` with a service that does nothing; its transitions timed. */
function ours(locker: Locker, lockKeepAlivePeriod: number, onMaster: () => void = () => {}) {
  const supervisor = new Supervisor({
    locker,
    keepAlivePeriodMs: lockKeepAlivePeriod,
    restartAllowed: false,
    service: { start() {}, stop() {} },
  });
  const events: { event: string; at: number }[] = [];
  for (const event of ['waiting', 'master', 'keepalive-failed', 'demoted', 'stopped'] as const) {
    supervisor.on(event, () => {
      events.push({ event, at: Date.now() });
      // Synchronously, before anything else can look at the supervisor's state.
      if (event === 'master') onMaster();
    });
  }
  const started = supervisor.start();
  // A rejection is asserted by whoever awaits `started`; never unhandled here.
  started.catch(() => {});
  return {
    supervisor,
    started,
    get master() {
      return supervisor.state === 'master';
    },
    at(event: string): number | undefined {
      return events.find((e) => e.event === event)?.at;
    },
    /** A failed keep-alive or a demotion: mastership was not kept. */
    troubles() {
      return events.filter((e) => e.event === 'keepalive-failed' || e.event === 'demoted');
    },
  };
}

/** Whether `promise` settles within `ms`. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let settled = false;
  const done = promise.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  await Promise.race([done, sleep(ms)]);
  return settled;
}

// ---------------------------------------------------------------------------------------------
// The witness

interface Shared {
  /** Who the shared state names: the row's BROKER_NAME, or the lock file's writer. */
  holder: string | undefined;
  /** The row's TIME (the lease's expiry), or the lock file's acquire time (its first 8 bytes). */
  time: number | undefined;
}

interface Sample extends Shared {
  at: number;
  oursMaster: boolean;
  brokerMaster: boolean;
}

/**
 * Every ~20 ms reads the shared state between two looks at each side's own view of its role.
 * A side is counted as master in a sample only if it was master both before and after the
 * read. Violations: both master; or a side master while the shared state names someone else.
 */
function witness(
  read: () => Promise<Shared>,
  side: { ours: () => { master: boolean; name: string }; broker: () => Broker | undefined },
) {
  const samples: Sample[] = [];
  const violations: string[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const o0 = side.ours();
      const b0 = side.broker();
      const bm0 = b0?.master ?? false;
      let shared: Shared;
      try {
        shared = await read();
      } catch (err) {
        violations.push(`could not read the shared state: ${(err as Error).message}`);
        return;
      }
      const o1 = side.ours();
      const bm1 = b0 !== undefined && side.broker() === b0 && b0.master;
      const at = Date.now();
      const oursMaster = o0.master && o1.master && o0.name === o1.name;
      const brokerMaster = bm0 && bm1;
      samples.push({ at, oursMaster, brokerMaster, ...shared });
      if (oursMaster && brokerMaster) violations.push(`${at}: both master (${shared.holder})`);
      if (oursMaster && shared.holder !== o0.name) {
        violations.push(`${at}: we are master but the shared state names ${shared.holder}`);
      }
      if (brokerMaster && shared.holder !== b0?.name) {
        violations.push(`${at}: the broker is master but the shared state names ${shared.holder}`);
      }
      await sleep(20);
    }
  })();
  return {
    samples,
    violations,
    /** Samples in [from, to] (Date.now() values). */
    between(from: number, to = Number.POSITIVE_INFINITY) {
      return samples.filter((s) => s.at >= from && s.at <= to);
    },
    async stop() {
      running = false;
      await loop;
    },
  };
}

/** The lease row, read straight from the database (ActiveMQ's columns, EPOCH when present). */
async function leaseRow(db: TestDatabase) {
  const r = await db.pool.query('SELECT * FROM ACTIVEMQ_LOCK WHERE ID = 1');
  const row = (r.rows[0] ?? {}) as Record<string, unknown>;
  const num = (v: unknown) => (v === null || v === undefined ? undefined : Number(v));
  return {
    holder: typeof row.broker_name === 'string' ? row.broker_name : undefined,
    time: num(row.time),
    epoch: num(row.epoch),
  };
}

/** The lease row for the witness: nobody while the table does not exist yet. */
async function leaseRowOrNobody(db: TestDatabase): Promise<Shared> {
  try {
    return await leaseRow(db);
  } catch (err) {
    if ((err as { code?: unknown }).code === '42P01') return { holder: undefined, time: undefined };
    throw err;
  }
}

async function lockTableColumns(db: TestDatabase): Promise<string[]> {
  const r = await db.pool.query(
    "SELECT column_name FROM information_schema.columns WHERE table_name = 'activemq_lock' ORDER BY ordinal_position",
  );
  return r.rows.map((row: { column_name: string }) => row.column_name);
}

/**
 * A broker on `db`'s ACTIVEMQ_LOCK, with ActiveMQ's lease-database-locker (`lease`) or its
 * DefaultDatabaseLocker (`database`, a row lock held in an open transaction).
 */
function jdbcBroker(kind: 'lease' | 'database', dir: string, db: TestDatabase, name: string) {
  return new Broker(
    kind === 'lease' ? 'lease-database.xml' : 'database.xml',
    dir,
    {
      brokerName: name,
      jdbcUrl: db.jdbcUrl,
      jdbcUser: db.user,
      lockAcquireSleepInterval: AMQ_LEASE,
      lockKeepAlivePeriod: AMQ_RENEW,
    },
    kind === 'lease' ? /becoming master with lease expiry/ : /Becoming the master on dataSource/,
  );
}

function leaseLocker(db: TestDatabase, leaseHolderId: string): LeaseDatabaseLocker {
  return new LeaseDatabaseLocker({
    database: db.url,
    lockTableName: 'ACTIVEMQ_LOCK',
    leaseHolderId,
    leaseMs: OUR_LEASE,
  });
}

const ACQUIRE_ATTEMPT = /attempting to acquire exclusive lease to become the master/;
const LEASE_HELD_BY = (holder: string) => new RegExp(`Lease held by ${holder} till`);

// ---------------------------------------------------------------------------------------------

describe('ActiveMQ Classic 5.17 lease-database-locker and our LeaseDatabaseLocker on ACTIVEMQ_LOCK', () => {
  it('ours creates the table; the broker waits while ours holds, takes over on release; ours waits while the broker holds, takes over after kill -9 once the lease expired', async (t) => {
    if (await skipUnlessAvailable(t, true)) return;
    using dir = tempDir('locksmith-amq-');
    const db = await createDatabase();
    let broker: Broker | undefined;
    let us: ReturnType<typeof ours> | undefined;
    let ourName = 'locksmith-a';
    const w = witness(() => leaseRowOrNobody(db), {
      ours: () => ({ master: us?.master ?? false, name: ourName }),
      broker: () => broker,
    });
    try {
      // 1. Ours first: it creates ACTIVEMQ_LOCK (ActiveMQ's columns plus EPOCH) and the seed row.
      us = ours(leaseLocker(db, ourName), OUR_RENEW);
      await us.started;
      assert.deepEqual(await lockTableColumns(db), ['id', 'time', 'broker_name', 'epoch']);
      const first = await leaseRow(db);
      assert.equal(first.holder, 'locksmith-a');

      // 2. The broker starts on the same table (its CREATE TABLE/INSERT fail harmlessly) and
      //    waits: for several of its acquire intervals it sees our lease and never becomes master.
      broker = jdbcBroker('lease', dir.path, db, 'amq-a');
      const attempt = await broker.waitFor(ACQUIRE_ATTEMPT, BROKER_START);
      const observeFrom = Date.now();
      // Half a poll more, so that our release below falls between two of its attempts (a
      // whole number of polls would release just before one and measure the best case).
      await sleep(OBSERVE + AMQ_LEASE / 2);
      assert.equal(
        broker.find(/becoming master/),
        undefined,
        `ours: ${JSON.stringify(us.troubles())}\n${broker.tail()}`,
      );
      assert.equal(broker.find(/BrokerService - Apache ActiveMQ .* started/), undefined);
      const refusals = broker.count(LEASE_HELD_BY('locksmith-a'));
      assert.ok(refusals >= 3, `broker saw our lease only ${refusals} times\n${broker.tail()}`);
      assert.ok(us.master);
      assert.deepEqual(us.troubles(), []);
      const ourRenewals = new Set(w.between(observeFrom).map((s) => s.time));
      assert.ok(ourRenewals.size >= 6, `our renewals moved TIME ${ourRenewals.size} times`);
      assert.ok(w.between(observeFrom).every((s) => s.holder === 'locksmith-a'));

      // 3. Ours releases: the broker becomes master within about one of its acquire intervals.
      const releasing = Date.now();
      await us.supervisor.stop();
      const released = Date.now();
      const became = await broker.waitFor(/becoming master/, AMQ_LEASE * 3);
      await broker.waitFor(/BrokerService - Apache ActiveMQ .* started/, 10_000);
      const becameAt = became.logged ?? became.received;
      assert.ok(becameAt >= releasing, 'the broker became master before ours released');
      const takeoverByBroker = becameAt - released;
      t.diagnostic(
        `broker JVM up and polling the lease ${attempt.received - broker.spawnedAt} ms after spawn; became master ${takeoverByBroker} ms after our release (its poll: ${AMQ_LEASE} ms)`,
      );
      assert.ok(takeoverByBroker <= AMQ_LEASE + 1000, `broker took ${takeoverByBroker} ms`);
      assert.equal((await leaseRow(db)).holder, 'amq-a');

      // 4. Ours again (another holder id): start() does not resolve while the broker renews.
      ourName = 'locksmith-b';
      us = ours(leaseLocker(db, ourName), OUR_RENEW);
      const waitFrom = Date.now();
      assert.equal(await settlesWithin(us.started, OBSERVE), false, 'ours became master');
      assert.equal(us.supervisor.state, 'waiting');
      const during = w.between(waitFrom);
      assert.ok(during.length >= 20, `only ${during.length} samples`);
      assert.ok(during.every((s) => s.holder === 'amq-a'));
      const brokerRenewals = new Set(during.map((s) => s.time));
      assert.ok(brokerRenewals.size >= 6, `broker renewed ${brokerRenewals.size} times`);
      assert.equal(broker.find(/failed to update lease|giving up being a master/), undefined);

      // 5. kill -9 the broker: ours becomes master once the broker's lease has expired.
      const killed = Date.now();
      await broker.kill('SIGKILL');
      const leftBehind = await leaseRow(db);
      assert.equal(leftBehind.holder, 'amq-a', 'the dead broker still holds the lease row');
      await us.started;
      const masterAt = us.at('master') ?? Number.NaN;
      const expiry = leftBehind.time ?? Number.NaN;
      assert.ok(masterAt >= expiry, `ours took over ${expiry - masterAt} ms before expiry`);
      const takeoverByUs = masterAt - killed;
      t.diagnostic(
        `ours took over ${takeoverByUs} ms after kill -9 (${masterAt - expiry} ms after the broker's lease expired)`,
      );
      assert.ok(takeoverByUs <= AMQ_LEASE + 1000, `ours took ${takeoverByUs} ms`);
      const final = await leaseRow(db);
      assert.equal(final.holder, 'locksmith-b');
      assert.ok((final.epoch ?? 0) > (first.epoch ?? 0), 'EPOCH grew at our takeover');
      await sleep(300);
      await w.stop();
      assert.deepEqual(w.violations, []);
      assert.ok(w.samples.some((s) => s.oursMaster) && w.samples.some((s) => s.brokerMaster));
    } finally {
      await w.stop();
      await broker?.kill('SIGKILL');
      await us?.supervisor.stop();
      await db.drop();
    }
  });

  it('the broker creates the table; ours adds EPOCH, waits while the broker holds, and takes over when the broker shuts down', async (t) => {
    if (await skipUnlessAvailable(t, true)) return;
    using dir = tempDir('locksmith-amq-');
    const db = await createDatabase();
    let broker: Broker | undefined;
    let us: ReturnType<typeof ours> | undefined;
    const w = witness(() => leaseRowOrNobody(db), {
      ours: () => ({ master: us?.master ?? false, name: 'locksmith-c' }),
      broker: () => broker,
    });
    try {
      // 1. The broker first, on an empty database: ActiveMQ's own schema, then master.
      broker = jdbcBroker('lease', dir.path, db, 'amq-b');
      await broker.waitFor(/becoming master/, BROKER_START);
      assert.deepEqual(await lockTableColumns(db), ['id', 'time', 'broker_name']);

      // 2. Ours: adds EPOCH to ActiveMQ's table and waits; the broker keeps renewing.
      us = ours(leaseLocker(db, 'locksmith-c'), OUR_RENEW);
      const waitFrom = Date.now();
      assert.equal(await settlesWithin(us.started, OBSERVE), false, 'ours became master');
      assert.deepEqual(await lockTableColumns(db), ['id', 'time', 'broker_name', 'epoch']);
      const during = w.between(waitFrom);
      assert.ok(during.every((s) => s.holder === 'amq-b'));
      assert.ok(new Set(during.map((s) => s.time)).size >= 6, 'the broker renewed');
      assert.equal(broker.find(/failed to update lease|giving up being a master/), undefined);
      assert.ok(broker.master);

      // 3. A graceful shutdown (SIGTERM: the broker releases its lease): ours takes over fast.
      const terminating = Date.now();
      await broker.kill('SIGTERM');
      const released = broker.find(/released lease/);
      assert.ok(released !== undefined, broker.tail());
      await us.started;
      const masterAt = us.at('master') ?? Number.NaN;
      assert.ok(masterAt >= terminating);
      t.diagnostic(
        `ours took over ${masterAt - terminating} ms after SIGTERM, ${masterAt - (released.logged ?? released.received)} ms after the broker's "released lease"`,
      );
      assert.ok(masterAt - terminating <= OUR_LEASE + 5000);
      const row = await leaseRow(db);
      assert.equal(row.holder, 'locksmith-c');
      assert.ok((row.epoch ?? 0) > 0);

      // 4. Ours releases the way ActiveMQ does (holder NULL, TIME 0).
      await us.supervisor.stop();
      const after = await leaseRow(db);
      assert.equal(after.holder, undefined);
      assert.equal(after.time, 0);
      await w.stop();
      assert.deepEqual(w.violations, []);
    } finally {
      await w.stop();
      await broker?.kill('SIGKILL');
      await us?.supervisor.stop();
      await db.drop();
    }
  });
});

// ---------------------------------------------------------------------------------------------

/** The first 8 bytes of the lock file: the acquire time its last holder wrote (ActiveMQ's format). */
function lockStamp(path: string): number | undefined {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return undefined;
  }
  try {
    const b = Buffer.alloc(8);
    return readSync(fd, b, 0, 8, 0) === 8 ? Number(b.readBigInt64BE(0)) : undefined;
  } finally {
    closeSync(fd);
  }
}

describe('ActiveMQ Classic 5.17 KahaDB shared-file-locker and our SharedFileLocker', () => {
  it('exclude each other on <kahadb>/lock: the broker waits while ours holds and starts on release; ours waits while the broker holds and takes over after kill -9', async (t) => {
    if (await skipUnlessAvailable(t, false)) return;
    using dir = tempDir('locksmith-amq-');
    const kahadb = join(dir.path, 'kahadb');
    const lockPath = join(kahadb, 'lock');
    let broker: Broker | undefined;
    let us: ReturnType<typeof ours> | undefined;
    // Whose stamp the file carries: each side's acquire writes its time at offset 0.
    const ourStamps = new Set<number>();
    const recordOurStamp = () => {
      const stamp = lockStamp(lockPath);
      if (stamp !== undefined) ourStamps.add(stamp);
    };
    const w = witness(
      async () => {
        const time = lockStamp(lockPath);
        const holder = time === undefined ? undefined : ourStamps.has(time) ? 'locksmith' : 'amq-k';
        return { holder, time };
      },
      { ours: () => ({ master: us?.master ?? false, name: 'locksmith' }), broker: () => broker },
    );
    const fileLocker = () =>
      new SharedFileLocker({ directory: kahadb, acquireIntervalMs: OUR_FILE_POLL });
    try {
      // 1. Ours holds the KahaDB lock file.
      us = ours(fileLocker(), OUR_FILE_KEEP_ALIVE, recordOurStamp);
      await us.started;
      const ourStamp = lockStamp(lockPath);
      assert.ok(ourStamp !== undefined && ourStamps.has(ourStamp));

      // 2. The broker on the same KahaDB waits (slave) and does not start.
      broker = new Broker(
        'kahadb.xml',
        dir.path,
        {
          brokerName: 'amq-k',
          kahadbDirectory: kahadb,
          lockAcquireSleepInterval: AMQ_FILE_POLL,
          lockKeepAlivePeriod: AMQ_FILE_KEEP_ALIVE,
        },
        /SharedFileLocker - keepAlive result: true/,
      );
      await broker.waitFor(
        /is locked by another server. This broker is now in slave mode/,
        BROKER_START,
      );
      const observeFrom = Date.now();
      await sleep(OBSERVE + AMQ_FILE_POLL / 2); // mid-poll release, as above
      const attempts = broker.count(/is locked\.\.\. waiting/);
      assert.ok(attempts >= 4, `the broker tried ${attempts} times\n${broker.tail()}`);
      assert.equal(
        broker.find(/keepAlive result|BrokerService - Apache ActiveMQ .* started/),
        undefined,
      );
      assert.ok(us.master);
      assert.deepEqual(us.troubles(), [], 'our keep-alive saw the file untouched');
      assert.ok(w.between(observeFrom).every((s) => s.time === ourStamp));

      // 3. Ours releases: the broker takes the lock (writing its stamp), pauses one keep-alive
      //    period (AMQ-4705), then starts.
      const releasing = Date.now();
      await us.supervisor.stop();
      await eventually(
        () => {
          const s = lockStamp(lockPath);
          return s !== undefined && !ourStamps.has(s);
        },
        AMQ_FILE_POLL * 4,
        'the broker stamps the lock file',
      );
      const stampedAt = Date.now();
      const brokerStamp = lockStamp(lockPath) ?? Number.NaN;
      assert.ok(brokerStamp >= releasing, 'the broker took the lock before ours released it');
      const started = await broker.waitFor(/BrokerService - Apache ActiveMQ .* started/, 10_000);
      const startedAt = started.logged ?? started.received;
      t.diagnostic(
        `broker took the lock ${brokerStamp - releasing} ms after our release (seen ${stampedAt - releasing} ms), started ${startedAt - releasing} ms after it (poll ${AMQ_FILE_POLL} + pause ${AMQ_FILE_KEEP_ALIVE} ms)`,
      );
      assert.ok(brokerStamp - releasing <= AMQ_FILE_POLL + 500);

      // 4. Ours again: waits while the broker holds the file.
      us = ours(fileLocker(), OUR_FILE_KEEP_ALIVE, recordOurStamp);
      const waitFrom = Date.now();
      assert.equal(await settlesWithin(us.started, OBSERVE), false, 'ours became master');
      assert.equal(us.supervisor.state, 'waiting');
      assert.ok(w.between(waitFrom).every((s) => s.time === brokerStamp));
      assert.ok(broker.count(/keepAlive result: true/) >= 4, 'the broker kept its lock');
      assert.equal(broker.find(/keepAlive result: false|giving up being a master/), undefined);

      // 5. kill -9 the broker: the kernel frees its lock and ours takes over.
      const killed = Date.now();
      await broker.kill('SIGKILL');
      await us.started;
      const masterAt = us.at('master') ?? Number.NaN;
      const ours2 = lockStamp(lockPath) ?? Number.NaN;
      assert.ok(ourStamps.has(ours2) && ours2 >= killed, 'ours stamped the file after the kill');
      t.diagnostic(
        `ours took the lock ${ours2 - killed} ms after kill -9, master ${masterAt - killed} ms after it (poll ${OUR_FILE_POLL} + pause ${OUR_FILE_KEEP_ALIVE} ms)`,
      );
      assert.ok(masterAt - killed <= OUR_FILE_POLL + OUR_FILE_KEEP_ALIVE + 1000);
      await sleep(300);
      await w.stop();
      assert.deepEqual(w.violations, []);
      assert.ok(w.samples.some((s) => s.oursMaster) && w.samples.some((s) => s.brokerMaster));
    } finally {
      await w.stop();
      await broker?.kill('SIGKILL');
      await us?.supervisor.stop();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Mixed kinds on one ACTIVEMQ_LOCK: a held transaction (DefaultDatabaseLocker, ours or the
// broker's) beside a lease (LeaseDatabaseLocker, ours or the broker's).

function ourDatabaseLocker(db: TestDatabase): DatabaseLocker {
  return new DatabaseLocker({
    database: db.url,
    lockTableName: 'ACTIVEMQ_LOCK',
    acquireIntervalMs: OUR_LEASE,
    takeoverPauseMs: 0,
  });
}

describe('ActiveMQ Classic 5.17 and our lockers, of the other kind, on one ACTIVEMQ_LOCK', () => {
  it("the broker's DefaultDatabaseLocker master: our lease and our DatabaseLocker wait; after its kill -9 ours takes over", async (t) => {
    if (await skipUnlessAvailable(t, true)) return;
    using dir = tempDir('locksmith-amq-');
    const db = await createDatabase();
    let broker: Broker | undefined;
    const lockers: ReturnType<typeof ours>[] = [];
    try {
      broker = jdbcBroker('database', dir.path, db, 'amq-d');
      await broker.waitFor(/Becoming the master on dataSource/, BROKER_START);
      await broker.waitFor(/BrokerService - Apache ActiveMQ .* started/, 10_000);
      const lease = ours(leaseLocker(db, 'locksmith-l'), OUR_RENEW);
      const held = ours(ourDatabaseLocker(db), OUR_RENEW);
      lockers.push(lease, held);
      assert.equal(await settlesWithin(lease.started, OBSERVE), false, 'our lease became master');
      assert.equal(held.supervisor.state, 'waiting', 'our DatabaseLocker became master');
      assert.ok(broker.master, broker.tail());
      const killed = Date.now();
      await broker.kill('SIGKILL');
      // PostgreSQL drops the dead broker's session and its row lock: exactly one of ours wins.
      await eventually(() => lease.master || held.master, 10_000, 'one of ours master');
      t.diagnostic(`one of ours master ${Date.now() - killed} ms after the broker's kill -9`);
      await sleep(OBSERVE / 2);
      assert.ok(!(lease.master && held.master), 'both of ours master');
    } finally {
      await broker?.kill('SIGKILL');
      for (const l of lockers) await l.supervisor.stop();
      await db.drop();
    }
  });

  it("our DatabaseLocker master: the broker's DefaultDatabaseLocker and the broker's lease locker wait; each takes over after our stop", async (t) => {
    if (await skipUnlessAvailable(t, true)) return;
    for (const kind of ['database', 'lease'] as const) {
      using dir = tempDir('locksmith-amq-');
      const db = await createDatabase();
      let broker: Broker | undefined;
      const us = ours(ourDatabaseLocker(db), OUR_RENEW);
      try {
        await us.started;
        broker = jdbcBroker(kind, dir.path, db, kind === 'database' ? 'amq-d' : 'amq-l');
        // Its start-up may already wait behind our transaction (its INSERT of the seed row
        // conflicts with our uncommitted update of it), before its locker logs anything.
        await broker.waitFor(/Using Persistence Adapter/, BROKER_START);
        await sleep(OBSERVE);
        assert.equal(broker.find(/ecoming (the )?master/), undefined, broker.tail());
        assert.ok(us.master);
        assert.deepEqual(us.troubles(), []);
        const stopping = Date.now();
        await us.supervisor.stop();
        const became = await broker.waitFor(/ecoming (the )?master/, AMQ_LEASE * 3 + 2_000);
        t.diagnostic(
          `${kind} broker master ${(became.logged ?? became.received) - stopping} ms after our stop began`,
        );
        assert.ok((became.logged ?? became.received) >= stopping);
      } finally {
        await broker?.kill('SIGKILL');
        await us.supervisor.stop();
        await db.drop();
      }
    }
  });

  it("the broker's lease master: our DatabaseLocker waits (it reads the live lease), and takes over after the broker's graceful stop", async (t) => {
    if (await skipUnlessAvailable(t, true)) return;
    using dir = tempDir('locksmith-amq-');
    const db = await createDatabase();
    let broker: Broker | undefined;
    let us: ReturnType<typeof ours> | undefined;
    try {
      broker = jdbcBroker('lease', dir.path, db, 'amq-l');
      await broker.waitFor(/becoming master with lease expiry/, BROKER_START);
      us = ours(ourDatabaseLocker(db), OUR_RENEW);
      assert.equal(await settlesWithin(us.started, OBSERVE), false, 'ours became master');
      assert.ok(broker.master, broker.tail());
      assert.equal(broker.find(/failed to update lease|giving up being a master/), undefined);
      const terminating = Date.now();
      await broker.kill('SIGTERM');
      await us.started;
      t.diagnostic(
        `ours master ${(us.at('master') ?? 0) - terminating} ms after the broker's SIGTERM`,
      );
    } finally {
      await broker?.kill('SIGKILL');
      await us?.supervisor.stop();
      await db.drop();
    }
  });

  it("CAVEAT: our lease master, then the broker's DefaultDatabaseLocker: the broker does not look at the lease and becomes master; ours self-fences (LEASE_EXPIRED) within lease − margin", async (t) => {
    if (await skipUnlessAvailable(t, true)) return;
    using dir = tempDir('locksmith-amq-');
    const db = await createDatabase();
    let broker: Broker | undefined;
    const locker = leaseLocker(db, 'locksmith-l');
    let lost: { at: number; code: unknown } | undefined;
    locker.on('lost', (reason) => {
      lost ??= { at: Date.now(), code: reason.code };
    });
    const us = ours(locker, OUR_RENEW);
    try {
      await us.started;
      broker = jdbcBroker('database', dir.path, db, 'amq-d');
      const became = await broker.waitFor(/Becoming the master on dataSource/, BROKER_START);
      const brokerMaster = became.logged ?? became.received;
      // Our renewals now wait behind the broker's row lock: the self-fencing deadline ends it.
      await eventually(() => us.at('demoted') !== undefined, OUR_LEASE * 4, 'ours demoted');
      const overlap = (lost?.at ?? Number.NaN) - brokerMaster;
      t.diagnostic(
        `two masters for ${overlap} ms (ours self-fenced; lease ${OUR_LEASE}, renew ${OUR_RENEW}); ours stopped ${(us.at('demoted') ?? 0) - (lost?.at ?? 0)} ms after`,
      );
      assert.equal(lost?.code, 'LEASE_EXPIRED');
      assert.ok(overlap <= OUR_LEASE, `two masters for ${overlap} ms`);
    } finally {
      await broker?.kill('SIGKILL');
      await us.supervisor.stop();
      await db.drop();
    }
  });
});
