/**
 * Every client call takes an AbortSignal and a timeout; aborting a lock wait cancels it on the
 * server (the row is not granted to a caller who gave up, or is given back at once).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { eventually } from '../helpers.js';
import { client, startServer } from './server-fixture.js';

describe('client calls: signals and timeouts', () => {
  it('an aborted lock wait is cancelled on the server; the row goes to the next waiter', async () => {
    await using server = await startServer();
    await using a = await client(server);
    await using b = await client(server);
    await using c = await client(server);
    await a.createTable('t', ['f']);
    const held = await a.table('t').lockRow('r');
    const controller = new AbortController();
    const gaveUp = b.table('t').lockRow('r', { signal: controller.signal, waitMs: 60_000 });
    const next = c.table('t').lockRow('r', { waitMs: 60_000 });
    await eventually(() => server.metrics().lockWaiters === 2, 5_000, 'two waiters');
    controller.abort();
    await assert.rejects(gaveUp, { code: 'ABORTED' });
    await eventually(
      () => server.metrics().lockWaiters === 1,
      5_000,
      'the cancelled wait to leave the server',
    );
    await held.close();
    const lock = await next;
    assert.ok(lock.token > held.token);
    assert.equal(b.heldLocks, 0);
    await lock.close();
  });

  it('a lock granted just as its caller gave up is given back', async () => {
    await using server = await startServer();
    await using a = await client(server);
    await a.createTable('t', ['f']);
    for (let i = 0; i < 20; i++) {
      const controller = new AbortController();
      const call = a.table('t').lockRow(`r${i}`, { signal: controller.signal });
      queueMicrotask(() => controller.abort());
      await call.then(
        (lock) => lock.close(),
        (err: { code?: string }) => assert.equal(err.code, 'ABORTED'),
      );
    }
    await eventually(() => server.metrics().locksHeld === 0, 5_000, 'every lock given back');
  });

  it('administrative calls take a signal and a timeout, and check them', async () => {
    await using server = await startServer();
    await using a = await client(server);
    await assert.rejects(a.listTables({ signal: AbortSignal.abort() }), { code: 'ABORTED' });
    await assert.rejects(a.status({ timeoutMs: -1 }), { code: 'INVALID_ARGUMENT' });
    await assert.rejects(a.ping({ nope: 1 } as never), { code: 'INVALID_ARGUMENT' });
    await assert.rejects(a.listTables({ signal: new AbortController() as never }), {
      code: 'INVALID_ARGUMENT',
    });
    assert.deepEqual(await a.listTables({ timeoutMs: 5_000 }), []);
  });
});
