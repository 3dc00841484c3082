// A fleet's row lock records in the real PostgreSQL: written only under the region's claim,
// put back by the region's next server as orphans, adopted only by their proven holder,
// released when their holder does not come back, and never left behind by a grant released
// in the same group.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { Region } from '../../src/rows/region.js';
import { FleetLocks, type RegionClaim } from '../../src/server/fleet-locks.js';
import { FleetStore } from '../../src/server/fleet-store.js';
import { Session } from '../../src/server/session.js';
import { TableRegions } from '../../src/server/table-regions.js';
import { dropStoragePrefixes, POSTGRES_URL } from '../fixtures/db-servers.js';
import { eventually } from '../helpers.js';

const prefixes: string[] = [];
after(() => dropStoragePrefixes(prefixes));

/** Two members of one new fleet, with the region `tables/t` added. */
async function twoMembers() {
  const prefix = `lsm_${randomBytes(4).toString('hex')}`;
  prefixes.push(prefix);
  const a = await FleetStore.open({ database: POSTGRES_URL, tablePrefix: prefix });
  const b = await FleetStore.open({ database: POSTGRES_URL, tablePrefix: prefix });
  const ida = await a.join('127.0.0.1:1', 60_000);
  const idb = await b.join('127.0.0.1:2', 60_000);
  await a.addRegions(['tables/t']);
  const records = async () => {
    const c = new pg.Client({ connectionString: POSTGRES_URL });
    await c.connect();
    try {
      return (
        await c.query(
          `SELECT encode(row, 'escape') AS row, lock_id, token, holder FROM ${prefix}_fleet_locks ORDER BY row, token`,
        )
      ).rows as { row: string; lock_id: string; token: string; holder: string }[];
    } finally {
      await c.end();
    }
  };
  const insert = async (
    row: string,
    lockId: string,
    token: number,
    holder: string,
    leaseMs: number,
  ) => {
    const c = new pg.Client({ connectionString: POSTGRES_URL });
    await c.connect();
    try {
      await c.query(
        `INSERT INTO ${prefix}_fleet_locks (tbl, row, lock_id, token, holder, renew, lease_ms) VALUES ('t', $1, $2, $3, $4, true, $5)`,
        [Buffer.from(row, 'latin1'), lockId, token, holder, leaseMs],
      );
    } finally {
      await c.end();
    }
  };
  return { a, b, ida, idb, records, insert };
}

function locksOf(store: FleetStore, member: string, claim: () => RegionClaim | undefined) {
  return new FleetLocks({ ...store.lockTables, member: () => member, claimOf: () => claim() });
}

const session = () => new Session(10_000, false, 'test', performance.now());

