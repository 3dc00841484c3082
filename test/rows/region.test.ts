import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../src/core/clock.js';
import {
  type Cell,
  Delete,
  formatCell,
  Get,
  Increment,
  Put,
  Region,
  type RegionOptions,
  RowMutations,
  Scan,
} from '../../src/rows/index.js';
import { rowsInternals } from '../../src/rows/internals.js';
import { sleep, tempDir } from '../helpers.js';
import { type TableOptions, type TableUnderTest, tableVariants } from './table-variants.js';

/** In-process only (FakeClock, `owner`, `dir`, Region.open's options): a Region itself. */
const open = (options: Partial<RegionOptions> = {}) =>
  Region.open({ families: ['colfam1', 'colfam2'], ...options });

const values = (cells: readonly Cell[]) => cells.map((c) => c.value.toString());

// The Table contract: every suite in this loop runs against an in-process Region and against
// a RemoteTable on an in-process server, with the same results, errors and codes. Hooks on
// the rows themselves (rowsInternals, readPoint, flush) go to `region.backing`.
for (const variant of tableVariants) {
  const open = (options: TableOptions = {}) =>
    variant.open({ families: ['colfam1', 'colfam2'], ...options });

  describe(`${variant.name}: cells, versions and the 0.90 text form${variant.remote ? ' (conformance V16)' : ''}`, () => {
    it('keeps 3 versions per column by default, returns 1 unless asked, newest first (conformance R19)', async () => {
      await using region = await open();
      for (const v of ['a', 'b', 'c', 'd']) {
        await region.put(new Put('r').add('colfam1', 'q', v));
      }
      assert.deepEqual(values((await region.get(new Get('r'))).cells), ['d']);
      const all = (await region.get(new Get('r').setMaxVersions())).cells;
      assert.deepEqual(values(all), ['d', 'c', 'b']);
      assert.ok(all.every((c, i) => i === 0 || (all[i - 1] as Cell).timestamp > c.timestamp));
      assert.deepEqual(values((await region.get(new Get('r').setMaxVersions(2))).cells), [
        'd',
        'c',
      ]);
      assert.throws(() => new Get('r').setMaxVersions(0), { code: 'INVALID_ARGUMENT' });
    });

    it('honours a family maxVersions of 1 (modern HBase) and explicit timestamps (conformance R19)', async () => {
      await using region = await variant.open({ families: [{ name: 'f', maxVersions: 1 }] });
      await region.put(new Put('r').add('f', 'q', 'old', 100));
      await region.put(new Put('r').add('f', 'q', 'new', 200));
      await region.put(new Put('r').add('f', 'q', 'older', 50));
      assert.deepEqual(values((await region.get(new Get('r').setMaxVersions())).cells), ['new']);
    });

    it('at equal timestamps the newer write wins (conformance R19)', async () => {
      await using region = await open();
      await region.put(new Put('r').add('colfam1', 'q', 'first', 1000));
      await region.put(new Put('r').add('colfam1', 'q', 'second', 1000));
      const cells = (await region.get(new Get('r').setMaxVersions())).cells;
      assert.deepEqual(values(cells), ['second']);
    });

    it('prints cells exactly as HBase 0.90 KeyValue.toString', async () => {
      await using region = await open();
      await region.put(new Put('row1').add('colfam1', 'qual1', 'val1', 1300775520118));
      await region.put(new Put(Buffer.from([0x72, 0x00, 0xff])).add('colfam2', 'q\n', 'v', 7));
      const [cell] = (await region.get(new Get('row1'))).cells;
      assert.equal(formatCell(cell as Cell), 'row1/colfam1:qual1/1300775520118/Put/vlen=4');
      const [binary] = (await region.get(new Get(Buffer.from([0x72, 0x00, 0xff])))).cells;
      assert.equal(formatCell(binary as Cell), 'r\\x00\\xFF/colfam2:q\\x0A/7/Put/vlen=1');
    });

    it('selects families, columns and time ranges; results sorted by family then qualifier', async () => {
      await using region = await open();
      const put = new Put('r');
      put.add('colfam2', 'b', '2b', 10).add('colfam1', 'b', '1b', 10).add('colfam1', 'a', '1a', 20);
      await region.put(put);
      const all = (await region.get(new Get('r'))).cells.map((c) => `${c.family}:${c.qualifier}`);
      assert.deepEqual(all, ['colfam1:a', 'colfam1:b', 'colfam2:b']);
      const fam = await region.get(new Get('r').addFamily('colfam2'));
      assert.deepEqual(values(fam.cells), ['2b']);
      const col = await region.get(new Get('r').addColumn('colfam1', 'b'));
      assert.deepEqual(values(col.cells), ['1b']);
      const ranged = await region.get(new Get('r').setTimeRange(15, 25));
      assert.deepEqual(values(ranged.cells), ['1a']);
      assert.equal((await region.get(new Get('nope'))).isEmpty, true);
    });
  });

  describe(`${variant.name}: deletes with HBase semantics${variant.remote ? ' (conformance V16)' : ''}`, () => {
    it('deleteColumn hides the newest version only; deleteColumns every version at or before', async () => {
      await using region = await open();
      for (const [v, ts] of [
        ['a', 10],
        ['b', 20],
        ['c', 30],
      ] as const) {
        await region.put(new Put('r').add('colfam1', 'q', v, ts));
      }
      await region.delete(new Delete('r').deleteColumn('colfam1', 'q'));
      assert.deepEqual(values((await region.get(new Get('r').setMaxVersions())).cells), ['b', 'a']);
      await region.delete(new Delete('r').deleteColumns('colfam1', 'q', 15));
      assert.deepEqual(values((await region.get(new Get('r').setMaxVersions())).cells), ['b']);
    });

    it('markers also hide puts that arrive later with an older timestamp, not newer ones', async () => {
      await using region = await open();
      await region.delete(new Delete('r').deleteFamily('colfam1', 100));
      await region.put(
        new Put('r').add('colfam1', 'q', 'hidden', 99).add('colfam2', 'q', 'other', 99),
      );
      assert.deepEqual(values((await region.get(new Get('r'))).cells), ['other']);
      await region.put(new Put('r').add('colfam1', 'q', 'shown', 101));
      assert.deepEqual(values((await region.get(new Get('r'))).cells), ['shown', 'other']);
    });

    it('a Delete with no entries removes the whole row; a later write shows again', async () => {
      await using region = await open();
      await region.put(new Put('r').add('colfam1', 'a', '1').add('colfam2', 'b', '2'));
      await sleep(2);
      await region.delete(new Delete('r'));
      assert.equal((await region.get(new Get('r'))).isEmpty, true);
      await sleep(2);
      await region.put(new Put('r').add('colfam1', 'a', '3'));
      assert.deepEqual(values((await region.get(new Get('r'))).cells), ['3']);
    });
  });

  describe(`${variant.name}: check-and-set, increments, mutateRow${variant.remote ? ' (conformance V16)' : ''}`, () => {
    it('checkAndPut: null and empty expected values match a missing cell only (conformance R15)', async () => {
      await using region = await open();
      const put = (v: string) => new Put('r').add('colfam1', 'q', v);
      assert.equal(await region.checkAndPut('r', 'colfam1', 'q', null, put('1')), true);
      assert.equal(await region.checkAndPut('r', 'colfam1', 'q', null, put('x')), false);
      assert.equal(await region.checkAndPut('r', 'colfam1', 'q', '', put('x')), false);
      assert.equal(await region.checkAndPut('r', 'colfam1', 'q', '2', put('x')), false);
      assert.equal(await region.checkAndPut('r', 'colfam1', 'q', '1', put('2')), true);
      assert.deepEqual(values((await region.get(new Get('r'))).cells), ['2']);
      await assert.rejects(region.checkAndPut('other', 'colfam1', 'q', null, put('x')), {
        code: 'INVALID_ARGUMENT',
      });
      assert.equal(await region.checkAndDelete('r', 'colfam1', 'q', '1', new Delete('r')), false);
      assert.equal(await region.checkAndDelete('r', 'colfam1', 'q', '2', new Delete('r')), true);
      assert.equal((await region.get(new Get('r'))).isEmpty, true);
    });

    it('concurrent check-and-set loops never lose an update (conformance R15)', async () => {
      await using region = await open();
      await region.put(new Put('c').add('colfam1', 'n', '0'));
      const worker = async () => {
        for (let done = 0; done < 50; ) {
          const current =
            (await region.get(new Get('c'))).getValue('colfam1', 'n')?.toString() ?? '';
          const next = String(Number(current) + 1);
          if (
            await region.checkAndPut(
              'c',
              'colfam1',
              'n',
              current,
              new Put('c').add('colfam1', 'n', next),
            )
          )
            done++;
        }
      };
      await Promise.all([worker(), worker(), worker(), worker()]);
      assert.equal((await region.get(new Get('c'))).getValue('colfam1', 'n')?.toString(), '200');
    });

    it('K concurrent increments sum exactly and a reader never sees the counter go down (conformance R16)', async () => {
      await using region = await open();
      let last = -1n;
      let stop = false;
      const reader = (async () => {
        while (!stop) {
          const v = (await region.get(new Get('n'))).getValue('colfam1', 'c');
          const n = v === undefined ? 0n : v.readBigInt64BE(0);
          assert.ok(n >= last, `counter went down from ${last} to ${n}`);
          last = n;
          await new Promise((r) => setImmediate(r));
        }
      })();
      await Promise.all(
        Array.from({ length: 20 }, async () => {
          for (let i = 0; i < 25; i++) await region.incrementColumnValue('n', 'colfam1', 'c', 1);
        }),
      );
      stop = true;
      await reader;
      assert.equal(await region.incrementColumnValue('n', 'colfam1', 'c', 0), 500n);
      const multi = await region.increment(
        new Increment('n').addColumn('colfam1', 'c', 5).addColumn('colfam2', 'd', -3n),
      );
      assert.deepEqual(
        multi.cells.map((c) => c.value.readBigInt64BE(0)),
        [505n, -3n],
      );
    });

    it('rejects incrementing a value that is not 8 bytes, and writes nothing', async () => {
      await using region = await open();
      await region.put(new Put('r').add('colfam1', 'q', 'abc'));
      await assert.rejects(region.incrementColumnValue('r', 'colfam1', 'q', 1), {
        code: 'INVALID_ARGUMENT',
        message: /64 bits/,
      });
      assert.deepEqual(values((await region.get(new Get('r').setMaxVersions())).cells), ['abc']);
    });

    it('an increment on a row the caller locked runs under that lock instead of deadlocking (conformance R21)', async () => {
      await using region = await open();
      const lock = await region.lockRow('r');
      const inc = new Increment('r', { rowLock: lock }).addColumn('colfam1', 'c', 2);
      const result = await region.increment(inc);
      assert.equal(result.cells[0]?.value.readBigInt64BE(0), 2n);
      assert.equal(
        await region.incrementColumnValue('r', 'colfam1', 'c', 1, { rowLock: lock }),
        3n,
      );
      await region.unlockRow(lock);
    });

    it('mutateRow swaps a put and a delete atomically: readers always see exactly one cell (conformance R17)', async () => {
      await using region = await open();
      await region.put(new Put('r').add('colfam1', 'q1', 'v'));
      region.backing[rowsInternals].insertYield = () => new Promise((r) => setImmediate(r));
      let stop = false;
      let reads = 0;
      const reader = (async () => {
        while (!stop) {
          const cells = (await region.get(new Get('r'))).cells;
          assert.equal(cells.length, 1, `saw ${cells.map(formatCell).join(', ')}`);
          reads++;
          await new Promise((r) => setImmediate(r));
        }
      })();
      for (let i = 0; i < 100; i++) {
        const [from, to] = i % 2 === 0 ? ['q1', 'q2'] : ['q2', 'q1'];
        const swap = new RowMutations('r')
          .add(new Put('r').add('colfam1', to, 'v'))
          .add(new Delete('r').deleteColumns('colfam1', from));
        await region.mutateRow(swap);
      }
      stop = true;
      await reader;
      assert.ok(reads > 50, `only ${reads} reads overlapped the writes`);
    });
  });

  describe(`${variant.name}: row locks around operations${variant.remote ? ' (conformance V16)' : ''}`, () => {
    it('an unlocked put waits for an explicit lock; puts with the lock go through; get never waits (conformance R11)', async () => {
      await using region = await open();
      const lock = await region.lockRow('row1');
      let blockedDone = false;
      const blocked = region.put(new Put('row1').add('colfam1', 'q', 'val3')).then(() => {
        blockedDone = true;
      });
      await sleep(50);
      assert.equal(blockedDone, false);
      await region.put(new Put('row1', { rowLock: lock }).add('colfam1', 'q', 'val1'));
      const seen = await region.get(new Get('row1'));
      assert.deepEqual(values(seen.cells), ['val1']);
      assert.equal(blockedDone, false);
      await region.unlockRow(lock);
      await blocked;
      assert.deepEqual(values((await region.get(new Get('row1'))).cells), ['val3']);
    });

    it('await using unlocks at scope exit, and is a no-op after an explicit unlock', async () => {
      await using region = await open();
      {
        await using lock = await region.lockRow('r');
        assert.equal(await region.tryLockRow('r'), null);
        assert.ok(lock.lockId);
      }
      const again = await region.tryLockRow('r');
      assert.ok(again, 'the scope exit must have unlocked the row');
      await region.unlockRow(again);
      await again[Symbol.asyncDispose]();
      assert.ok(await region.tryLockRow('r'));
    });

    it('a lock id used on another row, after unlock, or made up fails with UNKNOWN_ROW_LOCK', async () => {
      await using region = await open();
      const lock = await region.lockRow('a');
      await assert.rejects(region.put(new Put('b', { rowLock: lock }).add('colfam1', 'q', 'x')), {
        code: 'UNKNOWN_ROW_LOCK',
      });
      await assert.rejects(region.get(new Get('b', lock)), { code: 'UNKNOWN_ROW_LOCK' });
      await region.unlockRow(lock);
      await assert.rejects(region.put(new Put('a', { rowLock: lock }).add('colfam1', 'q', 'x')), {
        code: 'UNKNOWN_ROW_LOCK',
      });
      await assert.rejects(region.unlockRow(lock), { code: 'UNKNOWN_ROW_LOCK' });
      await assert.rejects(region.unlockRow({ ...lock, lockId: 'ffffffffffffffff' }), {
        code: 'UNKNOWN_ROW_LOCK',
      });
      assert.equal((await region.get(new Get('b'))).isEmpty, true);
    });

    it('tryLockRow returns null on a locked row; wait timeout and abort give up cleanly', async () => {
      await using region = await open({ rowLockWaitMs: 50 });
      const lock = await region.lockRow('r');
      assert.equal(await region.tryLockRow('r'), null);
      await assert.rejects(region.put(new Put('r').add('colfam1', 'q', 'x')), {
        code: 'LOCK_TIMEOUT',
        message: /Timed out on getting lock for row=r/,
      });
      const controller = new AbortController();
      const aborted = region.lockRow('r', { signal: controller.signal, waitMs: 10_000 });
      controller.abort();
      await assert.rejects(aborted, { code: 'ABORTED' });
      await region.unlockRow(lock);
      assert.equal((await region.get(new Get('r'))).isEmpty, true);
    });
  });

  describe(`${variant.name}: implicit locks, batches and multi-row mutations${variant.remote ? ' (conformance V16)' : ''}`, () => {
    it('an implicit lock is released when its operation fails; a caller lock never is', async () => {
      await using region = await open({ rowLockWaitMs: 100 });
      await region.put(new Put('r').add('colfam1', 'q', 'abc'));
      await assert.rejects(region.incrementColumnValue('r', 'colfam1', 'q', 1), {
        code: 'INVALID_ARGUMENT',
      });
      await region.put(new Put('r').add('colfam1', 'q', 'after'));
      const lock = await region.lockRow('r');
      await region.put(new Put('r', { rowLock: lock }).add('colfam1', 'q', 'locked'));
      await assert.rejects(
        region.increment(new Increment('r', { rowLock: lock }).addColumn('colfam1', 'q', 1)),
      );
      assert.equal(
        await region.tryLockRow('r'),
        null,
        'the operations must not have released the caller lock',
      );
      await region.renewLease(lock);
      await region.unlockRow(lock);
    });

    it('batch reports a status per operation: a bad family fails only its own', async () => {
      await using region = await open();
      const statuses = await region.batch([
        new Put('a').add('colfam1', 'q', '1'),
        new Put('b').add('nope', 'q', '2'),
        new Put('c').add('colfam2', 'q', '3'),
      ]);
      assert.deepEqual(
        statuses.map((s) => s.ok),
        [true, false, true],
      );
      assert.match(String((statuses[1] as { error: Error }).error.message), /nope/);
      assert.equal((await region.get(new Get('c'))).isEmpty, false);
    });

    it('mutateRows applies several rows as one write, locking in byte order (conformance R17)', async () => {
      await using region = await open();
      const held = await region.lockRow('b');
      let done = false;
      const write = region
        .mutateRows([
          new Put('c').add('colfam1', 'q', '1'),
          new Put('a').add('colfam1', 'q', '1'),
          new Delete('b'),
        ])
        .then(() => {
          done = true;
        });
      await sleep(30);
      assert.equal(done, false);
      assert.equal(
        await region.tryLockRow('a'),
        null,
        "'a' sorts first, so it is held while waiting for 'b'",
      );
      const c = await region.tryLockRow('c');
      assert.ok(c, "'c' sorts after 'b', so it is not taken yet");
      await region.unlockRow(c);
      await region.unlockRow(held);
      await write;
      const before = region.backing.readPoint;
      await region.mutateRows([
        new Put('x').add('colfam1', 'q', '1'),
        new Put('y').add('colfam1', 'q', '1'),
      ]);
      assert.equal(region.backing.readPoint, before + 1, 'one MVCC write for all rows');
      await assert.rejects(
        region.mutateRows([new Put('x', { rowLock: held }).add('colfam1', 'q', '1')]),
        {
          code: 'INVALID_ARGUMENT',
        },
      );
    });
  });

  describe(`${variant.name}: timestamps${variant.remote ? ' (conformance V16)' : ''}`, () => {
    for (const onArrival of [true, false]) {
      it(`the seed's RowLockExample, ${onArrival ? 'timestampOnArrival (0.90): val2, val1, val3' : 'default (0.94): val3, val2, val1'} (conformance R9)`, async () => {
        await using region = await open({ timestampOnArrival: onArrival });
        const lock = await region.lockRow('row1');
        const started = Date.now();
        let waited = 0;
        const thread = region.put(new Put('row1').add('colfam1', 'qual1', 'val3')).then(() => {
          waited = Date.now() - started;
        });
        await sleep(300);
        await region.put(new Put('row1', { rowLock: lock }).add('colfam1', 'qual1', 'val1'));
        await region.put(new Put('row1', { rowLock: lock }).add('colfam1', 'qual1', 'val2'));
        await region.unlockRow(lock);
        await thread;
        assert.ok(waited >= 290, `the unlocked put waited ${waited} ms`);
        const cells = (await region.get(new Get('row1').setMaxVersions())).cells;
        const lines = cells.map((kv) => `KV: ${formatCell(kv)}, Value: ${kv.value.toString()}`);
        for (const line of lines)
          assert.match(line, /^KV: row1\/colfam1:qual1\/\d{13}\/Put\/vlen=4, Value: val\d$/);
        const [first, second, third] = cells as [Cell, Cell, Cell];
        if (onArrival) {
          assert.deepEqual(values(cells), ['val2', 'val1', 'val3']);
          const gap = second.timestamp - third.timestamp;
          assert.ok(gap >= 290 && gap < 1000, `val1 is ${gap} ms newer than val3`);
        } else {
          assert.deepEqual(values(cells), ['val3', 'val2', 'val1']);
          assert.ok(first.timestamp > second.timestamp);
        }
      });
    }
  });

  describe(`${variant.name}: MVCC${variant.remote ? ' (conformance V16)' : ''}`, () => {
    /** Starts a two-family put that stops after its first cell until `release()` is called. */
    async function halfWrite(region: TableUnderTest) {
      let release: (() => void) | undefined;
      region.backing[rowsInternals].insertYield = (i) =>
        i === 0
          ? new Promise<void>((r) => {
              release = r;
            })
          : undefined;
      const write = region.put(new Put('r').add('colfam1', 'a', 'x').add('colfam2', 'b', 'x'));
      await sleep(10);
      assert.ok(release, 'the write did not start inserting');
      return { write, release };
    }

    it('a reader never sees part of a mutation across families, and the write returns only once visible (conformance R12, R13)', async () => {
      await using region = await open();
      const { write, release } = await halfWrite(region);
      assert.equal((await region.get(new Get('r'))).isEmpty, true);
      const before = region.backing.readPoint;
      release();
      await write;
      assert.ok(region.backing.readPoint > before);
      assert.equal((await region.get(new Get('r'))).cells.length, 2);
    });

    it('the broken read path (MVCC off) is caught by the same check', async () => {
      await using region = await open();
      region.backing[rowsInternals].readAll = true;
      const { write, release } = await halfWrite(region);
      const cells = (await region.get(new Get('r'))).cells;
      assert.equal(cells.length, 1, 'a half mutation must be visible without MVCC');
      release();
      await write;
    });
  });

  describe(`${variant.name}: fencing tokens${variant.remote ? ' (conformance V16)' : ''}`, () => {
    it('a mutation carrying a token older than the row newest grant is rejected and changes nothing', async () => {
      await using region = await open();
      const first = await region.lockRow('r');
      await region.unlockRow(first);
      const second = await region.lockRow('r');
      assert.ok(second.token > first.token);
      await region.unlockRow(second);
      await assert.rejects(
        region.put(new Put('r', { token: first.token }).add('colfam1', 'q', 'stale')),
        {
          code: 'STALE_TOKEN',
        },
      );
      await region.put(new Put('r', { token: second.token }).add('colfam1', 'q', 'fresh'));
      // Under a valid explicit lock, too, an older token is refused and the lock's own passes.
      const third = await region.lockRow('r');
      await assert.rejects(
        region.put(new Put('r', { rowLock: third, token: second.token }).add('colfam1', 'q', 'x')),
        { code: 'STALE_TOKEN' },
      );
      await region.put(
        new Put('r', { rowLock: third, token: third.token }).add('colfam1', 'q', 'own'),
      );
      await region.unlockRow(third);
      assert.deepEqual(values((await region.get(new Get('r').setMaxVersions())).cells), [
        'own',
        'fresh',
      ]);
    });
  });

  describe(`${variant.name}: scans${variant.remote ? ' (conformance V16)' : ''}`, () => {
    it('returns rows of [start, stop) in byte order, each consistent', async () => {
      await using region = await open();
      for (const row of ['b', 'a', 'd', 'c', 'a\xff']) {
        await region.put(new Put(Buffer.from(row, 'latin1')).add('colfam1', 'q', row));
      }
      const rows: string[] = [];
      for await (const r of region.scan(new Scan({ startRow: 'a', stopRow: 'd' })))
        rows.push(r.row.toString('latin1'));
      assert.deepEqual(rows, ['a', 'a\xff', 'b', 'c']);
    });
  });

  describe(`${variant.name}: scans over rows that come and go${variant.remote ? ' (conformance V16)' : ''}`, () => {
    it('lists each live row once, in byte order, after deletes, checkpoints and re-adds', async () => {
      await using region = await open();
      const scanRows = async () => {
        const rows: string[] = [];
        for await (const r of region.scan(new Scan())) rows.push(r.row.toString());
        return rows;
      };
      for (const row of ['m', 'c', 'x', 'a'])
        await region.put(new Put(row).add('colfam1', 'q', row));
      assert.deepEqual(await scanRows(), ['a', 'c', 'm', 'x']);
      await region.delete(new Delete('c'));
      await region.backing.flush();
      assert.equal(region.backing.rowCount, 3);
      await region.put(new Put('c').add('colfam1', 'q', 'again', Date.now() + 10));
      await region.put(new Put('b').add('colfam1', 'q', 'b'));
      assert.deepEqual(await scanRows(), ['a', 'b', 'c', 'm', 'x']);
      await region.delete(new Delete('m'));
      assert.deepEqual(await scanRows(), ['a', 'b', 'c', 'x']);
    });
  });

  describe(`${variant.name}: bad input fails clearly and changes nothing${variant.remote ? ' (conformance V16)' : ''}`, () => {
    it('rejects bad rows, families, versions and ranges', async () => {
      await using region = await open();
      await region.put(new Put('r').add('colfam1', 'q', 'keep'));
      assert.throws(() => new Put(''), { code: 'INVALID_ARGUMENT', message: /must not be empty/ });
      assert.throws(() => new Put('x'.repeat(32768)), {
        code: 'INVALID_ARGUMENT',
        message: /32767/,
      });
      assert.throws(() => new Put(42 as unknown as string), { code: 'INVALID_ARGUMENT' });
      await assert.rejects(region.put(new Put('r').add('nope', 'q', 'x')), {
        code: 'INVALID_ARGUMENT',
        message: /Column family nope does not exist/,
      });
      await assert.rejects(
        region.put(new Put('r').add('colfam1', 'q', 'x').add('nope', 'q', 'y')),
        {
          code: 'INVALID_ARGUMENT',
        },
      );
      await assert.rejects(region.put(new Put('r')), { code: 'INVALID_ARGUMENT' });
      assert.throws(() => new Put('r').add('colfam1', 'q', 'x', -1), { code: 'INVALID_ARGUMENT' });
      assert.throws(() => new Get('r').setTimeRange(10, 5), { code: 'INVALID_ARGUMENT' });
      assert.throws(() => new Get('r').setMaxVersions(-1), { code: 'INVALID_ARGUMENT' });
      await assert.rejects(region.get(new Get('r').addFamily('nope')), {
        code: 'INVALID_ARGUMENT',
      });
      assert.deepEqual(values((await region.get(new Get('r').setMaxVersions())).cells), ['keep']);
    });

    it('every method reports a bad argument as a rejection, never a throw, with the same words', async () => {
      await using region = await open();
      const held = await region.lockRow('l');
      const cases: [string, () => Promise<unknown>, RegExp][] = [
        ['unlockRow({})', () => region.unlockRow({} as never), /Expected a RowLock/],
        ["unlockRow('')", () => region.unlockRow(''), /must be a non-empty string/],
        ['renewLease(5)', () => region.renewLease(5 as never), /Expected a RowLock/],
        ['get() a string', () => region.get('r' as never), /takes a Get/],
        ['get() unknown option', () => region.get(new Get('r'), { x: 1 } as never), /"x"/],
        ['withRowLock(5)', () => region.withRowLock('r', 5 as never), /must be a function/],
        [
          'checkAndPut a Delete',
          () => region.checkAndPut('r', 'colfam1', 'q', null, new Delete('r') as never),
          /takes a Put/,
        ],
        ['mutateRows(5)', () => region.mutateRows(5 as never), /non-empty array/],
        [
          'mutateRows under a lock',
          () => region.mutateRows([new Put('l', { rowLock: held }).add('colfam1', 'q', 'x')]),
          /takes its own locks/,
        ],
      ];
      for (const [name, call, words] of cases) {
        let promise: Promise<unknown> | undefined;
        assert.doesNotThrow(() => {
          promise = call();
        }, name);
        await assert.rejects(
          promise as Promise<unknown>,
          { code: 'INVALID_ARGUMENT', message: words },
          name,
        );
      }
      await assert.rejects(region.get(new Get('r'), { signal: AbortSignal.abort() }), {
        code: 'ABORTED',
      });
      // A batch entry that is not a Put or Delete fails alone.
      const statuses = await region.batch([{} as never, new Put('b').add('colfam1', 'q', 'v')]);
      assert.equal((statuses[0] as { error: { code: string } }).error.code, 'INVALID_ARGUMENT');
      assert.equal(statuses[1]?.ok, true);
      await region.unlockRow(held);
    });
  });
}

