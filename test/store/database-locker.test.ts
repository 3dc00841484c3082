import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import {
  AbortedError,
  InvalidArgumentError,
  LockIOError,
  LockLostError,
  LockObtainFailedError,
} from '../../src/core/errors.js';
import {
  DatabaseLocker,
  type DatabaseLockerOptions,
  DEFAULT_DATABASE_KEEP_ALIVE_PERIOD,
  Supervisor,
} from '../../src/store/index.js';
import { dropTable, KINDS, killSession, uniqueTable, urlOf } from '../fixtures/db-servers.js';
import { eventually, sleep, tempDir } from '../helpers.js';
import { tracked } from './store-helpers.js';

for (const kind of KINDS) {
  describe(`DatabaseLocker on ${kind}`, () => {
    const dir = tempDir();
    const url = urlOf(kind, dir.path);
    const tables: string[] = [];
    const stoppers: (() => Promise<void>)[] = [];
    const make = (table: string, options: Partial<DatabaseLockerOptions> = {}) => {
      const locker = new DatabaseLocker({
        database: url,
        lockTableName: table,
        acquireIntervalMs: 200,
        takeoverPauseMs: 0,
        ...options,
      });
      stoppers.push(() => locker.stop());
      return locker;
    };
    const table = () => {
      const t = uniqueTable();
      tables.push(t);
      return t;
    };
    after(async () => {
      for (const stop of stoppers) await stop().catch(() => {});
      for (const t of tables) await dropTable(kind, t);
      dir[Symbol.dispose]();
    });

    it('holds the row lock; failIfLocked rejects; a stop hands over to a waiter (conformance S20, S22, S23)', async () => {
      const t = table();
      const a = make(t);
      await a.start();
      assert.ok(await a.keepAlive());
      if (kind !== 'sqlite') assert.ok((a.sessionId as number) > 0);
      await assert.rejects(make(t, { failIfLocked: true }).start(), LockObtainFailedError);
      const b = make(t);
      const pb = tracked(b.start());
      await sleep(300);
      assert.equal(pb.settled, false, 'b waits while a holds');
      assert.equal(await b.keepAlive(), false);
      const tokenA = a.token as number;
      const t0 = performance.now();
      await a.stop();
      await pb.promise;
      // PostgreSQL and MariaDB wake the blocked waiter at once; SQLite polls each interval.
      assert.ok(performance.now() - t0 < 200 + 300, `${performance.now() - t0}`);
      assert.ok((b.token as number) > tokenA, 'tokens increase');
      assert.equal(await a.keepAlive(), false);
      assert.ok(await b.keepAlive());
      await b.stop();
    });

    it('tokens strictly increase over many takeovers', async () => {
      const t = table();
      let last = 0;
      for (let i = 0; i < 5; i++) {
        const l = make(t);
        await l.start();
        assert.ok((l.token as number) > last);
        last = l.token as number;
        await l.stop();
      }
    });

    it('stop during the wait rejects start with an AbortedError and holds nothing (conformance S4, S21)', async () => {
      const t = table();
      const a = make(t);
      await a.start();
      const b = make(t, { acquireIntervalMs: 5_000 });
      const p = b.start();
      await sleep(150);
      const t0 = performance.now();
      await b.stop();
      await assert.rejects(p, AbortedError);
      assert.ok(performance.now() - t0 < 1_000, 'the blocked wait ended promptly');
      await a.stop();
      const c = make(t, { failIfLocked: true });
      await c.start();
      await c.stop();
    });

    if (kind !== 'sqlite') {
      it(`the master's connection killed (${kind === 'postgres' ? 'pg_terminate_backend' : 'KILL'}): it stops being master before another starts`, async (t) => {
        const tb = table();
        const events: string[] = [];
        const supervisor = (name: string) => {
          const locker = new DatabaseLocker({
            database: url,
            lockTableName: tb,
            acquireIntervalMs: 200,
            queryTimeoutMs: 300,
          });
          const s = new Supervisor({
            locker,
            keepAlivePeriodMs: 200,
            service: {
              start: () => {
                events.push(`${name} start`);
              },
              stop: () => {
                events.push(`${name} stop`);
              },
            },
          });
          s.on('demoted', ({ reason }) =>
            events.push(`${name} demoted ${(reason as { code?: string }).code}`),
          );
          stoppers.push(() => s.stop());
          return { s, locker };
        };
        const a = supervisor('a');
        await a.s.start();
        const b = supervisor('b');
        void b.s.start().catch(() => {});
        await sleep(300);
        const session = a.locker.sessionId as number;
        const t0 = performance.now();
        await killSession(kind, session);
        await eventually(() => events.includes('a demoted LOCK_LOST'), 3_000);
        const demoted = performance.now() - t0;
        await eventually(() => events.includes('b start'), 5_000);
        const takeover = performance.now() - t0;
        t.diagnostic(
          `session killed: old master demoted after ${demoted.toFixed(0)} ms, new master after ${takeover.toFixed(0)} ms (takeover pause 200 + 300 ms)`,
        );
        assert.deepEqual(events, ['a start', 'a stop', 'a demoted LOCK_LOST', 'b start']);
        assert.ok((b.s.token as number) > (a.locker.token ?? 0));
        await a.s.stop();
        await b.s.stop();
      });
    }
  });
}

describe('DatabaseLocker configuration', () => {
  it('refuses bad configuration with InvalidArgumentError', () => {
    const database = 'sqlite:/tmp/never-opened.db';
    const bad: Partial<DatabaseLockerOptions>[] = [
      { acquireIntervalMs: -1 },
      { queryTimeoutMs: 0 },
      { queryTimeoutMs: -5 },
      { takeoverPauseMs: -1 },
      { lockTableName: 'ACTIVEMQ_LOCK WHERE 1=1; --' },
      { lockTableName: 'x"y' },
      { lockStatement: ' ' },
      { createTablesOnStartup: 1 as unknown as boolean },
    ];
    for (const options of bad) {
      assert.throws(
        () => new DatabaseLocker({ database, ...options }),
        InvalidArgumentError,
        JSON.stringify(options),
      );
    }
    assert.equal(
      new DatabaseLocker({ database }).defaultKeepAlivePeriodMs,
      DEFAULT_DATABASE_KEEP_ALIVE_PERIOD,
    );
  });

  it('an unreachable database fails the first start with a clear LockIOError', async () => {
    for (const database of [
      'postgres://postgres@127.0.0.1:1/test',
      'mysql://root@127.0.0.1:1/test',
    ]) {
      const l = new DatabaseLocker({ database });
      await assert.rejects(l.start(), (err: unknown) => {
        assert.ok(err instanceof LockIOError, String(err));
        assert.match(err.message, /unreachable/);
        return true;
      });
    }
  });

  it('loss of the connection is a lost event and keepAlive false', async () => {
    const t = uniqueTable();
    const l = new DatabaseLocker({
      database: urlOf('postgres', '/tmp'),
      lockTableName: t,
      takeoverPauseMs: 0,
    });
    try {
      await l.start();
      const lost = new Promise<LockLostError>((r) => l.once('lost', r));
      await killSession('postgres', l.sessionId as number);
      assert.ok((await lost) instanceof LockLostError);
      assert.equal(await l.keepAlive(), false);
    } finally {
      await l.stop();
      await dropTable('postgres', t);
    }
  });
});
