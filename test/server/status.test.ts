/**
 * `GET /status` and `GET /metrics`: what an operator sees (tables, sessions, held locks with
 * their owner and lease remaining, waiters, handler use, calls), read-only, and behind the token
 * when the server has one; its lists stay bounded however many sessions and locks there are.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Delete, Put } from '../../src/rows/index.js';
import { LOCKS_LISTED, SESSIONS_LISTED, Shortlist } from '../../src/server/status-lists.js';
import { eventually, sleep } from '../helpers.js';
import { RawClient } from './raw-client.js';
import { client, startServer } from './server-fixture.js';

async function http(port: number, path: string, init: RequestInit = {}) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, init);
  return {
    status: res.status,
    type: res.headers.get('content-type') ?? '',
    body: await res.text(),
  };
}

describe('server status and metrics', () => {
  it('status shows tables, sessions, held locks with owner and lease remaining, waiters, handlers', async () => {
    await using server = await startServer({ httpPort: 0, leasePeriodMs: 60_000 });
    const port = server.httpPort as number;
    await using a = await client(server, { name: 'holder' });
    await using b = await client(server, { name: 'waiter' });
    await a.createTable('t', ['f']);
    await a.table('t').put(new Put('r').add('f', 'q', 'v'));
    const lock = await a.table('t').lockRow('r');
    const waiting = b.table('t').lockRow('r', { waitMs: 30_000 });
    await eventually(() => server.metrics().lockWaiters === 1, 5_000, 'the waiter');
    const res = await http(port, '/status');
    assert.equal(res.status, 200);
    assert.match(res.type, /application\/json/);
    const status = JSON.parse(res.body) as {
      tables: { name: string; rows: number }[];
      sessions: { client: string; locks: number; waiting: number }[];
      locks: {
        table: string;
        row: string;
        client: string;
        token: number;
        leaseRemainingMs: number;
        renews: boolean;
      }[];
      handlers: { handler: { size: number } };
    };
    assert.deepEqual(
      status.tables.map((t) => [t.name, t.rows]),
      [['t', 1]],
    );
    const holder = status.sessions.find((s) => s.client === 'holder');
    const waiter = status.sessions.find((s) => s.client === 'waiter');
    assert.equal(holder?.locks, 1);
    assert.equal(waiter?.waiting, 1);
    assert.equal(status.locks.length, 1);
    const [held] = status.locks;
    assert.equal(held?.table, 't');
    assert.equal(held?.client, 'holder');
    assert.equal(held?.token, lock.token);
    // The lock renews itself (the default): what is left of it is what is left of its session.
    assert.equal(held?.renews, true);
    assert.ok((held?.leaseRemainingMs ?? 0) > 0 && (held?.leaseRemainingMs ?? 0) <= 10_000);
    assert.equal(status.handlers.handler.size, 10);
    await lock.close();
    await (await waiting).close();
  });

  it('every wait counts the same everywhere: a blocked put, delete, checkAndPut and a lockRow, in /status, each session and /metrics', async () => {
    await using server = await startServer({ httpPort: 0 });
    await using a = await client(server, { name: 'holder' });
    await using b = await client(server, { name: 'writer' });
    await using c = await client(server, { name: 'locker' });
    await a.createTable('t', ['f']);
    const lock = await a.table('t').lockRow('r');
    const blocked = [
      b.table('t').put(new Put('r').add('f', 'q', 'b'), { waitMs: 30_000 }),
      b.table('t').delete(new Delete('r'), { waitMs: 30_000 }),
      b.table('t').checkAndPut('r', 'f', 'q', null, new Put('r').add('f', 'q', 'c'), {
        waitMs: 30_000,
      }),
      c.table('t').lockRow('r', { waitMs: 30_000 }),
    ];
    await eventually(() => server.status().waiting === 4, 10_000, 'the four waits');
    const status = JSON.parse((await http(server.httpPort as number, '/status')).body) as {
      waiting: number;
      waits: { explicit: boolean; waiter: { client: string } }[];
      sessions: { client: string; waiting: number }[];
    };
    assert.equal(status.waiting, 4);
    assert.deepEqual(status.waits.map((w) => [w.waiter.client, w.explicit]).sort(), [
      ['locker', true],
      ['writer', false],
      ['writer', false],
      ['writer', false],
    ]);
    const waitingOf = (name: string) => status.sessions.find((s) => s.client === name)?.waiting;
    assert.equal(waitingOf('writer'), 3, 'the implicit locks of blocked mutations count');
    assert.equal(waitingOf('locker'), 1);
    assert.equal(waitingOf('holder'), 0);
    const metrics = (await http(server.httpPort as number, '/metrics')).body;
    assert.match(metrics, /^locksmith_row_lock_waiters 4$/m);
    await lock.close();
    const [, , , next] = await Promise.all(blocked);
    await (next as { close(): Promise<void> }).close();
    assert.equal(server.status().waiting, 0);
    assert.equal(server.metrics().lockWaiters, 0);
    assert.ok(server.status().sessions.every((s) => s.waiting === 0));
  });

  it('metrics are Prometheus text: sessions, locks, waiters, lanes, calls by method', async () => {
    await using server = await startServer({ httpPort: 0 });
    await using a = await client(server);
    await a.createTable('t', ['f']);
    const lock = await a.table('t').lockRow('r');
    const res = await http(server.httpPort as number, '/metrics');
    assert.equal(res.status, 200);
    assert.match(res.type, /text\/plain/);
    assert.match(res.body, /^locksmith_sessions 1$/m);
    assert.match(res.body, /^locksmith_row_locks_held 1$/m);
    assert.match(res.body, /^locksmith_handlers\{lane="handler"\} 10$/m);
    assert.match(res.body, /^locksmith_calls_total\{method="lockRow",outcome="ok"\} 1$/m);
    await lock.close();
  });

  it('is read-only, and needs the token when the server has one', async () => {
    await using server = await startServer({ httpPort: 0, token: 'tok-123' });
    const port = server.httpPort as number;
    assert.equal((await http(port, '/status')).status, 401);
    assert.equal(
      (await http(port, '/metrics', { headers: { authorization: 'Bearer nope' } })).status,
      401,
    );
    const ok = await http(port, '/status', { headers: { authorization: 'Bearer tok-123' } });
    assert.equal(ok.status, 200);
    assert.equal(
      (
        await http(port, '/status', {
          method: 'POST',
          headers: { authorization: 'Bearer tok-123' },
        })
      ).status,
      405,
    );
    assert.equal(
      (await http(port, '/nothing', { headers: { authorization: 'Bearer tok-123' } })).status,
      404,
    );
  });

  it('lists at most SESSIONS_LISTED sessions (most locks, then oldest) and LOCKS_LISTED locks (least lease left), and counts all', async () => {
    await using server = await startServer({ leasePeriodMs: 60_000 });
    await using admin = await client(server, { name: 'admin' });
    await admin.createTable('t', ['f']);
    const n = Math.max(SESSIONS_LISTED, LOCKS_LISTED) + 15;
    const raws: RawClient[] = [];
    try {
      for (let i = 0; i < n; i++) {
        raws.push((await RawClient.session(server.port, { client: `s${i}` })).raw);
      }
      const lock = (i: number, row: string) =>
        (raws[i] as RawClient).call('lockRow', ['t', Buffer.from(row), null]);
      // The first LOCKS_LISTED grants are older by far than the rest: theirs is the least lease left.
      for (let i = 0; i < LOCKS_LISTED; i++) await lock(i, `r${i}`);
      await sleep(100);
      for (let i = LOCKS_LISTED; i < n; i++) await lock(i, `r${i}`);
      await lock(n - 1, 'x1');
      await lock(n - 1, 'x2');
      await lock(100, 'y');

      const status = server.status() as {
        sessions: { client: string; locks: number; ageMs: number }[];
        sessionsOpen: number;
        locks: { row: string; client: string; leaseRemainingMs: number }[];
        locksHeld: number;
      };
      assert.equal(status.sessionsOpen, n + 1);
      assert.equal(status.locksHeld, n + 3);
      assert.equal(server.metrics().locksHeld, n + 3);

      // Sessions: most locks first, then the oldest (ties by opening order); the rest are cut.
      const ones = Array.from({ length: n - 1 }, (_, i) => `s${i}`).filter((c) => c !== 's100');
      assert.deepEqual(
        status.sessions.map((s) => s.client),
        [`s${n - 1}`, 's100', ...ones].slice(0, SESSIONS_LISTED),
      );
      assert.deepEqual(
        status.sessions.slice(0, 3).map((s) => s.locks),
        [3, 2, 1],
      );

      // Locks: the LOCKS_LISTED oldest grants, least lease left first.
      assert.equal(status.locks.length, LOCKS_LISTED);
      assert.deepEqual(
        status.locks.map((l) => l.row).sort(),
        Array.from({ length: LOCKS_LISTED }, (_, i) => `r${i}`).sort(),
      );
      for (const l of status.locks) assert.equal(l.client, l.row.replace('r', 's'));
      const left = status.locks.map((l) => l.leaseRemainingMs);
      assert.deepEqual(
        left,
        [...left].sort((a, b) => a - b),
      );
      assert.ok((left[0] ?? 0) > 0 && (left.at(-1) ?? 0) <= 60_000);
    } finally {
      for (const raw of raws) raw.destroy();
    }
  });

  it('Shortlist keeps the first entries in order, ties in the order offered', () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (const [count, limit] of [
      [0, 3],
      [5, 0],
      [5, 10],
      [50, 1],
      [200, 7],
      [1000, 100],
    ] as const) {
      const items = Array.from({ length: count }, (_, i) => ({
        key: Math.floor(random() * 20),
        i,
      }));
      const list = new Shortlist<{ key: number; i: number }>(limit, (a, b) => a.key - b.key);
      for (const item of items) list.offer(item);
      const expected = [...items].sort((a, b) => a.key - b.key || a.i - b.i).slice(0, limit);
      assert.deepEqual(list.list(), expected, `${count} items, limit ${limit}`);
    }
  });
});