describe('Region (in process only): leases and owners', () => {
  it('leases: use renews, idleness expires and hands the row to a waiter (fake clock)', async () => {
    const clock = new FakeClock();
    await using region = await open({ clock, leasePeriodMs: 60_000, rowLockWaitMs: 120_000 });
    const lock = await region.lockRow('r', { renew: false });
    const expired: string[] = [];
    region.on('lock-expired', (l) => expired.push(l.lockId));
    await clock.advance(40_000);
    await region.put(new Put('r', { rowLock: lock }).add('colfam1', 'q', 'kept'));
    await clock.advance(40_000);
    await region.get(new Get('r', lock));
    const waiter = region.put(new Put('r').add('colfam1', 'q', 'waiter'));
    await clock.advance(59_999);
    await sleep(5);
    assert.deepEqual(values((await region.get(new Get('r'))).cells), ['kept']);
    await clock.advance(1);
    await waiter;
    assert.deepEqual(expired, [lock.lockId]);
    assert.deepEqual(values((await region.get(new Get('r'))).cells), ['waiter']);
    await assert.rejects(region.put(new Put('r', { rowLock: lock }).add('colfam1', 'q', 'late')), {
      code: 'UNKNOWN_ROW_LOCK',
    });
  });

  it('a lock that renews itself (the default) is held past any lease until unlocked (fake clock)', async () => {
    const clock = new FakeClock();
    await using region = await open({ clock, leasePeriodMs: 60_000, rowLockWaitMs: 1e9 });
    const lock = await region.lockRow('r');
    const tried = await region.tryLockRow('t');
    assert.ok(tried !== null);
    const expired: string[] = [];
    region.on('lock-expired', (l) => expired.push(l.lockId));
    const waiter = region.put(new Put('r').add('colfam1', 'q', 'waiter'));
    let done = false;
    void waiter.then(() => {
      done = true;
    });
    for (let i = 0; i < 10; i++) await clock.advance(60_000);
    await sleep(5);
    assert.equal(done, false, 'the waiter must not get a row whose holder is alive');
    assert.deepEqual(expired, []);
    assert.equal(lock.signal.aborted, false);
    lock.ensureValid();
    tried.ensureValid();
    assert.equal(lock.leaseRemainingMs, Number.POSITIVE_INFINITY);
    await region.put(new Put('r', { rowLock: lock }).add('colfam1', 'q', 'holder'));
    await region.renewLease(lock);
    await lock.close();
    await waiter;
    assert.deepEqual(values((await region.get(new Get('r'))).cells), ['waiter']);
    assert.equal(lock.signal.reason?.code, 'ALREADY_CLOSED');
    await assert.rejects(region.lockRow('x', { renew: 'yes' as never }), {
      code: 'INVALID_ARGUMENT',
      message: /renew/,
    });
    await assert.rejects(region.tryLockRow('x', { renew: 1 as never }), {
      code: 'INVALID_ARGUMENT',
    });
  });

  it('opposite-order lockers: one gets DEADLOCK at once instead of waiting for a lease', async () => {
    await using region = await open();
    const alice = { name: 'alice' };
    const bob = { name: 'bob' };
    const a1 = await region.lockRow('1', { owner: alice });
    const b2 = await region.lockRow('2', { owner: bob });
    const aliceWaits = region.lockRow('2', { owner: alice });
    const started = Date.now();
    // Bob's wait would close the cycle: it fails at once; Alice's wait is untouched.
    await assert.rejects(region.put(new Put('1').add('colfam1', 'q', 'x'), { owner: bob }), {
      code: 'DEADLOCK',
    });
    assert.ok(Date.now() - started < 1000, 'the deadlock must be reported at once');
    await region.unlockRow(b2);
    const a2 = await aliceWaits;
    assert.equal(a2.row.toString(), '2');
    await region.unlockRow(a1);
    await region.unlockRow(a2);
  });
});

