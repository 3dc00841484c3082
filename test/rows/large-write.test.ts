/**
 * One write never holds the event loop for long, whatever scanners are open:
 * with a scan pinning an old read point, no version of the write can be pruned, and the old
 * memstore walked every version of a column for each of the write's cells (20,000 cells of one
 * column held the loop for 16 s). Each case here is a write of 20,000 cells shaped to hit one
 * per-cell walk; the longest gap between the ticks of a 5 ms timer must stay under a second
 * (the new code takes tens of milliseconds: a wide margin for a busy machine).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Delete, Get, Increment, Put, Region, Scan } from '../../src/rows/index.js';

const CELLS = 20_000;
const STALL_BOUND_MS = 1_000;

/** Runs `work` while a 5 ms timer ticks; returns the longest gap between ticks, in ms. */
async function longestStall(work: () => Promise<void>): Promise<number> {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 5);
  try {
    await work();
    await new Promise((resolve) => setTimeout(resolve, 20));
  } finally {
    clearInterval(timer);
  }
  return Math.max(longest, performance.now() - last);
}

/** A region with one row and a scan left open on it (its read point pinned), for `body`. */
async function withPinnedScan(body: (region: Region) => Promise<void>): Promise<void> {
  const region = await Region.open({ families: [{ name: 'f', maxVersions: 3 }] });
  try {
    await region.put(new Put('r0').add('f', 'q', 'v'));
    const scan = region.scan(new Scan())[Symbol.asyncIterator]();
    assert.equal((await scan.next()).done, false);
    try {
      await body(region);
    } finally {
      await scan.return();
    }
  } finally {
    await region.close();
  }
}

describe('a large write with a scanner open', () => {
  it('many cells of one column at one timestamp: the last added wins', async () => {
    await withPinnedScan(async (region) => {
      const put = new Put('big');
      for (let i = 0; i < CELLS; i++) put.add('f', 'q', `v${i}`);
      const stall = await longestStall(() => region.put(put));
      assert.ok(stall < STALL_BOUND_MS, `longest stall ${stall.toFixed(0)} ms`);
      const got = await region.get(new Get('big'));
      assert.equal(got.cells[0]?.value.toString(), `v${CELLS - 1}`);
    });
  });

  it('many cells of one column, each older than the last: versions newest first', async () => {
    await withPinnedScan(async (region) => {
      const put = new Put('big');
      for (let i = 0; i < CELLS; i++) put.add('f', 'q', `v${i}`, CELLS - i);
      const stall = await longestStall(() => region.put(put));
      assert.ok(stall < STALL_BOUND_MS, `longest stall ${stall.toFixed(0)} ms`);
      const got = await region.get(new Get('big').setMaxVersions(3));
      assert.deepEqual(
        got.cells.map((c) => c.timestamp),
        [CELLS, CELLS - 1, CELLS - 2],
      );
    });
  });

  it('deleting many versions of one column, then reading it', async () => {
    await withPinnedScan(async (region) => {
      const put = new Put('big');
      for (let i = 1; i <= CELLS; i++) put.add('f', 'q', `v${i}`, i);
      await region.put(put);
      const del = new Delete('big');
      for (let i = 3; i <= CELLS; i++) del.deleteColumn('f', 'q', i);
      const stall = await longestStall(async () => {
        await region.delete(del);
        const got = await region.get(new Get('big').setMaxVersions(3));
        assert.deepEqual(
          got.cells.map((c) => c.timestamp),
          [2, 1],
        );
      });
      assert.ok(stall < STALL_BOUND_MS, `longest stall ${stall.toFixed(0)} ms`);
    });
  });

  it('an increment of many columns', async () => {
    await withPinnedScan(async (region) => {
      const inc = new Increment('big');
      for (let i = 0; i < CELLS; i++) inc.addColumn('f', `c${i}`, 1);
      inc.addColumn('f', 'c0', 41);
      const stall = await longestStall(async () => {
        await region.increment(inc);
      });
      assert.ok(stall < STALL_BOUND_MS, `longest stall ${stall.toFixed(0)} ms`);
      const got = await region.get(new Get('big').addColumn('f', 'c0'));
      assert.equal(got.cells[0]?.value.readBigInt64BE(0), 42n);
    });
  });

  it('a call over MAX_CELLS_PER_CALL cells is refused as INVALID_ARGUMENT, nothing written', async () => {
    const region = await Region.open({ families: ['f'] });
    try {
      const put = new Put('over');
      for (let i = 0; i <= 100_000; i++) put.add('f', `q${i}`, 'v');
      await assert.rejects(region.put(put), { code: 'INVALID_ARGUMENT' });
      const many = [new Put('a').add('f', 'q', 'v'), put];
      await assert.rejects(region.mutateRows(many), { code: 'INVALID_ARGUMENT' });
      await assert.rejects(region.batch(many), { code: 'INVALID_ARGUMENT' });
      assert.equal((await region.get(new Get('over'))).cells.length, 0);
      assert.equal((await region.get(new Get('a'))).cells.length, 0);
    } finally {
      await region.close();
    }
  });
});
