// Issue 23, live splits: `splitTable` / `rows split TABLE KEY` cuts the region holding KEY in two
// while clients write and hold locks, on the directory storage and on PostgreSQL. No write is
// lost or doubled, a held lock stays held (same handle, id and token), a waiter keeps waiting,
// an open scan returns every row once, and a crash right after the split (the old region's
// storage still holding the moved rows) serves each row once after the restart.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { connect, type LocksmithClient } from '../../src/client/locksmith-client.js';
import { Delete, Get, Increment, Put, Scan } from '../../src/rows/index.js';
import { Region } from '../../src/rows/region.js';
import { cliPath, exitOf, orphanProof, run, waitForLine } from '../helpers.js';
import { type Storage, StorageServers } from './storage-servers.js';

const servers = new StorageServers('locksmith-split-');
after(() => servers.dispose());
const serverOn = (storage: Storage) => servers.serverOn(storage);

const text = (v: Uint8Array | undefined) =>
  v === undefined ? undefined : Buffer.from(v).toString();

async function scanRows(c: LocksmithClient): Promise<string[]> {
  const rows: string[] = [];
  for await (const r of c.table('t').scan(new Scan())) {
    rows.push(Buffer.from(r.row).toString('latin1'));
  }
  return rows;
}

/** [startKey, endKey, rows] of each region of table t, as `status` lists them. */
async function regionsOf(c: LocksmithClient): Promise<[string, string, number][]> {
  return (await c.status()).regions
    .filter((r) => r.table === 't')
    .map((r) => [r.startKey, r.endKey, r.rows] as [string, string, number]);
}

const ROWS = Array.from({ length: 26 }, (_, i) => String.fromCharCode(97 + i)); // a..z