describe('Region (in process only): timestamps on a fake clock', () => {
  it('one timestamp for all cells of a mutation, never behind the row previous one (conformance R9)', async () => {
    const clock = new FakeClock();
    await using region = await open({ clock });
    await region.put(new Put('r').add('colfam1', 'a', '1').add('colfam2', 'b', '1'));
    await region.put(new Put('r').add('colfam1', 'a', '2'));
    const cells = (await region.get(new Get('r').setMaxVersions())).cells;
    const now = clock.wall();
    assert.deepEqual(
      cells.map((c) => [c.family, c.value.toString(), c.timestamp - now]),
      [
        ['colfam1', '2', 1],
        ['colfam1', '1', 0],
        ['colfam2', '1', 0],
      ],
    );
  });
});

describe('Region (in process only): bad open options fail clearly', () => {
  it('rejects bad durations and families', async () => {
    await assert.rejects(open({ leasePeriodMs: -1 }), { code: 'INVALID_ARGUMENT' });
    await assert.rejects(open({ rowLockWaitMs: Number.NaN }), { code: 'INVALID_ARGUMENT' });
    await assert.rejects(Region.open({ families: [] }), { code: 'INVALID_ARGUMENT' });
    await assert.rejects(Region.open({ families: ['a', 'a'] }), { code: 'INVALID_ARGUMENT' });
    await assert.rejects(Region.open({ families: [{ name: 'a', maxVersions: 0 }] }), {
      code: 'INVALID_ARGUMENT',
    });
    await assert.rejects(Region.open({ families: ['bad name'] }), { code: 'INVALID_ARGUMENT' });
  });
});

