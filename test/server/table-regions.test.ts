// Issue 23, regions: a table split by key ranges at creation (`createTable(..., { splits })`,
// `rows create-table --splits`), each region a Region with its own storage, on the directory
// storage and on PostgreSQL. Every call reaches the region of its row; scans cross regions in
// key order; mutateRows is refused across regions; a restart and a drop handle every region.
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import type { LocksmithClient } from '../../src/client/locksmith-client.js';
import { Delete, Get, Increment, Put, RowMutations, Scan } from '../../src/rows/index.js';
import { MAX_SPLITS } from '../../src/rows/table-descriptor.js';
import { POSTGRES_URL } from '../fixtures/db-servers.js';
import { cliPath, run } from '../helpers.js';
import { type Storage, StorageServers } from './storage-servers.js';

const servers = new StorageServers('locksmith-regions-');
after(() => servers.dispose());
const serverOn = (storage: Storage) => servers.serverOn(storage);

const text = (v: Uint8Array | undefined) =>
  v === undefined ? undefined : Buffer.from(v).toString();

/** The rows of a full scan, in the order the client got them. */
async function scanRows(c: LocksmithClient, scan = new Scan()) {
  const rows: string[] = [];
  for await (const r of c.table('t').scan(scan)) rows.push(Buffer.from(r.row).toString('latin1'));
  return rows;
}

/** Each region's row count, as `status` lists them. */
async function rowsPerRegion(c: LocksmithClient): Promise<[string, string, number][]> {
  const status = await c.status();
  return status.regions
    .filter((r) => r.table === 't')
    .map((r) => [r.startKey, r.endKey, r.rows] as [string, string, number]);
}

const ROWS = ['a', 'g', 'h', 'm', 'n', 'x', 'x\u0000', 'z', '\u00ff'];