for (const storage of ['files', 'postgres'] as const) {
  describe(`a live split (${storage} storage)`, () => {
    it('moves the rows from the key on to a new region; every row once, before and after a restart', async () => {
      await using s = await serverOn(storage);
      const c = await s.client();
      await c.createTable('t', ['f']);
      const t = c.table('t');
      for (const row of ROWS) await t.put(new Put(row).add('f', 'q', `v-${row}`));
      const described = await c.splitTable('t', 'm');
      assert.deepEqual(
        described.splits.map((k) => k.toString('latin1')),
        ['m'],
      );
      assert.deepEqual(await regionsOf(c), [
        ['', 'm', 12],
        ['m', '', 14],
      ]);
      await c.splitTable('t', Buffer.from('t'));
      await c.splitTable('t', 'c');
      assert.deepEqual(await regionsOf(c), [
        ['', 'c', 2],
        ['c', 'm', 10],
        ['m', 't', 7],
        ['t', '', 7],
      ]);
      assert.deepEqual(await scanRows(c), ROWS);
      for (const row of ROWS) {
        assert.equal(text((await t.get(new Get(row))).getValue('f', 'q')), `v-${row}`);
      }
      await t.put(new Put('p').add('f', 'q', 'after the split'));
      await s.restart();
      const c2 = await s.client();
      assert.deepEqual(
        (await c2.describeTable('t')).splits.map((k) => k.toString('latin1')),
        ['c', 'm', 't'],
      );
      assert.deepEqual(await scanRows(c2), ROWS, 'each row once after a restart');
      assert.deepEqual(await regionsOf(c2), [
        ['', 'c', 2],
        ['c', 'm', 10],
        ['m', 't', 7],
        ['t', '', 7],
      ]);
      assert.equal(
        text((await c2.table('t').get(new Get('p'))).getValue('f', 'q')),
        'after the split',
      );
    });

    it('a lock held on a moved row stays held (same token), a waiter keeps waiting; new grants have larger tokens', async () => {
      await using s = await serverOn(storage);
      const a = await s.client();
      const b = await s.client();
      await a.createTable('t', ['f']);
      const held = await a.table('t').lockRow('p');
      const waiting = b.table('t').lockRow('p', { waitMs: 60_000 });
      const kept = await a.table('t').lockRow('b');
      // Let b's wait reach the server before the split.
      for (let i = 0; i < 100 && (await a.status()).waiting === 0; i++) {
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal((await a.status()).waiting, 1, 'b waits for p');
      await a.splitTable('t', 'm');
      assert.equal(held.signal.aborted, false, 'the lock on p is held across the split');
      held.ensureValid();
      await a.table('t').put(new Put('p', { rowLock: held }).add('f', 'q', 'under the lock'));
      assert.equal((await a.status()).waiting, 1, 'b still waits, now in the new region');
      await held.close();
      const next = await waiting;
      assert.ok(next.token > held.token, `${next.token} > ${held.token}`);
      await b.table('t').put(new Put('p', { rowLock: next }).add('f', 'q', 'b'));
      await next.close();
      // A fresh grant in the new region is above every token of the old one.
      const fresh = await a.table('t').lockRow('q');
      assert.ok(fresh.token > next.token);
      await fresh.close();
      assert.equal(kept.signal.aborted, false);
      await kept.close();
      assert.equal(text((await a.table('t').get(new Get('p'))).getValue('f', 'q')), 'b');
    });

    it('calls waiting for a row of the region being split: writes go on in the new region, a mutateRows the split separated is refused, a wait keeps its bound', async () => {
      await using s = await serverOn(storage);
      const a = await s.client();
      const b = await s.client();
      await a.createTable('t', ['f']);
      const t = b.table('t');
      const p = await a.table('t').lockRow('p');
      const c = await a.table('t').lockRow('c');
      const outcome = (call: Promise<unknown>) =>
        call.then(
          (v) => (Array.isArray(v) ? v.map((x) => (x.ok ? 'ok' : x.error.code)) : 'ok'),
          (err: { code?: string }) => err.code,
        );
      const put = outcome(t.put(new Put('p').add('f', 'q', 'put'), { waitMs: 30_000 }));
      const putLow = outcome(t.put(new Put('c').add('f', 'q', 'put'), { waitMs: 30_000 }));
      const rows = outcome(
        t.mutateRows(
          [
            new Put('a').add('f', 'q', '1'),
            new Put('c').add('f', 'q', '2'),
            new Put('q').add('f', 'q', '3'),
          ],
          {
            waitMs: 30_000,
          },
        ),
      );
      const batch = outcome(
        t.batch([new Put('p').add('f', 'q', 'batch'), new Put('d').add('f', 'q', 'batch')], {
          waitMs: 30_000,
        }),
      );
      for (let i = 0; i < 200 && (await a.status()).waiting < 4; i++) {
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal((await a.status()).waiting, 4);
      await a.splitTable('t', 'm');
      assert.equal(await rows, 'INVALID_ARGUMENT', 'rows a, c and q are in two regions now');
      await p.close();
      await c.close();
      assert.equal(await put, 'ok');
      assert.equal(await putLow, 'ok');
      assert.deepEqual(await batch, ['ok', 'ok']);
      assert.equal(text((await t.get(new Get('p'))).getValue('f', 'q')), 'batch');
      assert.equal(
        (await t.get(new Get('a'))).isEmpty,
        true,
        'the refused mutateRows wrote nothing',
      );
      // A wait that a split sends again ends at its first bound, not a second one: sent again
      // after 2 s with a fresh 3 s wait, it would end after 5 s.
      const x = await a.table('t').lockRow('x');
      const began = performance.now();
      const wait = outcome(t.lockRow('x', { waitMs: 3000 }));
      await new Promise((r) => setTimeout(r, 2000));
      await a.splitTable('t', 'w');
      assert.equal(await wait, 'LOCK_TIMEOUT');
      const waited = performance.now() - began;
      assert.ok(waited < 3000 + 1500, `waited ${Math.round(waited)} ms for a 3000 ms wait`);
      await x.close();
    });

    it('under write load: no increment lost or doubled, no call fails', async () => {
      await using s = await serverOn(storage);
      const admin = await s.client();
      await admin.createTable('t', ['f']);
      const counters = Array.from({ length: 10 }, (_, i) => `c${i}`);
      const acknowledged = new Map<string, number>(counters.map((r) => [r, 0]));
      let running = true;
      const failures: unknown[] = [];
      const clients = await Promise.all(Array.from({ length: 6 }, () => s.client()));
      const workers = clients.map(async (c, w) => {
        for (let n = 0; running; n++) {
          const row = counters[(w * 7 + n) % counters.length] as string;
          try {
            await c.table('t').increment(new Increment(row).addColumn('f', 'n', 1));
            acknowledged.set(row, (acknowledged.get(row) ?? 0) + 1);
          } catch (err) {
            failures.push(err);
            // A failing call must not spin this loop without yielding.
            await new Promise((r) => setImmediate(r));
          }
        }
      });
      await new Promise((r) => setTimeout(r, 300));
      await admin.splitTable('t', 'c3');
      await new Promise((r) => setTimeout(r, 200));
      await admin.splitTable('t', 'c7');
      await admin.splitTable('t', 'c5');
      await new Promise((r) => setTimeout(r, 300));
      running = false;
      await Promise.all(workers);
      assert.deepEqual(failures, []);
      for (const row of counters) {
        const value = (await admin.table('t').get(new Get(row))).getValue('f', 'n');
        const count = value === undefined ? 0 : Number(Buffer.from(value).readBigInt64BE(0));
        assert.equal(count, acknowledged.get(row), `counter ${row}`);
      }
      assert.ok([...acknowledged.values()].reduce((a, b) => a + b, 0) > 100);
      assert.deepEqual(
        (await regionsOf(admin)).map(([start]) => start),
        ['', 'c3', 'c5', 'c7'],
      );
    });

    it('writes and deletes while the moved rows are copied, and a checkpoint among them: the new region has them all, before and after a restart', async () => {
      await using s = await serverOn(storage);
      const c = await s.client();
      await c.createTable('t', ['f']);
      const t = c.table('t');
      const all = Array.from({ length: 20_000 }, (_, i) => `r${String(i).padStart(6, '0')}`);
      for (let i = 0; i < all.length; i += 1000) {
        await t.batch(all.slice(i, i + 1000).map((r) => new Put(r).add('f', 'q', 'old')));
      }
      const expected = new Map(all.map((r) => [r, 'old']));
      const split = c.splitTable('t', 'r010000');
      // Issued at once: most land while the rows are being copied, the rest wait for the split.
      const changes: Promise<unknown>[] = [];
      for (let i = 10_000; i < 20_000; i += 97) {
        const row = all[i] as string;
        if (i % 2 === 0) {
          changes.push(t.delete(new Delete(row)));
          expected.delete(row);
        } else {
          changes.push(t.put(new Put(row).add('f', 'q', 'new')));
          expected.set(row, 'new');
        }
      }
      await Promise.all(changes);
      // A checkpoint compacts the old region meanwhile: deleted rows and their markers go,
      // unless the copy's read point is kept (a copy without them would bring them back).
      await s.server.catalog.regions('t').flush();
      await split;
      const check = async (client: LocksmithClient, when: string) => {
        const seen = new Map<string, string | undefined>();
        for await (const r of client.table('t').scan(new Scan())) {
          seen.set(Buffer.from(r.row).toString('latin1'), text(r.getValue('f', 'q')));
        }
        assert.equal(seen.size, expected.size, when);
        for (const [row, value] of expected) assert.equal(seen.get(row), value, `${row} ${when}`);
      };
      await check(c, 'after the split');
      await s.restart();
      await check(await s.client(), 'after a restart');
    });

    it('an open scan goes on in the new region: every row once, in order', async () => {
      await using s = await serverOn(storage);
      const c = await s.client();
      await c.createTable('t', ['f']);
      const rows = Array.from({ length: 300 }, (_, i) => `r${String(i).padStart(3, '0')}`);
      await c.table('t').batch(rows.map((r) => new Put(r).add('f', 'q', r)));
      const regions = s.server.catalog.regions('t');
      for (const [at, key] of [
        [10, 'r050'],
        [60, 'r040'],
        [120, 'r200'],
      ] as const) {
        const seen: string[] = [];
        const scan = regions.scan(new Scan());
        for await (const r of scan) {
          seen.push(r.row.toString('latin1'));
          if (seen.length === at) await s.server.catalog.split('t', key);
        }
        assert.deepEqual(seen, rows, `split at ${key} after ${at} rows`);
      }
    });

    it('hostile split keys are refused with a code, and nothing changes', async () => {
      await using s = await serverOn(storage);
      const c = await s.client();
      await c.createTable('t', ['f'], { splits: ['m'] });
      await c.table('t').put(new Put('x').add('f', 'q', 'x'));
      const refusals: [unknown, unknown, string][] = [
        ['nope', 'k', 'TABLE_NOT_FOUND'],
        ['t', 'm', 'INVALID_ARGUMENT'],
        ['t', '', 'INVALID_ARGUMENT'],
        ['t', 'k'.repeat(40_000), 'INVALID_ARGUMENT'],
        ['t', 42, 'INVALID_ARGUMENT'],
        ['t', { row: 'k' }, 'INVALID_ARGUMENT'],
      ];
      for (const [table, key, code] of refusals) {
        await assert.rejects(
          c.splitTable(table as string, key as string),
          (err: { code?: string }) => err.code === code,
          `${String(table)} at ${String(key).slice(0, 10)}`,
        );
      }
      assert.deepEqual(
        (await c.describeTable('t')).splits.map((k) => k.toString('latin1')),
        ['m'],
      );
      assert.deepEqual(await scanRows(c), ['x']);
    });
  });
}

describe('a region bounded by a split', () => {
  it('recovers only its own rows (its storage may still hold the moved ones) and refuses calls for others with NOT_SERVING_REGION', async () => {
    const dir = servers.dir('region');
    {
      await using region = await Region.open({ families: ['f'], dir });
      for (const row of ROWS) await region.put(new Put(row).add('f', 'q', row));
    }
    await using low = await Region.open({ families: ['f'], dir }, { startKey: '', endKey: 'm' });
    assert.equal(low.rowCount, 12);
    const refused = (err: { code?: string }) => err.code === 'NOT_SERVING_REGION';
    await assert.rejects(low.get(new Get('p')), refused);
    await assert.rejects(low.put(new Put('p').add('f', 'q', 'x')), refused);
    await assert.rejects(low.lockRow('m'), refused);
    await assert.rejects(low.increment(new Increment('z').addColumn('f', 'n', 1)), refused);
    const scanned: string[] = [];
    for await (const r of low.scan(new Scan({ startRow: 'k' }))) {
      scanned.push(r.row.toString('latin1'));
    }
    assert.deepEqual(scanned, ['k', 'l'], 'a scan stops at the region end');
    assert.equal(text((await low.get(new Get('l'))).getValue('f', 'q')), 'l');
  });
});

describe('a live split with real processes', () => {
  /** A real `locksmith serve` on the data directory, in a child process. */
  async function serve(dataDir: string): Promise<{ child: ChildProcess; url: string }> {
    const child = orphanProof(
      spawn(process.execPath, [cliPath, 'serve', '--data', dataDir, '--port', '0'], {
        stdio: ['ignore', 'pipe', 'inherit'],
      }),
    );
    const line = await waitForLine(child, /listening on locksmith:\/\//);
    return { child, url: /(locksmith:\/\/[^ ]+)/.exec(line)?.[1] as string };
  }
  const rows = (url: string, ...args: string[]) =>
    run([cliPath, 'rows', ...args.slice(0, 1), '--server', url, ...args.slice(1)], {
      timeoutMs: 30_000,
    });

  it('kill -9 at any moment of a split: after the restart the table is split or not, every row once with its value, a held lock restored', {
    timeout: 240_000,
  }, async (t) => {
    const rowsOf = (n: number) =>
      Array.from({ length: n }, (_, i) => `r${String(i).padStart(6, '0')}`);
    const all = rowsOf(30_000);
    for (const delayMs of [0, 40, 120, 400, 1500]) {
      const dataDir = servers.dir('kill');
      let server = await serve(dataDir);
      try {
        {
          const c = await connect(server.url);
          await c.createTable('t', ['f']);
          for (let i = 0; i < all.length; i += 1000) {
            await c
              .table('t')
              .batch(all.slice(i, i + 1000).map((r) => new Put(r).add('f', 'q', r)));
          }
          // A lock on a row that moves (durable sessions keep it across the restart).
          const held = await c.table('t').lockRow('r020000');
          const split = c.splitTable('t', 'r015000').then(
            () => 'split',
            (err: { code?: string }) => err.code,
          );
          await new Promise((r) => setTimeout(r, delayMs));
          server.child.kill('SIGKILL');
          await exitOf(server.child);
          await split;
          void held;
          c.close().catch(() => undefined);
        }
        server = await serve(dataDir);
        const c = await connect(server.url);
        try {
          const splits = (await c.describeTable('t')).splits.map((k) => k.toString('latin1'));
          assert.ok(
            splits.length === 0 || (splits.length === 1 && splits[0] === 'r015000'),
            `${splits}`,
          );
          const seen: string[] = [];
          for await (const r of c.table('t').scan(new Scan())) {
            const row = Buffer.from(r.row).toString('latin1');
            assert.equal(text(r.getValue('f', 'q')), row);
            seen.push(row);
          }
          assert.deepEqual(seen, all, `kill after ${delayMs} ms (splits ${splits})`);
          t.diagnostic(
            `kill -9 ${delayMs} ms into the split: ${splits.length === 0 ? 'not split' : 'split'}`,
          );
          // The dead client's lock is still recorded, so the row is held: a try fails.
          assert.equal(
            await c.table('t').tryLockRow('r020000'),
            null,
            'the held lock was restored',
          );
          const free = await c.table('t').lockRow('r025000');
          await c.table('t').put(new Put('r025000', { rowLock: free }).add('f', 'q', 'r025000'));
          await free.close();
        } finally {
          await c.close();
        }
      } finally {
        server.child.kill('SIGKILL');
        await exitOf(server.child);
      }
    }
  });

  it('rows split, then kill -9 before the old region compacts: each row once after the restart; a stale region directory is cleared first', async () => {
    const dataDir = servers.dir('cli');
    let server = await serve(dataDir);
    try {
      assert.equal((await rows(server.url, 'create-table', 't', 'f')).code, 0);
      const c = await connect(server.url);
      try {
        await c.table('t').batch(ROWS.map((r) => new Put(r).add('f', 'q', `v-${r}`)));
      } finally {
        await c.close();
      }
      // What a split that crashed before its commit left (a directory named as the new
      // region's will be): its rows must never come back.
      const stale = join(
        dataDir,
        'tables',
        `t@${createHash('sha256').update('m', 'latin1').digest('hex').slice(0, 16)}`,
      );
      mkdirSync(stale, { recursive: true });
      writeFileSync(join(stale, 'junk'), 'not a region');
      const split = await rows(server.url, 'split', 't', 'm');
      assert.equal(split.code, 0, split.stderr);
      assert.match(split.stdout, /^split table t: .*2 regions, split at m/);
      assert.ok(!existsSync(join(stale, 'junk')));
      const bad = await rows(server.url, 'split', 't', 'm');
      assert.equal(bad.code, 1);
      assert.match(bad.stderr, /already split at m.*INVALID_ARGUMENT/);
      server.child.kill('SIGKILL');
      await exitOf(server.child);
      server = await serve(dataDir);
      const scan = await rows(server.url, 'scan', 't', '--json');
      assert.equal(scan.code, 0, scan.stderr);
      const scanned = scan.stdout
        .trim()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l).row as string);
      assert.deepEqual(scanned, ROWS);
      const describe = await rows(server.url, 'describe', 't');
      assert.match(describe.stdout, /2 regions, split at m/);
      assert.deepEqual(
        readdirSync(join(dataDir, 'tables'))
          .filter((e) => e.startsWith('t@'))
          .map((e) => e.length),
        [18],
      );
    } finally {
      server.child.kill('SIGKILL');
      await exitOf(server.child);
    }
  });
});