describe('FleetLocks', { timeout: 120_000 }, () => {
  it('records a grant and its release only under the claim of the region with its epoch; the next server puts it back as an orphan that only its holder adopts', async () => {
    const { a, b, ida, idb, records } = await twoMembers();
    const e1 = (await a.claim(ida, 'tables/t')) as number;
    let claimA: RegionClaim | undefined = { region: 'tables/t', epoch: e1 };
    const locksA = locksOf(a, ida, () => claimA);
    const regionA = await Region.open({ families: ['f'] });
    const holder = session();
    try {
      const l1 = await regionA.lockRow('r1', { owner: holder, renew: true });
      await locksA.granted(holder, 't', l1);
      const l2 = await regionA.lockRow('r2', { owner: holder, renew: true });
      await locksA.granted(holder, 't', l2);
      await locksA.released(l2.lockId);
      assert.deepEqual(
        (await records()).map((r) => [r.row, r.lock_id, Number(r.token)]),
        [['r1', l1.lockId, l1.token]],
      );
      // A stale epoch, or no claim, is refused: nothing written.
      claimA = { region: 'tables/t', epoch: e1 - 1 };
      const l3 = await regionA.lockRow('r3', { owner: holder, renew: true });
      await assert.rejects(locksA.granted(holder, 't', l3), { code: 'FENCED' });
      claimA = undefined;
      await assert.rejects(locksA.granted(holder, 't', l3), { code: 'FENCED' });
      // The region moves: b claims it; a's record writes are fenced from then on.
      claimA = { region: 'tables/t', epoch: e1 };
      assert.equal(await a.release(ida, 'tables/t', e1), true);
      const e2 = (await b.claim(idb, 'tables/t')) as number;
      await assert.rejects(locksA.granted(holder, 't', l3), { code: 'FENCED' });
      await assert.rejects(locksA.released(l1.lockId), { code: 'FENCED' });
      assert.equal((await records()).length, 1, 'the record of r1 stands');
      // b puts it back before serving: r1 is held, for nobody yet.
      const claimB = { region: 'tables/t', epoch: e2 };
      const locksB = locksOf(b, idb, () => claimB);
      const regionB = await Region.open({ families: ['f'] });
      await locksB.restore('t', { startKey: '', endKey: '' }, regionB, claimB);
      assert.equal(locksB.orphans, 1);
      assert.equal(await regionB.tryLockRow('r1'), null, 'r1 is held');
      const regions = new TableRegions([''], [regionB]);
      const adopter = session();
      for (const [row, lockId, proof] of [
        ['r1', l1.lockId, randomBytes(16).toString('base64url')],
        ['r2', l1.lockId, holder.id],
        ['r1', l2.lockId, holder.id],
      ] as const) {
        assert.throws(() => locksB.adopt(adopter, 't', regions, row, lockId, proof), {
          code: 'UNKNOWN_ROW_LOCK',
        });
      }
      const adopted = locksB.adopt(adopter, 't', regions, 'r1', l1.lockId, holder.id);
      assert.equal(adopted.token, l1.token);
      assert.equal(adopted.lockId, l1.lockId);
      assert.equal(locksB.orphans, 0);
      await locksB.granted(adopter, 't', adopted);
      assert.deepEqual(
        (await records()).map((r) => r.holder),
        [adopter.key],
        'the record names its new holder',
      );
      assert.throws(
        () => locksB.adopt(session(), 't', regions, 'r1', l1.lockId, holder.id),
        { code: 'UNKNOWN_ROW_LOCK' },
        'adopted once',
      );
      await regionB.unlockRow(adopted);
      await locksB.released(adopted.lockId);
      assert.deepEqual(await records(), []);
      await locksB.close();
      await regionB.close();
    } finally {
      await locksA.close();
      await regionA.close();
      await a.close();
      await b.close();
    }
  });

  it('of two records of one row the larger token is put back; an orphan whose holder does not come back is released after its lease, its record deleted', async () => {
    const { a, b, ida, records, insert } = await twoMembers();
    const e1 = (await a.claim(ida, 'tables/t')) as number;
    const claim = { region: 'tables/t', epoch: e1 };
    const locks = locksOf(a, ida, () => claim);
    const region = await Region.open({ families: ['f'] });
    const holder = session();
    try {
      await insert('r1', 'AAAAAAAAAAAAAAAAAAA1', 5, holder.key, 60_000);
      await insert('r1', 'AAAAAAAAAAAAAAAAAAA2', 7, holder.key, 60_000);
      await insert('r9', 'AAAAAAAAAAAAAAAAAAA3', 3, holder.key, 300);
      await locks.restore('t', { startKey: '', endKey: 'r5' }, region, claim);
      assert.equal(locks.orphans, 1, 'r9 is outside the range');
      assert.deepEqual(
        (await records()).map((r) => [r.row, Number(r.token)]),
        [
          ['r1', 7],
          ['r9', 3],
        ],
        'the older record of r1 is deleted',
      );
      const later = await Region.open({ families: ['f'] });
      await locks.restore('t', { startKey: 'r5', endKey: '' }, later, claim);
      assert.equal(await later.tryLockRow('r9'), null, 'r9 held for its holder');
      const freed = await eventually(
        async () => (await later.tryLockRow('r9')) ?? false,
        10_000,
        'r9 released',
        50,
      );
      assert.ok(freed.token > 3, 'a larger token');
      await eventually(
        async () => (await records()).every((r) => r.row !== 'r9'),
        10_000,
        'the record of r9 deleted',
        50,
      );
      await later.close();
    } finally {
      await locks.close();
      await region.close();
      await a.close();
      await b.close();
    }
  });

  it('a grant released in the same group as its record leaves no record', async () => {
    const { a, b, ida, records } = await twoMembers();
    const e1 = (await a.claim(ida, 'tables/t')) as number;
    const locks = locksOf(a, ida, () => ({ region: 'tables/t', epoch: e1 }));
    const region = await Region.open({ families: ['f'] });
    const holder = session();
    try {
      const first = await region.lockRow('r0', { owner: holder, renew: true });
      const second = await region.lockRow('r1', { owner: holder, renew: true });
      // The first starts a write; the second's grant and release queue behind it, together.
      const writes = [
        locks.granted(holder, 't', first),
        locks.granted(holder, 't', second),
        locks.released(second.lockId),
      ];
      await Promise.all(writes);
      assert.deepEqual(
        (await records()).map((r) => r.row),
        ['r0'],
      );
    } finally {
      await locks.close();
      await region.close();
      await a.close();
      await b.close();
    }
  });
});