for (const storage of ['files', 'postgres'] as const) {
  describe(`a table split into regions (${storage} storage)`, () => {
    it('every call reaches its row’s region; scans run the regions in key order; a restart keeps it all', async () => {
      await using s = await serverOn(storage);
      const c = await s.client();
      const created = await c.createTable('t', ['f'], {
        splits: [Buffer.from('x\0', 'latin1'), 'g', Buffer.from('m')],
      });
      assert.deepEqual(
        created.splits.map((k) => k.toString('latin1')),
        ['g', 'm', 'x\0'],
        'sorted in byte order',
      );
      const t = c.table('t');
      for (const row of ROWS) await t.put(new Put(Buffer.from(row, 'latin1')).add('f', 'q', row));
      assert.deepEqual(await rowsPerRegion(c), [
        ['', 'g', 1],
        ['g', 'm', 2],
        ['m', 'x\\x00', 3],
        ['x\\x00', '', 3],
      ]);
      assert.deepEqual(await scanRows(c), ROWS);
      assert.deepEqual(await scanRows(c, new Scan({ startRow: 'h', stopRow: 'x' })), [
        'h',
        'm',
        'n',
      ]);
      assert.deepEqual(
        await scanRows(c, new Scan({ startRow: 'g', stopRow: 'm' })),
        ['g', 'h'],
        'a stop row equal to a region start stops before that region',
      );
      assert.deepEqual(await scanRows(c, new Scan({ startRow: 'y' })), ['z', '\u00ff']);

      // Every other call, in a region that is not the first.
      assert.equal(await t.checkAndPut('n', 'f', 'q', 'n', new Put('n').add('f', 'q', 'n2')), true);
      assert.equal(text((await t.get(new Get('n'))).getValue('f', 'q')), 'n2');
      assert.equal(await t.incrementColumnValue('z', 'f', 'count', 5), 5n);
      await t.increment(new Increment('z').addColumn('f', 'count', 2));
      await t.mutateRow(
        new RowMutations('h')
          .add(new Put('h').add('f', 'r', 'hr'))
          .add(new Delete('h').deleteColumns('f', 'q')),
      );
      assert.equal(await t.checkAndDelete('a', 'f', 'q', 'a', new Delete('a')), true);
      await t.delete(new Delete('g'));

      await s.restart();
      const c2 = await s.client();
      const t2 = c2.table('t');
      assert.deepEqual(
        (await c2.describeTable('t')).splits.map((k) => k.toString('latin1')),
        ['g', 'm', 'x\0'],
      );
      assert.deepEqual(await scanRows(c2), ['h', 'm', 'n', 'x', 'x\0', 'z', '\u00ff']);
      assert.equal(text((await t2.get(new Get('n'))).getValue('f', 'q')), 'n2');
      assert.equal(text((await t2.get(new Get('h'))).getValue('f', 'r')), 'hr');
      assert.equal((await t2.get(new Get('h'))).getValue('f', 'q'), undefined);
      assert.equal(await t2.incrementColumnValue('z', 'f', 'count', 0), 7n);
      assert.deepEqual(await rowsPerRegion(c2), [
        ['', 'g', 0],
        ['g', 'm', 1],
        ['m', 'x\\x00', 3],
        ['x\\x00', '', 3],
      ]);
    });

    it('mutateRows is atomic within a region and refused across regions, with nothing applied; batch splits by region', async () => {
      await using s = await serverOn(storage);
      const c = await s.client();
      await c.createTable('t', ['f'], { splits: ['m'] });
      const t = c.table('t');
      await t.mutateRows([new Put('n').add('f', 'q', '1'), new Put('o').add('f', 'q', '1')]);
      await assert.rejects(
        t.mutateRows([new Put('b').add('f', 'q', '2'), new Put('p').add('f', 'q', '2')]),
        (err: Error & { code?: string }) =>
          err.code === 'INVALID_ARGUMENT' && /different regions/.test(err.message),
      );
      assert.deepEqual(await scanRows(c), ['n', 'o'], 'the refused call wrote nothing');

      const statuses = await t.batch([
        new Put('z').add('f', 'q', 'z'),
        new Put('a').add('f', 'q', 'a'),
        new Put('b').add('nofamily', 'q', 'b'),
        new Delete('n'),
        new Put('c').add('f', 'q', 'c'),
      ]);
      assert.deepEqual(
        statuses.map((st) => (st.ok ? 'ok' : (st.error as { code?: string }).code)),
        ['ok', 'ok', 'INVALID_ARGUMENT', 'ok', 'ok'],
        'each status in its entry’s place',
      );
      assert.deepEqual(await scanRows(c), ['a', 'c', 'o', 'z']);
    });

    it('row locks live in their row’s region: tokens, puts under the lock, unlock, renewLease, and a waiter in another region', async () => {
      await using s = await serverOn(storage);
      const a = await s.client();
      const b = await s.client();
      await a.createTable('t', ['f'], { splits: ['k', 't'] });
      const ta = a.table('t');
      const tb = b.table('t');
      const locks = await Promise.all(['c', 'm', 'w'].map((row) => ta.lockRow(row)));
      for (const lock of locks) {
        await ta.put(new Put(lock.row, { rowLock: lock }).add('f', 'q', 'held'));
        await ta.renewLease(lock);
      }
      assert.equal(await tb.tryLockRow('m'), null, 'another session cannot take a held row');
      const waiter = tb.lockRow('w', { waitMs: 60_000 });
      const status = await a.status();
      assert.deepEqual(status.locks.map((l) => l.row).sort(), ['c', 'm', 'w']);
      assert.equal(status.waiting, 1, 'the wait in the last region is counted');
      await ta.unlockRow(locks[2] as (typeof locks)[number]);
      const granted = await waiter;
      assert.ok(granted.token > 0);
      await tb.put(new Put('w', { rowLock: granted }).add('f', 'q', 'b'));
      await granted.close();
      for (const lock of locks.slice(0, 2)) await lock.close();
      assert.equal((await a.status()).locksHeld, 0);
    });

    it('drop removes every region, and a table created again under the name starts empty with its own splits', async () => {
      await using s = await serverOn(storage);
      const c = await s.client();
      await c.createTable('t', ['f'], { splits: ['b', 'c', 'd'] });
      for (const row of ['a', 'b', 'c', 'd'])
        await c.table('t').put(new Put(row).add('f', 'q', row));
      await c.dropTable('t');
      const left = readdirSync(join(s.dataDir, 'tables')).filter((e) => e.startsWith('t'));
      assert.deepEqual(left, [], 'no region directory is left');
      await c.createTable('t', ['f'], { splits: ['c'] });
      assert.deepEqual(await scanRows(c), []);
      assert.deepEqual((await c.status()).regions.filter((r) => r.table === 't').length, 2);
      if (storage === 'postgres') {
        const db = new pg.Client({ connectionString: POSTGRES_URL });
        await db.connect();
        try {
          const { rows } = await db.query(`SELECT region FROM ${s.prefix}_regions ORDER BY region`);
          const left = rows.map((r) => r.region).filter((r: string) => r.startsWith('tables/t'));
          assert.equal(left.length, 2, `the dropped regions are gone from PostgreSQL: ${left}`);
          assert.deepEqual(left, [
            'tables/t',
            ...readdirSync(join(s.dataDir, 'tables'))
              .filter((e) => e.startsWith('t@'))
              .map((e) => `tables/${e}`),
          ]);
        } finally {
          await db.end();
        }
      }
    });
  });
}

