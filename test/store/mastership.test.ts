// The Mastership handle every store locker's start() resolves with, per locker: the handle
// contract (token, validUntil, signal, lost, ensureValid, close = stop, idempotent, dispose),
// loss noticed by the locker (with its code and, measured, its latency), withMastership, and
// stop() during a start() that is still waiting.
import assert from 'node:assert/strict';
import { readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  AbortedError,
  AlreadyClosedError,
  InvalidArgumentError,
  LockIOError,
  LockLostError,
} from '../../src/core/errors.js';
import { AbstractLocker } from '../../src/store/abstract-locker.js';
import {
  DatabaseLocker,
  LeaseDatabaseLocker,
  type Locker,
  Mastership,
  SharedFileLocker,
  withMastership,
} from '../../src/store/index.js';
import { rowLockStatement } from '../../src/store/sql/lock-table.js';
import { openDialect } from '../../src/store/sql/open-dialect.js';
import {
  admin,
  KINDS,
  type Kind,
  killSession,
  uniqueTable,
  urlOf,
} from '../fixtures/db-servers.js';
import { sleep } from '../helpers.js';
import { scratchTables, tracked } from './store-helpers.js';

/** A locker whose keep-alive answers what the test says (a rejection is "unknown"). */
class ScriptedAnswerLocker extends AbstractLocker {
  readonly defaultKeepAlivePeriodMs = 20;
  answers: (boolean | Error)[] = [];
  constructor() {
    super({ acquireIntervalMs: 10 }, 'scripted');
  }
  protected async doStart(): Promise<number> {
    return 7;
  }
  protected async doStop(): Promise<void> {}
  protected async doKeepAlive(): Promise<boolean> {
    const next = this.answers.shift() ?? true;
    if (next instanceof Error) throw next;
    return next;
  }
}

type Make = (extra?: { failIfLocked?: boolean }) => Locker;

