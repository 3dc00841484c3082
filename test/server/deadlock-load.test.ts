/**
 * Deadlock detection over the wire, under load: many sessions, each with many calls in flight
 * on a few hot rows. A single-row call holds its implicit lock for that call only and waits for
 * nothing while it holds it, so no set of single-row calls (nor multi-row calls, which take
 * their rows in byte order) can deadlock, however a session pipelines them: none may fail with
 * DEADLOCK. Real cycles (explicit locks of different sessions, a multi-row call holding rows)
 * are still caught.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { LocksmithClient } from '../../src/client/locksmith-client.js';
import { Delete, Get, Increment, Put, RowMutations } from '../../src/rows/index.js';
import type { ServerStatus } from '../../src/server/server-status.js';
import { sleep } from '../helpers.js';
import { client, startServer } from './server-fixture.js';

const ROWS = ['x', 'y', 'z'];
const KINDS = [
  'put',
  'delete',
  'checkAndPut',
  'checkAndDelete',
  'increment',
  'incrementColumnValue',
  'mutateRow',
  'batch',
  'mutateRows',
] as const;
type Kind = (typeof KINDS)[number];

/** One call of `kind` on `row` (and on the next hot row for the calls that take several). */
async function call(c: LocksmithClient, kind: Kind, row: string, n: number): Promise<number> {
  const t = c.table('t');
  const other = ROWS[(ROWS.indexOf(row) + 1) % ROWS.length] as string;
  switch (kind) {
    case 'put':
      await t.put(new Put(row).add('f', 'v', `p${n}`));
      return 0;
    case 'delete':
      await t.delete(new Delete(row).deleteColumns('f', 'v'));
      return 0;
    case 'checkAndPut':
      await t.checkAndPut(row, 'f', 'none', null, new Put(row).add('f', 'v', `c${n}`));
      return 0;
    case 'checkAndDelete':
      await t.checkAndDelete(row, 'f', 'none', null, new Delete(row).deleteColumns('f', 'w'));
      return 0;
    case 'increment':
      await t.increment(new Increment(row).addColumn('f', 'n', 1));
      return 1;
    case 'incrementColumnValue':
      await t.incrementColumnValue(row, 'f', 'n', 1);
      return 1;
    case 'mutateRow':
      await t.mutateRow(
        new RowMutations(row)
          .add(new Put(row).add('f', 'v', `m${n}`))
          .add(new Delete(row).deleteColumns('f', 'w')),
      );
      return 0;
    case 'batch': {
      const statuses = await t.batch([
        new Put(row).add('f', 'v', `b${n}`),
        new Put(other).add('f', 'v', `b${n}`),
      ]);
      for (const s of statuses) if (!s.ok) throw s.error;
      return 0;
    }
    case 'mutateRows':
      await t.mutateRows([
        new Put(row).add('f', 'v', `r${n}`),
        new Put(other).add('f', 'w', `r${n}`),
      ]);
      return 0;
  }
}

describe('deadlock detection under load', () => {
  it('thousands of pipelined single-row and multi-row calls from many sessions: zero DEADLOCK, nothing lost', async () => {
    // Durable writes keep each implicit lock across an fsync, so calls really queue on the rows.
    await using server = await startServer({ durability: 'fsync', rowLockWaitMs: 120_000 });
    const sessions: LocksmithClient[] = [];
    for (let i = 0; i < 8; i++) sessions.push(await client(server));
    try {
      await (sessions[0] as LocksmithClient).createTable('t', ['f']);
      const perSession = 400;
      const inFlight = 6;
      const failures = new Map<string, number>();
      const increments = new Map<string, number>(ROWS.map((r) => [r, 0]));
      let done = 0;
      await Promise.all(
        sessions.map(async (c, s) => {
          let next = 0;
          const lane = async (l: number) => {
            for (let n = next++; n < perSession; n = next++) {
              const kind = KINDS[(n + s + l) % KINDS.length] as Kind;
              const row = ROWS[(n * 7 + s) % ROWS.length] as string;
              try {
                const added = await call(c, kind, row, n);
                increments.set(row, (increments.get(row) ?? 0) + added);
                done++;
              } catch (err) {
                const code = (err as { code?: string }).code ?? String(err);
                failures.set(`${kind}: ${code}`, (failures.get(`${kind}: ${code}`) ?? 0) + 1);
              }
            }
          };
          await Promise.all(Array.from({ length: inFlight }, (_, l) => lane(l)));
        }),
      );
      assert.deepEqual(Object.fromEntries(failures), {}, 'no call failed (no false DEADLOCK)');
      assert.equal(done, sessions.length * perSession);
      assert.equal(server.status().deadlocks.detected, 0);
      // Safety: every acknowledged increment counted exactly once.
      const t = (sessions[0] as LocksmithClient).table('t');
      for (const row of ROWS) {
        const value = (await t.get(new Get(row).addColumn('f', 'n'))).getValue('f', 'n');
        const counted = value === undefined ? 0 : Number(value.readBigInt64BE(0));
        assert.equal(counted, increments.get(row), `counter of ${row}`);
      }
    } finally {
      for (const c of sessions) await c.close();
    }
  });

  it('a real cycle across sessions is still caught: explicit locks and single-row calls', async () => {
    await using server = await startServer({ rowLockWaitMs: 60_000 });
    await using a = await client(server);
    await using b = await client(server);
    await a.createTable('t', ['f']);
    const a1 = await a.table('t').lockRow('r1');
    const b2 = await b.table('t').lockRow('r2');
    // a holds r1 and puts r2 (its session keeps r1 until the put returns) ...
    const aPut = a.table('t').put(new Put('r2').add('f', 'q', 'a'));
    await waitForWaiters(server, 1);
    // ... b holds r2 and puts r1: the cycle a -> b -> a; the request closing it gives up.
    await assert.rejects(b.table('t').put(new Put('r1').add('f', 'q', 'b')), { code: 'DEADLOCK' });
    await b2.close();
    await aPut;
    await a1.close();
  });

  it('a real cycle through a multi-row call is still caught', async () => {
    await using server = await startServer({ rowLockWaitMs: 60_000 });
    await using a = await client(server);
    await using b = await client(server);
    await a.createTable('t', ['f']);
    const b3 = await b.table('t').lockRow('r3');
    // a's call takes r1, then waits for r3 (held by b): the call holds r1 while it waits.
    const aRows = a
      .table('t')
      .mutateRows([new Put('r1').add('f', 'q', 'a'), new Put('r3').add('f', 'q', 'a')]);
    await waitForWaiters(server, 1);
    // b holds r3 and asks for r1: b -> a's call -> b.
    await assert.rejects(b.table('t').lockRow('r1'), { code: 'DEADLOCK' });
    await b3.close();
    await aRows;
    const got = await b.table('t').get(new Get('r1'));
    assert.equal(got.getValue('f', 'q')?.toString(), 'a');
  });
});

/** Waits until `n` calls (explicit or implicit) wait for a row, as the server's status counts them. */
async function waitForWaiters(server: { status(): ServerStatus }, n: number): Promise<void> {
  const waiting = () => server.status().waiting;
  for (let i = 0; i < 1000 && waiting() !== n; i++) await sleep(10);
  assert.equal(waiting(), n, 'the wait is queued');
}