describe('Region (in process only): storage', () => {
  it('survives close and reopen; a second opener of the directory fails clearly', async () => {
    using dir = tempDir();
    const region = await open({ dir: dir.path });
    await region.put(new Put('r').add('colfam1', 'q', 'v1', 1).add('colfam2', 'q', 'w', 1));
    await region.put(new Put('r').add('colfam1', 'q', 'v2', 2));
    await region.delete(new Delete('r').deleteColumns('colfam2', 'q'));
    await assert.rejects(open({ dir: dir.path }), { code: 'LOCK_OBTAIN_FAILED' });
    await region.close();
    await using again = await open({ dir: dir.path });
    assert.deepEqual(values((await again.get(new Get('r').setMaxVersions())).cells), ['v2', 'v1']);
    await again.flush();
    await again.put(new Put('r').add('colfam1', 'q', 'v3', 3));
    await again.close();
    await using third = await open({ dir: dir.path });
    assert.deepEqual(values((await third.get(new Get('r').setMaxVersions())).cells), [
      'v3',
      'v2',
      'v1',
    ]);
  });

  it('version churn and deletes do not grow memory or the checkpoint without bound', async () => {
    using dir = tempDir();
    await using region = await open({ dir: dir.path, durability: 'none' });
    for (let i = 0; i < 2000; i++) {
      await region.put(new Put('hot').add('colfam1', 'q', `v${i}`));
    }
    assert.equal(region.cellCount, 3, 'versions beyond maxVersions must be dropped as writes land');
    for (let i = 0; i < 500; i++) {
      await region.put(new Put(`row${i}`).add('colfam1', 'q', 'x'));
      await region.delete(new Delete(`row${i}`));
    }
    await region.flush();
    assert.equal(region.rowCount, 1, 'deleted rows must be gone after a checkpoint');
    assert.equal(region.cellCount, 3);
    const cells = (await region.get(new Get('hot').setMaxVersions())).cells;
    assert.equal(cells.length, 3);
  });
});