describe('Mastership', () => {
  const { dir, table } = scratchTables();

  const factories: [string, () => Make][] = [
    [
      'SharedFileLocker',
      () => {
        const d = join(dir.path, uniqueTable());
        return (extra) => new SharedFileLocker({ directory: d, acquireIntervalMs: 50, ...extra });
      },
    ],
  ];
  for (const kind of KINDS) {
    factories.push([
      `DatabaseLocker on ${kind}`,
      () => {
        const t = table(kind);
        return (extra) =>
          new DatabaseLocker({
            database: urlOf(kind, dir.path),
            lockTableName: t,
            acquireIntervalMs: 200,
            takeoverPauseMs: 0,
            ...extra,
          });
      },
    ]);
    factories.push([
      `LeaseDatabaseLocker on ${kind}`,
      () => {
        const t = table(kind);
        return (extra) =>
          new LeaseDatabaseLocker({
            database: urlOf(kind, dir.path),
            lockTableName: t,
            leaseMs: 2_000,
            ...extra,
          });
      },
    ]);
  }

  for (const [what, factory] of factories) {
    describe(what, () => {
      it('start() resolves the handle: token, resource, validUntil, live signal; concurrent starts share it', async () => {
        const locker = factory()();
        const [m, again] = await Promise.all([locker.start(), locker.start()]);
        try {
          assert.ok(m instanceof Mastership);
          assert.equal(m, again);
          assert.equal(m.token, locker.token);
          assert.equal(m.resource, locker.name);
          assert.equal(m.closed, false);
          assert.equal(m.signal.aborted, false);
          assert.equal(m.lostReason, undefined);
          m.ensureValid();
          const until = m.validUntil;
          assert.ok(until !== undefined && until > performance.now(), String(until));
          if (locker instanceof LeaseDatabaseLocker) assert.ok(Number.isFinite(until));
          else assert.equal(until, Number.POSITIVE_INFINITY);
        } finally {
          await m.close();
        }
      });

      it('close() stops the locker once (idempotent, concurrent, asyncDispose); the signal aborts with AlreadyClosedError; another can take over at once', async () => {
        const make = factory();
        const locker = make();
        const m = await locker.start();
        await Promise.all([m.close(), m.close(), m[Symbol.asyncDispose]()]);
        await m.close();
        assert.equal(m.closed, true);
        assert.equal(locker.token, undefined);
        assert.equal(m.validUntil, undefined);
        assert.ok(m.signal.aborted);
        assert.ok(m.signal.reason instanceof AlreadyClosedError);
        assert.throws(() => m.ensureValid(), AlreadyClosedError);
        assert.equal(m.lostReason, undefined);
        const next = make({ failIfLocked: true });
        const m2 = await next.start();
        assert.ok(m2.token > m.token);
        await m2.close();
      });

      it('a stop of the locker by other means ends the handle as a close does; closing that old handle leaves the next mastership alone', async () => {
        const locker = factory()();
        const m = await locker.start();
        const lost: unknown[] = [];
        m.on('lost', (r) => lost.push(r));
        await locker.stop();
        assert.equal(m.closed, true);
        assert.ok(m.signal.reason instanceof AlreadyClosedError);
        const m2 = await locker.start();
        await m.close();
        assert.equal(m2.closed, false);
        assert.equal(locker.token, m2.token);
        assert.equal(await locker.keepAlive(), true);
        await m2.close();
        assert.deepEqual(lost, []);
      });

      it('stop() while start() is still waiting: start rejects with AbortedError, stop resolves, nothing stays held', async () => {
        const make = factory();
        const holder = make();
        const m = await holder.start();
        const waiter = make();
        const waiting = tracked(waiter.start());
        await sleep(300);
        assert.equal(waiting.settled, false);
        await waiter.stop();
        await assert.rejects(waiting.promise, AbortedError);
        assert.equal(waiter.token, undefined);
        assert.equal(await holder.keepAlive(), true);
        await m.close();
        // And a stop right after start (acquisition in flight, uncontended) holds nothing.
        const quick = make();
        const started = quick.start().catch((err: unknown) => err);
        await quick.stop();
        const outcome = await started;
        assert.ok(
          outcome instanceof Mastership || outcome instanceof AbortedError,
          String(outcome),
        );
        if (outcome instanceof Mastership) await outcome.close();
        const probe = make({ failIfLocked: true });
        await (await probe.start()).close();
      });

      it('the caller signal ends a waiting start(); nothing is held afterwards', async () => {
        const make = factory();
        const m = await make().start();
        const waiter = make();
        const controller = new AbortController();
        const waiting = waiter.start({ signal: controller.signal });
        setTimeout(() => controller.abort(), 200);
        await assert.rejects(waiting, AbortedError);
        await m.close();
        const probe = make({ failIfLocked: true });
        await (await probe.start()).close();
        await waiter.stop();
      });
    });
  }

  describe('loss', () => {
    it('keep-alive false: lost (LOCK_LOST) fires before keepAlive() resolves, the signal aborts, ensureValid throws', async () => {
      const locker = new ScriptedAnswerLocker();
      const m = await locker.start();
      const order: string[] = [];
      locker.on('lost', () => order.push('locker lost'));
      m.on('lost', (r) => order.push(`handle lost ${r.code}`));
      locker.answers.push(false);
      const alive = await locker.keepAlive();
      order.push(`keepAlive ${alive}`);
      assert.deepEqual([...order].sort(), [
        'handle lost LOCK_LOST',
        'keepAlive false',
        'locker lost',
      ]);
      assert.equal(order.at(-1), 'keepAlive false');
      assert.ok(m.signal.aborted);
      assert.ok(m.signal.reason instanceof LockLostError);
      assert.throws(() => m.ensureValid(), LockLostError);
      assert.equal(m.validUntil, undefined);
      await m.close();
      assert.equal(locker.token, undefined);
    });

    it('keep-alive rejection: the handle ends with LOCK_UNCONFIRMED, the locker stays master (its caller decides)', async () => {
      const locker = new ScriptedAnswerLocker();
      const m = await locker.start();
      const lockerLost: unknown[] = [];
      locker.on('lost', (r) => lockerLost.push(r));
      locker.answers.push(new LockIOError('disk on fire'));
      await assert.rejects(locker.keepAlive(), LockIOError);
      assert.equal(m.lostReason?.code, 'LOCK_UNCONFIRMED');
      assert.match(m.lostReason?.message ?? '', /disk on fire/);
      assert.deepEqual(lockerLost, []);
      assert.equal(await locker.keepAlive(), true);
      await m.close();
    });

    for (const how of ['deleted', 'renamed over', 'rewritten'] as const) {
      it(`SharedFileLocker: lock file ${how} is noticed in the background (LOCK_LOST), no keep-alive needed`, async (t) => {
        const locker = new SharedFileLocker({ directory: join(dir.path, uniqueTable()) });
        const m = await locker.start();
        const lost = new Promise<LockLostError>((r) => m.once('lost', r));
        const t0 = performance.now();
        if (how === 'deleted') unlinkSync(locker.path);
        else if (how === 'renamed over') {
          writeFileSync(`${locker.path}.new`, 'x');
          renameSync(`${locker.path}.new`, locker.path);
        } else {
          const bytes = readFileSync(locker.path);
          bytes.fill(7, 8, 24); // another holder's nonce, same format
          writeFileSync(locker.path, bytes);
        }
        const reason = await within(lost, 5_000);
        t.diagnostic(`file ${how}: lost after ${(performance.now() - t0).toFixed(1)} ms`);
        assert.equal(reason.code, 'LOCK_LOST');
        assert.match(
          reason.message,
          { deleted: /deleted/, 'renamed over': /replaced/, rewritten: /rewritten/ }[how],
        );
        assert.ok(m.signal.aborted);
        assert.equal(await locker.keepAlive(), false);
        await m.close();
      });
    }

    for (const kind of ['postgres', 'mysql'] as const) {
      it(`DatabaseLocker on ${kind}: its session killed is noticed at once (LOCK_LOST)`, async (t) => {
        const locker = new DatabaseLocker({
          database: urlOf(kind, dir.path),
          lockTableName: table(kind),
          takeoverPauseMs: 0,
        });
        const m = await locker.start();
        const lost = new Promise<LockLostError>((r) => m.once('lost', r));
        const t0 = performance.now();
        await killSession(kind, locker.sessionId as number);
        const reason = await lost;
        t.diagnostic(
          `${kind} session killed: lost after ${(performance.now() - t0).toFixed(1)} ms`,
        );
        assert.equal(reason.code, 'LOCK_LOST');
        assert.equal(await locker.keepAlive(), false);
        await m.close();
      });
    }

    it('LeaseDatabaseLocker: a lease taken behind its back makes the keep-alive false and lost LOCK_LOST', async () => {
      const t = table('postgres');
      const locker = new LeaseDatabaseLocker({
        database: urlOf('postgres', dir.path),
        lockTableName: t,
        leaseMs: 5_000,
      });
      const m = await locker.start();
      await admin('postgres', `UPDATE ${t} SET BROKER_NAME = 'thief', EPOCH = EPOCH + 1`);
      assert.equal(await locker.keepAlive(), false);
      assert.equal(m.lostReason?.code, 'LOCK_LOST');
      await m.close();
    });

    for (const kind of KINDS) {
      it(`LeaseDatabaseLocker on ${kind}: renewals stalled past the lease (the row locked by another transaction) end it with LEASE_EXPIRED before the lease runs out`, async (t) => {
        const LEASE = 1_200;
        const tb = table(kind);
        const locker = new LeaseDatabaseLocker({
          database: urlOf(kind, dir.path),
          lockTableName: tb,
          leaseMs: LEASE,
        });
        const m = await locker.start({ keepAlivePeriodMs: 300 });
        const validUntil = m.validUntil as number;
        // Another session holds the lock row (as ActiveMQ's DefaultDatabaseLocker would, which
        // ignores the lease): every renewal now waits in the database.
        const lost = new Promise<LockLostError>((r) => m.once('lost', r));
        const hold = await holdRow(kind, tb, dir.path);
        try {
          const renewal = locker.keepAlive().catch((err: unknown) => err);
          const reason = await within(lost, 3 * LEASE);
          const at = performance.now();
          t.diagnostic(
            `lost ${(at - validUntil).toFixed(0)} ms after validUntil (lease ${LEASE}, margin ${locker.selfFencingMarginMs})`,
          );
          assert.equal(reason.code, 'LEASE_EXPIRED');
          assert.ok(at >= validUntil - 5);
          const answer = await renewal;
          assert.ok(answer === false || answer instanceof Error, String(answer));
          // The row is still locked: stopping must not wait for it (the statements blocked
          // behind it are dropped at queryTimeout, the lease by default).
          const closing = performance.now();
          await within(m.close(), 3 * LEASE);
          t.diagnostic(
            `stop with the row still locked: ${(performance.now() - closing).toFixed(0)} ms`,
          );
        } finally {
          await hold.release();
        }
        await m.close();
      });
    }
  });

  describe('withMastership', () => {
    const fileLocker = () => new SharedFileLocker({ directory: join(dir.path, uniqueTable()) });

    it('runs fn as master and stops the locker after, on return and on throw', async () => {
      const locker = fileLocker();
      const result = await withMastership(locker, (m) => {
        assert.equal(m.token, locker.token);
        assert.equal(m.signal.aborted, false);
        return 42;
      });
      assert.equal(result, 42);
      assert.equal(locker.token, undefined);
      await assert.rejects(
        withMastership(locker, () => {
          throw new Error('boom');
        }),
        /boom/,
      );
      assert.equal(locker.token, undefined);
    });

    it('a loss while fn runs aborts its signal, and the call rejects with the LockLostError', async () => {
      const locker = new ScriptedAnswerLocker();
      locker.answers.push(true, false);
      await assert.rejects(
        withMastership(
          locker,
          (m) =>
            new Promise((resolve) => {
              m.signal.addEventListener('abort', () => resolve('done anyway'));
            }),
          { keepAlivePeriodMs: 10 },
        ),
        (err: LockLostError) => err instanceof LockLostError && err.code === 'LOCK_LOST',
      );
      assert.equal(locker.token, undefined);
    });

    it('a keep-alive that cannot answer ends fn with LOCK_UNCONFIRMED', async () => {
      const locker = new ScriptedAnswerLocker();
      locker.answers.push(new LockIOError('unknown'));
      await assert.rejects(
        withMastership(
          locker,
          (m) => new Promise((resolve) => m.signal.addEventListener('abort', resolve)),
          { keepAlivePeriodMs: 10 },
        ),
        (err: LockLostError) => err instanceof LockLostError && err.code === 'LOCK_UNCONFIRMED',
      );
      assert.equal(locker.token, undefined);
    });

    it('the signal gives up waiting; bad arguments are refused before anything starts', async () => {
      const holder = fileLocker();
      const m = await holder.start();
      const waiter = new SharedFileLocker({ directory: holder.directory });
      await assert.rejects(
        withMastership(waiter, () => 1, { signal: AbortSignal.timeout(100) }),
        AbortedError,
      );
      assert.equal(waiter.token, undefined);
      await m.close();
      await assert.rejects(
        withMastership({} as Locker, () => 1),
        InvalidArgumentError,
      );
      await assert.rejects(
        withMastership(waiter, 'nope' as unknown as () => number),
        InvalidArgumentError,
      );
      await assert.rejects(
        withMastership(waiter, () => 1, { keepAlivePeriodMs: -1 }),
        InvalidArgumentError,
      );
      await assert.rejects(
        withMastership(waiter, () => 1, { signal: 'x' as unknown as AbortSignal }),
        InvalidArgumentError,
      );
      assert.equal(waiter.token, undefined);
    });
  });
});

/**
 * `promise`, or a rejection after `ms`: a referenced timer, since what reports a loss in the
 * background (inotify thread, watchdog) must never keep a process alive on its own.
 */
async function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`not within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Another session holding the lock row in an open transaction, until `release()`: plays
 * ActiveMQ's DefaultDatabaseLocker, which takes the row lock whatever the row says.
 */
async function holdRow(
  kind: Kind,
  table: string,
  dirPath: string,
): Promise<{ release(): Promise<void> }> {
  const dialect = openDialect(urlOf(kind, dirPath));
  const conn = await dialect.connect();
  while (!(await dialect.beginRowLock(conn, rowLockStatement(dialect, table), 1_000))) {
    await sleep(20);
  }
  return {
    release: async () => {
      conn.destroy();
      await dialect.close();
    },
  };
}
