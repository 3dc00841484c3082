// The fleet's leases and claims in the real PostgreSQL: a claim is exclusive while its owner's
// lease is live, an expired member cannot come back, and every claim raises the epoch.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { PostgresCatalogStore } from '../../src/rows/postgres-catalog-store.js';
import { checkTableDescriptor } from '../../src/rows/table-descriptor.js';
import { FleetStore } from '../../src/server/fleet-store.js';
import { dropStoragePrefixes, POSTGRES_URL } from '../fixtures/db-servers.js';
import { sleep } from '../helpers.js';

const prefixes: string[] = [];

async function store(prefix = `lsm_${randomBytes(4).toString('hex')}`): Promise<FleetStore> {
  prefixes.push(prefix);
  return FleetStore.open({ database: POSTGRES_URL, tablePrefix: prefix });
}

after(() => dropStoragePrefixes(prefixes));

describe('FleetStore', () => {
  it('a claim is exclusive while its owner’s lease is live, and taken over once it ran out', async () => {
    const prefix = `lsm_${randomBytes(4).toString('hex')}`;
    const a = await store(prefix);
    const b = await store(prefix);
    try {
      const ida = await a.join('127.0.0.1:1', 600);
      const idb = await b.join('127.0.0.1:2', 60_000);
      assert.notEqual(ida, idb);
      await a.addRegions(['tables/t', 'tables/t@00']);
      const e1 = await a.claim(ida, 'tables/t');
      assert.ok(e1 !== undefined && e1 > 0);
      assert.equal(await b.claim(idb, 'tables/t'), undefined, 'refused while a’s lease is live');
      assert.equal(await a.claim(ida, 'tables/t'), undefined, 'not claimed twice');
      await sleep(900);
      assert.equal(await a.renew(ida, 600), false, 'an expired member cannot renew');
      assert.equal(await a.claim(ida, 'tables/t@00'), undefined, 'nor claim');
      const e2 = await b.claim(idb, 'tables/t');
      assert.ok(e2 !== undefined && e2 > (e1 as number), `epoch grows: ${e1} then ${e2}`);
      assert.equal(await a.release(ida, 'tables/t', e1 as number), false, 'a’s release is void');
      const view = await b.view();
      assert.equal(view.regions.find((r) => r.region === 'tables/t')?.owner, idb);
      assert.equal(view.members.find((m) => m.id === ida)?.live, false);
      assert.equal(view.members.find((m) => m.id === idb)?.live, true);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('a live split commits only while its member is live and holds both regions, and the parent still has the range it cut', async () => {
    const prefix = `lsm_${randomBytes(4).toString('hex')}`;
    const a = await store(prefix);
    const b = await store(prefix);
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
      const parent = (await a.claim(ida, 'tables/t@g')) as number;
      // A daughter another live member holds (its split under way) is refused; a fresh one
      // comes with an epoch above every one the storage has seen.
      const theirs = (await b.claimDaughter(idb, 'tables/t@k')) as number;
      assert.equal(await a.claimDaughter(ida, 'tables/t@k'), undefined);
      const daughter = (await a.claimDaughter(ida, 'tables/t@j')) as number;
      assert.ok(daughter > theirs && theirs > parent, `${parent} < ${theirs} < ${daughter}`);
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
      // Refused (nothing changed): a stale epoch, a region of another member, another range.
      for (const [wrong, why] of [
        [{ parentEpoch: parent - 1 }, /no longer this server's/],
        [{ daughter: 'tables/t@k', daughterEpoch: theirs }, /no longer this server's/],
        [{ endKey: 'q' }, /split meanwhile/],
        [{ table: 'gone' }, /no longer this server's|dropped/],
      ] as const) {
        const out = await a.commitSplit(ida, { ...split, ...wrong });
        assert.ok('refused' in out && why.test(out.refused), JSON.stringify(out));
        assert.equal(await splitsNow(), 'g,p');
      }
      const out = await a.commitSplit(ida, split);
      assert.ok('recorded' in out, JSON.stringify(out));
      assert.deepEqual(out.recorded.splits, ['g', 'j', 'p']);
      assert.equal(await splitsNow(), 'g,j,p');
      // The same split again: the parent's range is no longer [g, p).
      const again = await a.commitSplit(ida, split);
      assert.ok('refused' in again && /split meanwhile/.test(again.refused));
      // A member whose lease ran out commits nothing.
      const idc = await a.join('127.0.0.1:3', 300);
      const e = (await a.claim(idc, 'tables/t@p')) as number;
      const d2 = (await a.claimDaughter(idc, 'tables/t@x')) as number;
      await sleep(500);
      const late = await a.commitSplit(idc, {
        ...split,
        parent: 'tables/t@p',
        parentEpoch: e,
        daughter: 'tables/t@x',
        daughterEpoch: d2,
        startKey: 'p',
        endKey: '',
        key: 'x',
      });
      assert.ok('refused' in late && /lease ran out/.test(late.refused), JSON.stringify(late));
      assert.equal(await splitsNow(), 'g,j,p');
    } finally {
      await catalog.close();
      await a.close();
      await b.close();
    }
  });

  it('a release, or leaving, frees the regions at once', async () => {
    const prefix = `lsm_${randomBytes(4).toString('hex')}`;
    const a = await store(prefix);
    const b = await store(prefix);
    try {
      const ida = await a.join('127.0.0.1:1', 60_000);
      const idb = await b.join('127.0.0.1:2', 60_000);
      await a.addRegions(['r1', 'r2']);
      const e1 = (await a.claim(ida, 'r1')) as number;
      await a.claim(ida, 'r2');
      assert.equal(await a.release(ida, 'r1', e1), true);
      assert.ok((await b.claim(idb, 'r1')) !== undefined);
      // A leaving member takes nothing.
      assert.equal(await a.renew(ida, 60_000, true), true);
      await b.release(
        idb,
        'r1',
        (await b.view()).regions.find((r) => r.region === 'r1')?.epoch ?? 0,
      );
      assert.equal(await a.claim(ida, 'r1'), undefined, 'a leaving member claims nothing');
      await a.leave(ida);
      assert.ok((await b.claim(idb, 'r2')) !== undefined, 'what the member held is free');
      assert.equal(
        (await b.view()).members.some((m) => m.id === ida),
        false,
      );
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('reconnects after its connection was killed', async () => {
    const prefix = `lsm_${randomBytes(4).toString('hex')}`;
    const a = await store(prefix);
    try {
      const id = await a.join('127.0.0.1:1', 60_000);
      const c = new pg.Client({ connectionString: POSTGRES_URL });
      await c.connect();
      await c.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'locksmith fleet' AND query LIKE $1",
        [`%${prefix}_fleet_members%`],
      );
      await c.end();
      // The first statement may fail (IO_ERROR) or find the break already seen and reconnect.
      await a
        .renew(id, 60_000)
        .catch((err: { code?: string }) => assert.equal(err.code, 'IO_ERROR'));
      assert.equal(await a.renew(id, 60_000), true, 'the next statement reconnects');
    } finally {
      await a.close();
    }
  });
});
