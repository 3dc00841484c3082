/**
 * Handlers (HBase's lesson, HBASE-2584): a call waiting for a row lock occupies no handler, so
 * any number of blocked lockers cannot starve other rows' calls, nor the holder's unlockRow
 * (which runs on the priority lane anyway). Nor does a write waiting for its log batch's fsync:
 * a handler held through the fsync would cap each group commit at the number of handlers.
 */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Get, Put, type Region } from '../../src/rows/index.js';
import { rowsInternals } from '../../src/rows/internals.js';
import type { RegionRange } from '../../src/server/table-regions.js';
import { client, startServer } from './server-fixture.js';

describe('server handlers', () => {
  it('1000 lockers blocked on one row hold no handler: other rows and the unlock are served (conformance V9)', async () => {
    await using server = await startServer({ handlers: 2, maxWaitersPerSession: 1_000 });
    await using holder = await client(server);
    await holder.createTable('t', ['f']);
    const lock = await holder.table('t').lockRow('hot');
    const blockers = await Promise.all([0, 1, 2, 3].map(() => client(server)));
    try {
      const waits: Promise<unknown>[] = [];
      for (const [i, c] of blockers.entries()) {
        for (let j = 0; j < 250; j++) {
          const t = c.table('t');
          // Half wait for an explicit lock, half for the implicit lock of a put.
          waits.push(
            j % 2 === 0
              ? t.lockRow('hot', { waitMs: 60_000 }).then((l) => l.close())
              : t.put(new Put('hot').add('f', `c${i}`, String(j)), { waitMs: 60_000 }),
          );
        }
      }
      const deadline = Date.now() + 30_000;
      while (server.lanes.handler.parked < 1000) {
        assert.ok(Date.now() < deadline, `only ${server.lanes.handler.parked} calls parked`);
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal(server.lanes.handler.busy, 0, 'no handler is held by a waiting call');
      // Another client's calls on other rows go through while the thousand wait.
      await using other = await client(server);
      for (let i = 0; i < 50; i++) {
        await other.table('t').put(new Put(`cold${i}`).add('f', 'q', 'v'));
        assert.equal(
          (await other.table('t').get(new Get(`cold${i}`))).getValue('f', 'q')?.toString(),
          'v',
        );
      }
      assert.equal(server.lanes.handler.parked, 1000);
      // The holder's unlock is served at once, and the thousand then run one after another.
      await lock.close();
      await Promise.all(waits);
      assert.equal(server.lanes.handler.parked, 0);
    } finally {
      for (const c of blockers) await c.close();
    }
  });

  it('a write waiting for its fsync holds no handler: one handler, 64 pipelined puts, group-committed together', async () => {
    await using server = await startServer({ handlers: 1, durability: 'fsync' });
    await using c = await client(server);
    await c.createTable('t', ['f']);
    const stats = () =>
      ((server.catalog.regions('t').ranges()[0] as RegionRange).region as Region)[rowsInternals]
        .storageStats as {
        records: number;
        batches: number;
      };
    const before = stats();
    const table = c.table('t');
    await Promise.all(
      Array.from({ length: 64 }, (_, i) => table.put(new Put(`r${i}`).add('f', 'q', String(i)))),
    );
    const after = stats();
    assert.equal(after.records - before.records, 64);
    // Holding the only handler through its fsync, each put made a batch of its own (64); the
    // puts of one read of the socket now share a batch.
    const batches = after.batches - before.batches;
    assert.ok(batches <= 32, `64 puts took ${batches} log batches: puts waited for a handler`);
    for (let i = 0; i < 64; i += 21) {
      assert.equal((await table.get(new Get(`r${i}`))).getValue('f', 'q')?.toString(), String(i));
    }
    assert.equal(server.lanes.handler.parked, 0);
    assert.equal(server.lanes.handler.busy, 0);
  });
});
