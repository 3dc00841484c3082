// A fleet's leases and claims in a real etcd, its tables in the real PostgreSQL: a claim is
// exclusive while its owner's etcd lease lives and free once it ran out, epochs only grow and
// start above every epoch the storage had seen, and what an etcd claim cannot fence inside a
// PostgreSQL transaction (a split's commit, a lock record) is fenced by the region's storage
// row, which a claimer raises before it reads anything. Skipped where etcd is not installed.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { PostgresCatalogStore } from '../../src/rows/postgres-catalog-store.js';
import { Region } from '../../src/rows/region.js';
import { checkTableDescriptor } from '../../src/rows/table-descriptor.js';
import { EtcdFleetStore } from '../../src/server/etcd-fleet-store.js';
import { FleetLocks, type RegionClaim } from '../../src/server/fleet-locks.js';
import { FleetStore } from '../../src/server/fleet-store.js';
import { Session } from '../../src/server/session.js';
import { dropStoragePrefixes, POSTGRES_URL } from '../fixtures/db-servers.js';
import { eventually } from '../helpers.js';
import { EtcdCluster, etcdMissing } from '../store/etcd-cluster.js';

const missing = etcdMissing();
const prefixes: string[] = [];
let cluster: EtcdCluster | undefined;
before(async () => {
  if (missing === undefined) cluster = await EtcdCluster.start(1);
});
after(async () => {
  await cluster?.close();
  await dropStoragePrefixes(prefixes);
});

function newPrefix(): string {
  const prefix = `lsm_${randomBytes(4).toString('hex')}`;
  prefixes.push(prefix);
  return prefix;
}

function open(prefix: string): Promise<EtcdFleetStore> {
  return EtcdFleetStore.open({
    database: POSTGRES_URL,
    tablePrefix: prefix,
    etcd: { endpoints: (cluster as EtcdCluster).endpoints },
    requestMs: 5_000,
    openTables: () =>
      FleetStore.open({ database: POSTGRES_URL, tablePrefix: prefix, leases: 'etcd' }),
  });
}

async function sql<T>(text: string, args: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: POSTGRES_URL });
  await c.connect();
  try {
    return (await c.query(text, args)).rows as T[];
  } finally {
    await c.end();
  }
}

