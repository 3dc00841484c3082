/**
 * Server-side scanners (HBase's scanner leases): a scan pages through `nextRows` with a
 * scanner id that only its session can use; a scanner nobody reads for a lease is closed, and
 * the MVCC read point it pinned is released, so old versions can be pruned again.
 */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Put, type Region, Scan } from '../../src/rows/index.js';
import type { RegionRange } from '../../src/server/table-regions.js';
import { encodeScan } from '../../src/wire/rows-codec.js';
import { eventually } from '../helpers.js';
import { RawClient } from './raw-client.js';
import { client, startServer } from './server-fixture.js';

describe('server scanners', () => {
  it('a scan pages through every row, in order, each row consistent', async () => {
    await using server = await startServer();
    await using a = await client(server);
    await a.createTable('t', ['f']);
    const t = a.table('t');
    for (let i = 0; i < 250; i++) {
      await t.put(new Put(`row${String(i).padStart(3, '0')}`).add('f', 'q', String(i)));
    }
    const rows: string[] = [];
    for await (const r of t.scan(new Scan({ startRow: 'row010', stopRow: 'row240' }))) {
      rows.push(r.row.toString());
    }
    assert.equal(rows.length, 230);
    assert.equal(rows[0], 'row010');
    assert.equal(rows.at(-1), 'row239');
    assert.equal(server.scanners.size, 0, 'a finished scan leaves no scanner');
  });

  it('breaking out of a scan closes its scanner on the server', async () => {
    await using server = await startServer();
    await using a = await client(server);
    await a.createTable('t', ['f']);
    for (let i = 0; i < 300; i++) await a.table('t').put(new Put(`r${i}`).add('f', 'q', 'v'));
    for await (const _ of a.table('t').scan(new Scan())) break;
    await eventually(() => server.scanners.size === 0, 5_000, 'the scanner to close');
  });

  it("another session cannot read a session's scanner (conformance V10)", async () => {
    await using server = await startServer();
    await using a = await client(server);
    await a.createTable('t', ['f']);
    for (let i = 0; i < 5; i++) await a.table('t').put(new Put(`r${i}`).add('f', 'q', 'v'));
    const { raw: owner } = await RawClient.session(server.port);
    const [id] = (await owner.call('openScanner', ['t', encodeScan(new Scan()), 1])) as [string];
    const { raw: thief } = await RawClient.session(server.port);
    await assert.rejects(thief.call('nextRows', [id, 10]), { code: 'LEASE_EXPIRED' });
    const [rows] = (await owner.call('nextRows', [id, 10])) as [unknown[]];
    assert.equal(rows.length, 4);
    owner.destroy();
    thief.destroy();
  });

  it('an abandoned scanner is reclaimed after its lease and its read point released (conformance V10)', async () => {
    await using server = await startServer({ leasePeriodMs: 300 });
    await using a = await client(server);
    await a.createTable('t', [{ name: 'f', maxVersions: 1 }]);
    const t = a.table('t');
    await t.put(new Put('r').add('f', 'q', 'v1'));
    await t.put(new Put('s').add('f', 'q', 'v1'));
    const { raw } = await RawClient.session(server.port, { sessionLeaseMs: 60_000 });
    const [id] = (await raw.call('openScanner', ['t', encodeScan(new Scan()), 1])) as [string];
    assert.equal(typeof id, 'string');
    for (let i = 2; i <= 5; i++) await t.put(new Put('r').add('f', 'q', `v${i}`));
    const region = (server.catalog.regions('t').ranges()[0] as RegionRange).region as Region;
    await region.flush();
    const pinned = region.cellCount;
    assert.ok(pinned > 2, `versions the open scanner can see are kept (${pinned} cells)`);
    // Nobody reads the scanner; the session stays alive (pings), the scanner does not.
    const keepAlive = setInterval(() => raw.send([1, 900, 'ping', []]), 100);
    try {
      await eventually(() => server.scanners.size === 0, 10_000, 'the scanner lease to run out');
    } finally {
      clearInterval(keepAlive);
    }
    await region.flush();
    assert.equal(region.cellCount, 2, 'once released, the hidden versions are pruned');
    await assert.rejects(raw.call('nextRows', [id, 1]), { code: 'LEASE_EXPIRED' });
    raw.destroy();
  });
});
