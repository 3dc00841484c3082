/**
 * Sessions own row locks (after etcd's): a lock id is usable only by its session; a session
 * outlives a dropped connection for its lease and is resumed with its locks; when the lease
 * runs out (or at once, with releaseOnDisconnect) everything it held is released and waiters
 * proceed; closing a session releases everything; deadlock detection works across sessions.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Get, Put } from '../../src/rows/index.js';
import { eventually, sleep } from '../helpers.js';
import { RawClient } from './raw-client.js';
import { client, startServer } from './server-fixture.js';

const row = (s: string) => Buffer.from(s);

describe('server sessions', () => {
  it('a lock belongs to its session: another session can neither use nor release it (conformance V1)', async () => {
    await using server = await startServer();
    await using a = await client(server);
    await using b = await client(server);
    await a.createTable('t', ['f']);
    const lock = await a.table('t').lockRow('r');
    await assert.rejects(b.table('t').unlockRow(lock.lockId), { code: 'UNKNOWN_ROW_LOCK' });
    await assert.rejects(b.table('t').renewLease(lock.lockId), { code: 'UNKNOWN_ROW_LOCK' });
    await assert.rejects(
      b.table('t').put(new Put('r', { rowLock: { lockId: lock.lockId } }).add('f', 'q', 'v')),
      { code: 'UNKNOWN_ROW_LOCK' },
    );
    await assert.rejects(b.table('t').get(new Get('r', { lockId: lock.lockId })), {
      code: 'UNKNOWN_ROW_LOCK',
    });
    // The holder still holds it, and uses it.
    lock.ensureValid();
    await a.table('t').put(new Put('r', { rowLock: lock }).add('f', 'q', 'mine'));
    await lock.close();
    assert.equal((await b.table('t').get(new Get('r'))).getValue('f', 'q')?.toString(), 'mine');
  });

  it("another session's mutation waits for the explicit lock, then lands after it (conformance V2)", async () => {
    await using server = await startServer();
    await using a = await client(server);
    await using b = await client(server);
    await a.createTable('t', ['f']);
    const lock = await a.table('t').lockRow('r');
    const order: string[] = [];
    const blocked = b
      .table('t')
      .put(new Put('r').add('f', 'q', 'b'))
      .then(() => order.push('b put'));
    await a.table('t').put(new Put('r', { rowLock: lock }).add('f', 'q', 'a'));
    await sleep(200);
    order.push('a unlock');
    await lock.close();
    await blocked;
    assert.deepEqual(order, ['a unlock', 'b put']);
  });

  it('a silent session expires after its lease: its locks are released and a waiter gets the row (conformance V3)', async () => {
    await using server = await startServer();
    await using b = await client(server);
    await b.createTable('t', ['f']);
    const { raw } = await RawClient.session(server.port, { sessionLeaseMs: 400 });
    const grant = (await raw.call('lockRow', ['t', row('r'), null])) as [string, number, number];
    assert.equal(typeof grant[0], 'string');
    // The raw client now says nothing, like a process paused with SIGSTOP.
    const started = Date.now();
    const lock = await b.table('t').lockRow('r', { waitMs: 20_000 });
    const waited = Date.now() - started;
    assert.ok(waited >= 300, `the row was handed on after ${waited} ms, before the 400 ms lease`);
    assert.ok(lock.token > grant[1], 'a later grant carries a larger fencing token');
    // The expired session's connection was told and closed.
    const bye = await raw.next((m) => m[0] === 2 && m[1] === 0);
    assert.equal(bye[2], 'SESSION_EXPIRED');
    await raw.whenClosed();
    await lock.close();
  });

  it('releaseOnDisconnect: the locks go the moment the connection closes (conformance V4)', async () => {
    await using server = await startServer();
    await using b = await client(server);
    await b.createTable('t', ['f']);
    const { raw } = await RawClient.session(server.port, {
      sessionLeaseMs: 60_000,
      releaseOnDisconnect: true,
    });
    await raw.call('lockRow', ['t', row('r'), null]);
    const waiting = b.table('t').lockRow('r', { waitMs: 20_000 });
    raw.destroy();
    const started = Date.now();
    const lock = await waiting;
    assert.ok(Date.now() - started < 10_000);
    await lock.close();
  });

  it('a resumed session keeps its locks; a dropped one without resume keeps them only for its lease (conformance V5)', async () => {
    await using server = await startServer();
    await using b = await client(server);
    await b.createTable('t', ['f']);
    const { raw, welcome } = await RawClient.session(server.port, { sessionLeaseMs: 5_000 });
    const [lockId] = (await raw.call('lockRow', ['t', row('r'), null])) as [string];
    raw.destroy();
    // Within the lease, another connection resumes the session, and finds its lock.
    const again = await RawClient.open(server.port);
    again.send([0, 1, { session: welcome.session }]);
    const w = await again.next((m) => m[0] === 0);
    const info = w[2] as { resumed: boolean; locks: [string, string][] };
    assert.equal(info.resumed, true);
    assert.deepEqual(info.locks, [[lockId, 't']]);
    assert.equal(await b.table('t').tryLockRow('r'), null, 'the row is still held');
    assert.equal(await again.call('unlockRow', ['t', lockId]), null);
    const lock = await b.table('t').tryLockRow('r');
    assert.ok(lock !== null);
    await lock.close();
    again.destroy();
  });

  it('a session id that expired cannot be resumed; the connection may open a new session (conformance V5)', async () => {
    await using server = await startServer();
    const { raw, welcome } = await RawClient.session(server.port, { sessionLeaseMs: 200 });
    raw.destroy();
    await sleep(600);
    const again = await RawClient.open(server.port);
    again.send([0, 1, { session: welcome.session }]);
    const refused = await again.next((m) => m[0] === 2);
    assert.equal(refused[2], 'SESSION_EXPIRED');
    again.send([0, 1, {}]);
    const w = await again.next((m) => m[0] === 0);
    assert.notEqual((w[2] as { session: string }).session, welcome.session);
    again.destroy();
  });

  it('closing the client ends the session and releases its locks at once (conformance V6)', async () => {
    await using server = await startServer();
    await using b = await client(server);
    await b.createTable('t', ['f']);
    const a = await client(server, { sessionLeaseMs: 60_000 });
    const lock = await a.table('t').lockRow('r');
    const waiting = b.table('t').lockRow('r', { waitMs: 20_000 });
    await a.close();
    assert.equal(lock.signal.aborted, true);
    await (await waiting).close();
  });

  it('the real client resumes its session after its connection is cut, and keeps its locks', async () => {
    await using server = await startServer();
    await using a = await client(server, { sessionLeaseMs: 5_000 });
    await using b = await client(server);
    await a.createTable('t', ['f']);
    const lock = await a.table('t').lockRow('r');
    const reconnected = new Promise<boolean>((resolve) => a.once('connected', resolve));
    for (const connection of server.connections) {
      if (connection.session?.id === a.session?.id) connection.socket.destroy();
    }
    assert.equal(await reconnected, true, 'the session was resumed');
    assert.equal(lock.signal.aborted, false);
    lock.ensureValid();
    assert.equal(await b.table('t').tryLockRow('r'), null);
    await a.table('t').put(new Put('r', { rowLock: lock }).add('f', 'q', 'after resume'));
    await lock.close();
    const next = await b.table('t').tryLockRow('r');
    assert.ok(next !== null);
    await next.close();
  });

  it('deadlock detection works across sessions: one of two crossing lockers gets DEADLOCK (conformance V7)', async () => {
    await using server = await startServer();
    await using a = await client(server);
    await using b = await client(server);
    await a.createTable('t', ['f']);
    const a1 = await a.table('t').lockRow('r1');
    const b2 = await b.table('t').lockRow('r2');
    const aWants = a.table('t').lockRow('r2', { waitMs: 20_000 });
    await sleep(100);
    await assert.rejects(b.table('t').lockRow('r1', { waitMs: 20_000 }), { code: 'DEADLOCK' });
    await b2.close();
    const a2 = await aWants;
    await a1.close();
    await a2.close();
  });

  it("a lock's lease that runs out is reported to its holder (signal aborted, LEASE_EXPIRED) (conformance V8)", async () => {
    await using server = await startServer({ leasePeriodMs: 300 });
    await using a = await client(server);
    await a.createTable('t', ['f']);
    const lock = await a.table('t').lockRow('r', { renew: false });
    const reason = await new Promise<Error>((resolve) => lock.once('lost', resolve));
    assert.equal((reason as { code?: string }).code, 'LEASE_EXPIRED');
    assert.equal(lock.signal.aborted, true);
    // As in process (HBase's UnknownRowLockException): the id is gone.
    await assert.rejects(a.table('t').put(new Put('r', { rowLock: lock }).add('f', 'q', 'v')), {
      code: 'UNKNOWN_ROW_LOCK',
    });
  });

  it('a lock that renews itself (the default) is held past many lock leases while its session lives, idle or busy', async () => {
    await using server = await startServer({ leasePeriodMs: 200 });
    await using a = await client(server, { sessionLeaseMs: 600 });
    await using b = await client(server);
    await a.createTable('t', ['f']);
    const lock = await a.table('t').lockRow('r');
    const lost: unknown[] = [];
    lock.on('lost', (reason) => lost.push(reason));
    // Idle for five lock leases, then used, then idle again: only the session's heartbeats run.
    await sleep(1_000);
    assert.equal(await b.table('t').tryLockRow('r'), null, 'nobody else can take the row');
    await a.table('t').put(new Put('r', { rowLock: lock }).add('f', 'q', 'a'));
    await sleep(1_000);
    lock.ensureValid();
    assert.equal(lock.signal.aborted, false);
    assert.deepEqual(lost, []);
    const status = server.status();
    const held = status.locks.find((l) => l.row === 'r');
    assert.equal(held?.renews, true, JSON.stringify(status.locks));
    assert.ok(
      held !== undefined && held.leaseRemainingMs > 0 && held.leaseRemainingMs <= 600,
      "a renewing lock shows its session's remaining lease",
    );
    // A waiter gets it the moment it is released, and the release is not a loss.
    const waiting = b.table('t').lockRow('r', { waitMs: 30_000 });
    await sleep(100);
    await lock.close();
    assert.equal(lock.signal.reason?.code, 'ALREADY_CLOSED');
    assert.equal(lock.lostReason, undefined);
    const next = await waiting;
    assert.ok(next.token > lock.token);
    await next.close();
  });

  it('pipelined waits of several sessions interleaved on one row are queueing, not a deadlock (conformance V7)', async () => {
    await using server = await startServer({ rowLockWaitMs: 60_000 });
    await using holder = await client(server);
    await holder.createTable('t', ['f']);
    const lock = await holder.table('t').lockRow('hot');
    const sessions = await Promise.all(Array.from({ length: 5 }, () => client(server)));
    try {
      const waits: Promise<void>[] = [];
      // Queued one at a time, so the row's queue alternates sessions: A B C D E A B C D E ...
      for (let round = 0; round < 4; round++) {
        for (const c of sessions) {
          const before = server.metrics().lockWaiters;
          waits.push(
            c
              .table('t')
              .lockRow('hot')
              .then((l) => l.close()),
          );
          await eventually(() => server.metrics().lockWaiters === before + 1, 5_000, 'the wait');
        }
      }
      await lock.close();
      const outcomes = await Promise.allSettled(waits);
      const failed = outcomes.filter((o) => o.status === 'rejected');
      assert.deepEqual(failed, [], 'no wait failed (no false DEADLOCK)');
    } finally {
      for (const c of sessions) await c.close();
    }
  });

  it('unlockRow releases in one round trip: the handle closes without a second unlock', async () => {
    await using server = await startServer();
    await using a = await client(server);
    await a.createTable('t', ['f']);
    const lock = await a.table('t').lockRow('r');
    await a.table('t').unlockRow(lock);
    assert.equal(lock.closed, true);
    assert.equal(lock.signal.aborted, true);
    await lock.close();
    assert.equal(server.calls.ok.get('unlockRow'), 1);
    assert.equal(server.calls.failed.get('unlockRow') ?? 0, 0);
  });

  it("a lock's close() takes no round trip, and the row is free for the next call at once", async () => {
    await using server = await startServer();
    await using a = await client(server);
    await using b = await client(server);
    await a.createTable('t', ['f']);
    for (let i = 0; i < 50; i++) {
      const lock = await a.table('t').lockRow('r');
      await lock.close();
      // The same client's next call is read after the unlock: it never waits.
      const again = await a.table('t').tryLockRow('r');
      assert.ok(again !== null, `round ${i}: the row was still held after close()`);
      await again.close();
    }
    // And another client gets it too once the unlock has been read.
    await eventually(
      async () => {
        const lock = await b.table('t').tryLockRow('r');
        await lock?.close();
        return lock !== null;
      },
      5_000,
      'the row to be free for another session',
    );
    assert.equal(server.calls.failed.get('unlockRow') ?? 0, 0);
  });

  it("a closed lock's id is refused at once, though its unlock is not answered yet", async () => {
    await using server = await startServer();
    await using a = await client(server);
    await a.createTable('t', ['f']);
    const t = a.table('t');
    for (let i = 0; i < 50; i++) {
      const lock = await t.lockRow('r');
      const id = lock.lockId;
      await lock.close();
      // Sent right behind the unlock on the same connection: the server has read the unlock
      // first, so a use or a second release of the id is refused, never applied.
      const [put, unlock] = await Promise.allSettled([
        t.put(new Put('r', { rowLock: { lockId: id } }).add('f', 'q', String(i))),
        t.unlockRow(id),
      ]);
      for (const outcome of [put, unlock]) {
        assert.equal(outcome.status, 'rejected', `round ${i}`);
        assert.equal((outcome as PromiseRejectedResult).reason.code, 'UNKNOWN_ROW_LOCK');
      }
    }
    assert.equal((await t.get(new Get('r'))).isEmpty, true, 'no put under a closed lock landed');
  });
});
