// A fleet of real `locksmith serve --fleet --ha etcd` processes: the members' leases and the
// regions' claims in a real 3-member etcd cluster, the tables in the real PostgreSQL. A
// member's death (kill -9), pause (SIGSTOP past its lease) and leaving (SIGTERM) move its
// regions with their row locks and lose no acknowledged write; a live split commits there too.
// Skipped where etcd is not installed.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Put } from '../../src/rows/index.js';
import type { ServeProcess } from '../fixtures/serve-process.js';
import { cliPath, eventually, sleep } from '../helpers.js';
import { EtcdCluster, etcdMissing } from '../store/etcd-cluster.js';
import {
  Fleet,
  fleetWithTable,
  LEASE_MS,
  pauseUnderLoad,
  RENEW_MS,
  ROW_PREFIXES,
  SPLITS,
  writers,
} from './fleet-fixture.js';

const missing = etcdMissing();
let cluster: EtcdCluster | undefined;
before(async () => {
  if (missing === undefined)
    cluster = await EtcdCluster.start(3, { heartbeatMs: 50, electionMs: 500 });
});
after(async () => {
  await cluster?.close();
});

/** A fleet whose members keep their leases in the test's etcd cluster. */
function etcdFleet(leaseMs = LEASE_MS): Fleet {
  const endpoints = (cluster as EtcdCluster).endpoints.join(',');
  return new Fleet(leaseMs, [cliPath], ['--ha', 'etcd', '--etcd', endpoints]);
}