describe('split keys: hostile values are refused, nothing is created', () => {
  const cases: [string, unknown, RegExp][] = [
    ['not an array', 'm', /array of row keys/],
    ['an empty key', ['a', ''], /split key 2/],
    ['a number', ['a', 7], /split key 2/],
    ['a key twice', ['m', 'a', 'm'], /given twice/],
    ['an oversized key', ['x'.repeat(40_000)], /split key 1 is 40000 bytes/],
    ['too many keys', Array.from({ length: MAX_SPLITS + 1 }, (_, i) => `k${i}`), /maximum is 1000/],
    ['an object', { 0: 'a' }, /array of row keys/],
  ];
  for (const [what, splits, message] of cases) {
    it(`${what}: INVALID_ARGUMENT`, async () => {
      await using s = await serverOn('files');
      const c = await s.client();
      await assert.rejects(
        c.createTable('t', ['f'], { splits } as never),
        (err: Error & { code?: string }) =>
          err.code === 'INVALID_ARGUMENT' && message.test(err.message),
      );
      assert.deepEqual(await c.listTables(), []);
      assert.equal(existsSync(join(s.dataDir, 'tables', 't')), false);
    });
  }

  it('the largest legal split: 1,000 keys, 1,001 regions, each row in its own', async () => {
    await using s = await serverOn('files');
    const c = await s.client();
    const keys = Array.from({ length: MAX_SPLITS }, (_, i) => `k${String(i).padStart(4, '0')}`);
    await c.createTable('t', ['f'], { splits: keys });
    await c.table('t').batch(keys.map((k) => new Put(k).add('f', 'q', k)));
    const regions = (await c.status()).regions.filter((r) => r.table === 't');
    assert.equal(regions.length, MAX_SPLITS + 1);
    assert.deepEqual(
      regions.map((r) => r.rows),
      [0, ...keys.map(() => 1)],
    );
    // The client reads 100 rows per answer: each answer's rows come from 100 regions.
    assert.deepEqual(await scanRows(c), keys);
  });

  it('the command line: rows create-table --splits, and a misuse exits 2', async () => {
    await using s = await serverOn('files');
    const url = `locksmith://127.0.0.1:${s.server.port}`;
    const made = await run([
      cliPath,
      'rows',
      'create-table',
      't',
      'f',
      '--splits',
      'm,c,x\\x00',
      '--server',
      url,
    ]);
    assert.equal(made.code, 0, made.stderr);
    assert.match(made.stdout, /4 regions, split at c, m, x\\x00/);
    const bad = await run([
      cliPath,
      'rows',
      'create-table',
      'u',
      'f',
      '--splits',
      'a,,b',
      '--server',
      url,
    ]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /empty split key/);
    const twice = await run([
      cliPath,
      'rows',
      'create-table',
      'u',
      'f',
      '--splits',
      'a,a',
      '--server',
      url,
    ]);
    assert.equal(twice.code, 1);
    assert.match(twice.stderr, /INVALID_ARGUMENT.*given twice|given twice.*INVALID_ARGUMENT/);
  });
});
