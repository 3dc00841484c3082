/**
 * `GET /status` and `GET /metrics`: what an operator sees (tables, sessions, held locks with
 * their owner and lease remaining, waiters, handler use, calls), read-only, and behind the token
 * when the server has one.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Put } from '../../src/rows/index.js';
import { eventually } from '../helpers.js';
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
    assert.ok((held?.leaseRemainingMs ?? 0) > 0 && (held?.leaseRemainingMs ?? 0) <= 60_000);
    assert.equal(status.handlers.handler.size, 10);
    await lock.close();
    await (await waiting).close();
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
});