describe('a fleet whose leases are in etcd', { timeout: 900_000 }, () => {
  it('spreads 12 regions over 3 servers as keys in etcd; kill -9 of one: the others serve its regions within the lease bound, its row locks held on by their holders (same handle, same token), every acknowledged write there', async (t) => {
    if (missing !== undefined) return t.skip(missing);
    const fleet = etcdFleet();
    try {
      const client = await fleetWithTable(fleet, 3);
      assert.match(
        (fleet.members[0] as ServeProcess).line(/listening on/) ?? '',
        /\(leases in etcd\)/,
      );
      const etcd = (cluster as EtcdCluster).client();
      try {
        const keys = await etcd.getAll().prefix(`locksmith-fleet/${fleet.prefix}/`).keys();
        assert.equal(keys.filter((k) => k.includes('/members/')).length, 3, keys.join(' '));
        assert.equal(keys.filter((k) => k.includes('/claims/')).length, SPLITS.length + 1);
      } finally {
        etcd.close();
      }
      const table = client.table('t');
      const other = await fleet.client(fleet.members[1] as ServeProcess);
      const locks = await Promise.all(ROW_PREFIXES.map((p) => table.lockRow(`${p}-lock`)));
      const tokens = locks.map((l) => l.token);
      const load = writers(fleet, client, 4, 'w');
      await sleep(1000);
      const killedAt = Date.now();
      await (fleet.members[2] as ServeProcess).kill9();
      await fleet.balanced(fleet.members[0] as ServeProcess, fleet.members.slice(0, 2), 30_000);
      const tookMs = Date.now() - killedAt;
      // The contract: a dead member's claims go with its etcd lease (etcd's expiry check runs
      // every 500 ms), and the others claim them at their next look; a generous margin here.
      const bound = LEASE_MS + 500 + 2 * RENEW_MS + 5_000;
      assert.ok(tookMs <= bound, `regions taken over after ${tookMs} ms (bound ${bound} ms)`);
      for (const [i, lock] of locks.entries()) {
        await table.put(new Put(lock.row, { rowLock: lock }).add('f', 'locked', 'yes'));
        assert.equal(lock.signal.aborted, false, `the lock on ${lock.row} is held on`);
        assert.equal(lock.token, tokens[i]);
        assert.equal(await other.table('t').tryLockRow(lock.row), null, `${lock.row} is held`);
      }
      for (const lock of locks) await table.unlockRow(lock);
      const freed = await other.table('t').tryLockRow('a-lock');
      // Tokens order the grants of one row (each region hands out its own, from above the wall
      // clock when it opens), not the grants of different rows.
      assert.ok(
        freed !== null && freed.token > (tokens[0] as number),
        `a later grant of the row, a larger token: ${freed?.token} after ${tokens[0]}`,
      );
      await other.table('t').unlockRow(freed);
      await sleep(500);
      await load.stop();
      await load.check(client);
    } finally {
      await fleet.close();
    }
  });

  it('SIGSTOP of a server past its lease: its regions move; woken, it refuses its calls and rejoins; no acknowledged write is lost', async (t) => {
    if (missing !== undefined) return t.skip(missing);
    const fleet = etcdFleet();
    try {
      const paused = await pauseUnderLoad(fleet);
      await paused.check();
      assert.ok(
        paused.moves.some((m) => (m as { change: string }).change === 'lost'),
        `the paused server lost its regions: ${JSON.stringify(paused.moves)}`,
      );
    } finally {
      await fleet.close();
    }
  });

  it('every claim deleted by hand in etcd: each region is claimed again with a larger epoch, the server that served it lets it go, an old token is refused, a held lock is held on or lost (never held twice), no acknowledged write is lost', async (t) => {
    if (missing !== undefined) return t.skip(missing);
    const fleet = etcdFleet();
    try {
      const client = await fleetWithTable(fleet, 3);
      const table = client.table('t');
      const other = await fleet.client(fleet.members[1] as ServeProcess);
      const locks = await Promise.all(ROW_PREFIXES.map((p) => table.lockRow(`${p}-lock`)));
      const old = await table.lockRow('b-fence');
      await table.unlockRow(old);
      const load = writers(fleet, client, 4, 'd');
      await sleep(500);
      const etcd = (cluster as EtcdCluster).client();
      try {
        const claims = `locksmith-fleet/${fleet.prefix}/claims/`;
        const before = await etcd.getAll().prefix(claims).exec();
        assert.equal(before.kvs.length, SPLITS.length + 1);
        const deletedAt = BigInt(before.header.revision);
        await etcd.delete().prefix(claims);
        // Each server sees at its next look that a region it serves is no longer its own,
        // lets it go, and the regions are claimed again: each by a later write.
        await eventually(
          async () => {
            const now = await etcd.getAll().prefix(claims).exec();
            return (
              now.kvs.length === before.kvs.length &&
              now.kvs.every((kv) => BigInt(kv.mod_revision) > deletedAt)
            );
          },
          30_000,
          'every region claimed again',
        );
      } finally {
        etcd.close();
      }
      await fleet.balanced(fleet.members[0] as ServeProcess, fleet.members, 30_000);
      // Its region was opened again: a token from before is refused on a row nobody holds.
      await assert.rejects(
        table.put(new Put('b-fence', { token: old.token }).add('f', 'q', 'stale')),
        { code: 'STALE_TOKEN' },
      );
      for (const lock of locks) {
        try {
          await table.put(new Put(lock.row, { rowLock: lock }).add('f', 'locked', 'after'));
          assert.equal(lock.signal.aborted, false);
          assert.equal(await other.table('t').tryLockRow(lock.row), null, `${lock.row} is held`);
          await table.unlockRow(lock);
        } catch (err) {
          // Lost with its region: the handle says so, and only then may another take the row.
          assert.equal(lock.signal.aborted, true, `${lock.row}: ${String(err)}`);
          const next = await other.table('t').lockRow(lock.row, { waitMs: 30_000 });
          assert.ok(next.token > lock.token);
          await next.close();
        }
      }
      await sleep(500);
      await load.stop();
      await load.check(client);
    } finally {
      await fleet.close();
    }
  });

  it('splits a live region and hands regions over on SIGTERM (well within a 30 s lease) with their locks; a new server takes its share', async (t) => {
    if (missing !== undefined) return t.skip(missing);
    const fleet = etcdFleet(30_000);
    try {
      const client = await fleetWithTable(fleet, 3);
      const load = writers(fleet, client, 4, 's');
      const table = client.table('t');
      const lock = await table.lockRow('c-x5');
      const description = await client.splitTable('t', 'c-x4');
      assert.ok(description.splits.some((k) => k.toString() === 'c-x4'));
      assert.equal(lock.signal.aborted, false);
      await table.put(new Put('c-x5', { rowLock: lock }).add('f', 'locked', 'yes'));
      const locks = await Promise.all(ROW_PREFIXES.map((p) => table.lockRow(`${p}-lock`)));
      const stoppedAt = Date.now();
      assert.equal(await (fleet.members[2] as ServeProcess).stop(), 0);
      await fleet.balanced(fleet.members[0] as ServeProcess, fleet.members.slice(0, 2), 30_000);
      const tookMs = Date.now() - stoppedAt;
      assert.ok(tookMs < 15_000, `handed over in ${tookMs} ms, without waiting out the 30 s lease`);
      for (const l of [lock, ...locks]) {
        await table.put(new Put(l.row, { rowLock: l }).add('f', 'locked', 'again'));
        assert.equal(l.signal.aborted, false, `the lock on ${l.row} is held on`);
        await table.unlockRow(l);
      }
      const joined = await fleet.start();
      const live = [fleet.members[0], fleet.members[1], joined] as ServeProcess[];
      const per = await fleet.balanced(fleet.members[0] as ServeProcess, live, 30_000);
      assert.ok((per.get(`127.0.0.1:${joined.port}`) ?? 0) >= 4, 'the new server serves its share');
      await sleep(500);
      await load.stop();
      await load.check(client);
      assert.equal((await client.describeTable('t')).splits.length, SPLITS.length + 1);
    } finally {
      await fleet.close();
    }
  });
});