describe('EtcdFleetStore', { timeout: 120_000 }, () => {
  it('a claim is exclusive while its owner’s etcd lease lives and free once it ran out; epochs grow from above every epoch the storage had seen', async (t) => {
    if (missing !== undefined) return t.skip(missing);
    const prefix = newPrefix();
    // The storage's tables first, with an epoch from before (a fleet on PostgreSQL leases).
    const tables = await FleetStore.open({
      database: POSTGRES_URL,
      tablePrefix: prefix,
      leases: 'etcd',
    });
    await tables.close();
    const old = 4_000_000_000_000_000;
    await sql(`INSERT INTO ${prefix}_regions (region, epoch) VALUES ('tables/old', $1)`, [old]);
    const a = await open(prefix);
    const b = await open(prefix);
    try {
      const ida = await a.join('127.0.0.1:1', 2_000);
      const idb = await b.join('127.0.0.1:2', 60_000);
      await a.addRegions(['tables/t', 'tables/t@00']);
      assert.equal(await b.claim(idb, 'tables/nowhere'), undefined, 'not a region of the fleet');
      const e1 = (await a.claim(ida, 'tables/t')) as number;
      assert.ok(e1 > old, `the first epoch ${e1} is above the storage's ${old}`);
      assert.equal(await b.claim(idb, 'tables/t'), undefined, 'refused while a’s lease lives');
      assert.equal(await a.claim(ida, 'tables/t'), undefined, 'not claimed twice');
      const view = await b.view();
      assert.deepEqual(
        view.members.map((m) => [m.id, m.address, m.live]).sort(),
        [
          [ida, '127.0.0.1:1', true],
          [idb, '127.0.0.1:2', true],
        ].sort(),
      );
      assert.deepEqual(
        view.regions.find((r) => r.region === 'tables/t'),
        { region: 'tables/t', owner: ida, epoch: e1 },
      );
      // a renews no more: etcd lets its lease run out, and with it the member and its claim.
      const e2 = await eventually(() => b.claim(idb, 'tables/t'), 15_000, 'a’s claim to expire');
      assert.ok(e2 > e1, `epoch grows: ${e1} then ${e2}`);
      assert.equal(await a.renew(ida, 2_000), false, 'an expired member cannot renew');
      assert.equal(await a.claim(ida, 'tables/t@00'), undefined, 'nor claim');
      assert.equal(await a.release(ida, 'tables/t', e1), false, 'a’s release is void');
      assert.equal(await b.release(idb, 'tables/t', e1), false, 'nor one with a stale epoch');
      const after = await b.view();
      assert.equal(after.regions.find((r) => r.region === 'tables/t')?.owner, idb);
      assert.equal(
        after.members.some((m) => m.id === ida),
        false,
      );
      // A fresh epoch (an administrative change's) is above every claim's.
      assert.ok((await b.freshEpoch()) > e2);
      // A renewal that tells it is leaving: it claims nothing from then on.
      assert.equal(await b.renew(idb, 60_000, true), true);
      assert.equal((await b.view()).members.find((m) => m.id === idb)?.leaving, true);
      assert.equal(await b.claim(idb, 'tables/t@00'), undefined, 'a leaving member claims nothing');
      await b.leave(idb);
      assert.deepEqual((await b.view()).regions.map((r) => r.owner).filter(Boolean), []);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('a split commits only while the storage’s rows of both regions still have the splitter’s epochs; a claimer’s fence refuses it, and a stale fence is refused', async (t) => {
    if (missing !== undefined) return t.skip(missing);
    const prefix = newPrefix();
    const a = await open(prefix);
    const b = await open(prefix);
    const catalog = await PostgresCatalogStore.open({
      database: POSTGRES_URL,
      tablePrefix: prefix,
      epoch: await a.freshEpoch(),
      fleet: true,
    });
    try {
      await catalog.add(checkTableDescriptor('t', ['f'], { splits: ['g', 'p'] }));
      const ida = await a.join('127.0.0.1:1', 60_000);
      const idb = await b.join('127.0.0.1:2', 60_000);
      await a.addRegions(['tables/t', 'tables/t@g', 'tables/t@p']);
      const theirs = (await b.claimDaughter(idb, 'tables/t@k')) as number;
      assert.equal(await a.claimDaughter(ida, 'tables/t@k'), undefined, 'another’s daughter');
      const again = (await b.claimDaughter(idb, 'tables/t@k')) as number;
      assert.ok(again > theirs, 'claimed again by its own splitter, with a new epoch');
      const parent = (await a.claim(ida, 'tables/t@g')) as number;
      const daughter = (await a.claimDaughter(ida, 'tables/t@j')) as number;
      assert.ok(daughter > parent);
      assert.equal(await a.fence('tables/t@g', parent), true);
      assert.equal(await a.fence('tables/t@j', daughter), true);
      const split = {
        table: 't',
        parent: 'tables/t@g',
        parentEpoch: parent,
        daughter: 'tables/t@j',
        daughterEpoch: daughter,
        startKey: 'g',
        endKey: 'p',
        key: 'j',
      };
      const splitsNow = async () =>
        (await a.descriptors()).find((d) => d.name === 't')?.splits.join();
      for (const [wrong, why] of [
        [{ parentEpoch: parent - 1 }, /no longer this server's/],
        [{ daughter: 'tables/t@k', daughterEpoch: again }, /no longer this server's/],
        [{ endKey: 'q' }, /split meanwhile/],
      ] as const) {
        const out = await a.commitSplit(ida, { ...split, ...wrong });
        assert.ok('refused' in out && why.test(out.refused), JSON.stringify(out));
        assert.equal(await splitsNow(), 'g,p');
      }
      // The parent changes hands (a gave it back; its split is still under way): b's fence
      // refuses a's commit from then on, and a's stale fence is refused in turn.
      assert.equal(await a.release(ida, 'tables/t@g', parent), true);
      const taken = (await b.claim(idb, 'tables/t@g')) as number;
      assert.equal(await b.fence('tables/t@g', taken), true);
      const late = await a.commitSplit(ida, split);
      assert.ok('refused' in late && /no longer this server's/.test(late.refused));
      assert.equal(await splitsNow(), 'g,p');
      assert.equal(await a.fence('tables/t@g', parent), false, 'a stale fence');
      // b, holding the parent and a daughter of its own with their fences, commits.
      const d2 = (await b.claimDaughter(idb, 'tables/t@m')) as number;
      assert.equal(await b.fence('tables/t@m', d2), true);
      const out = await b.commitSplit(idb, {
        ...split,
        parentEpoch: taken,
        daughter: 'tables/t@m',
        daughterEpoch: d2,
        key: 'm',
      });
      assert.ok('recorded' in out, JSON.stringify(out));
      assert.equal(await splitsNow(), 'g,m,p');
    } finally {
      await catalog.close();
      await a.close();
      await b.close();
    }
  });

  it('lock records are fenced by the region’s storage row: refused once the next claimer fenced it, and put back by it', async (t) => {
    if (missing !== undefined) return t.skip(missing);
    const prefix = newPrefix();
    const a = await open(prefix);
    const b = await open(prefix);
    const region = await Region.open({ families: ['f'] });
    const holder = new Session(10_000, false, 'test', performance.now());
    const ida = await a.join('127.0.0.1:1', 60_000);
    const idb = await b.join('127.0.0.1:2', 60_000);
    await a.addRegions(['tables/t']);
    const e1 = (await a.claim(ida, 'tables/t')) as number;
    let claim: RegionClaim | undefined = { region: 'tables/t', epoch: e1 };
    const locksA = new FleetLocks({ ...a.lockTables, member: () => ida, claimOf: () => claim });
    try {
      // Not fenced yet: the storage's row is not a's; nothing is written.
      const l0 = await region.lockRow('r0', { owner: holder, renew: true });
      await assert.rejects(locksA.granted(holder, 't', l0), { code: 'FENCED' });
      assert.equal(await a.fence('tables/t', e1), true);
      const l1 = await region.lockRow('r1', { owner: holder, renew: true });
      await locksA.granted(holder, 't', l1);
      claim = { region: 'tables/t', epoch: e1 - 1 };
      const l2 = await region.lockRow('r2', { owner: holder, renew: true });
      await assert.rejects(locksA.granted(holder, 't', l2), { code: 'FENCED' });
      claim = { region: 'tables/t', epoch: e1 };
      // b takes the region: from its fence on, a writes no record.
      assert.equal(await a.release(ida, 'tables/t', e1), true);
      const e2 = (await b.claim(idb, 'tables/t')) as number;
      assert.equal(await b.fence('tables/t', e2), true);
      await assert.rejects(locksA.granted(holder, 't', l2), { code: 'FENCED' });
      await assert.rejects(locksA.released(l1.lockId), { code: 'FENCED' });
      const claimB = { region: 'tables/t', epoch: e2 };
      const locksB = new FleetLocks({ ...b.lockTables, member: () => idb, claimOf: () => claimB });
      const regionB = await Region.open({ families: ['f'] });
      try {
        await locksB.restore('t', { startKey: '', endKey: '' }, regionB, claimB);
        assert.equal(locksB.orphans, 1, 'r1’s record, put back');
        assert.equal(await regionB.tryLockRow('r1'), null, 'r1 is held');
        assert.notEqual(await regionB.tryLockRow('r2'), null, 'r2 was never recorded');
      } finally {
        await locksB.close();
        await regionB.close();
      }
    } finally {
      await locksA.close();
      await region.close();
      await a.close();
      await b.close();
    }
  });

  it('one kind of fleet per storage prefix: leases in etcd and in PostgreSQL refuse each other’s tables', async (t) => {
    if (missing !== undefined) return t.skip(missing);
    const prefix = newPrefix();
    const a = await open(prefix);
    await a.close();
    await assert.rejects(FleetStore.open({ database: POSTGRES_URL, tablePrefix: prefix }), {
      code: 'INVALID_ARGUMENT',
      message: /belong to a fleet whose leases are in etcd/,
    });
    const other = newPrefix();
    const pgFleet = await FleetStore.open({ database: POSTGRES_URL, tablePrefix: other });
    await pgFleet.close();
    await assert.rejects(open(other), {
      code: 'INVALID_ARGUMENT',
      message: /belong to a fleet whose leases are in PostgreSQL/,
    });
    // A server without --fleet refuses either.
    await assert.rejects(
      PostgresCatalogStore.open({ database: POSTGRES_URL, tablePrefix: prefix }),
      { code: 'INVALID_ARGUMENT', message: /belong to a fleet .*name = 'fleet-etcd'/ },
    );
  });
});
