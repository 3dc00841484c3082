/**
 * `locksmith serve --ha etcd`, two real servers on one data directory and a real 3-member etcd
 * cluster: one master, one slave; rows written through a client that knows both; kill -9 of the
 * master; the slave becomes master with a larger token (the storage epoch) and serves every
 * acknowledged row. Skipped when etcd is not installed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { connect } from '../../src/client/locksmith-client.js';
import { Get, Put } from '../../src/rows/index.js';
import { eventually, tempDir } from '../helpers.js';
import { EtcdCluster, etcdMissing } from '../store/etcd-cluster.js';
import { type HaServer, haStatus, masterToken, oneCall, startHa } from './ha-fixture.js';

const missing = etcdMissing();
const LEASE_MS = 2000;
/** Generous: the machine runs other suites; the bound is the lease, this is the noise. */
const MARGIN_MS = 10_000;

describe('master/slave servers with --ha etcd', { concurrency: false }, () => {
  let cluster: EtcdCluster | undefined;
  before(async () => {
    if (missing === undefined) {
      cluster = await EtcdCluster.start(3, { heartbeatMs: 50, electionMs: 500 });
    }
  });
  after(async () => {
    await cluster?.close();
  });

  it('one master, one slave; kill -9 of the master: the slave takes over with a larger token and every row', async (t) => {
    if (missing !== undefined) {
      t.skip(missing);
      return;
    }
    using data = tempDir('locksmith-ha-etcd-');
    const ha = [
      '--ha',
      'etcd',
      '--etcd',
      (cluster as EtcdCluster).endpoints.join(','),
      '--election',
      `locksmith-test/serve-${process.pid}`,
      '--lease',
      `${LEASE_MS / 1000}s`,
    ];
    const first = await startHa(data.path, ha);
    let second: HaServer | undefined;
    try {
      const firstToken = await eventually(() => masterToken(first), 20_000, 'a master');
      second = await startHa(data.path, ha);
      const slave = second;
      await eventually(
        () => slave.proc.line(/: slave: waiting for etcd election .* is led by/),
        10_000,
        'the second server waiting as a slave',
      );
      assert.equal(masterToken(slave), undefined, 'one master at a time');
      assert.equal((await haStatus(first)).role, 'master');
      assert.equal((await haStatus(first)).token, firstToken);
      assert.equal((await haStatus(slave)).role, 'slave');

      // A client that knows both servers writes through the master.
      const acknowledged: string[] = [];
      {
        await using client = await connect([first.proc.url, slave.proc.url]);
        await client.createTable('t', ['f']);
        const table = client.table('t');
        for (let i = 0; i < 20; i++) {
          await table.put(new Put(`row-${i}`).add('f', 'q', `v${i}`));
          acknowledged.push(`row-${i}`);
        }
      }

      const killedAt = Date.now();
      await first.proc.kill9();
      await eventually(
        async () => {
          try {
            await oneCall(slave.proc.port);
            return true;
          } catch {
            return false;
          }
        },
        LEASE_MS + MARGIN_MS,
        'the slave to serve',
        20,
      );
      t.diagnostic(
        `kill -9 -> first successful call: ${Date.now() - killedAt} ms (lease ${LEASE_MS} ms)`,
      );
      const secondToken = await eventually(() => masterToken(slave), 5_000, 'the new master line');
      assert.ok(secondToken > firstToken, `token ${secondToken} > ${firstToken}`);
      const status = await haStatus(slave);
      assert.equal(status.role, 'master');
      assert.equal(status.token, secondToken);

      // The same client addresses (the dead one first) reach the new master: reads and a put.
      {
        await using client = await connect([first.proc.url, slave.proc.url]);
        const table = client.table('t');
        for (const [i, row] of acknowledged.entries()) {
          const result = await table.get(new Get(row));
          assert.equal(result.getValue('f', 'q')?.toString(), `v${i}`, `acknowledged ${row}`);
        }
        await table.put(new Put('after').add('f', 'q', 'failover'));
        const got = await table.get(new Get('after'));
        assert.equal(got.getValue('f', 'q')?.toString(), 'failover');
      }
    } finally {
      await first.proc.kill9().catch(() => undefined);
      if (second !== undefined) assert.equal(await second.proc.stop(), 0, 'a clean stop');
    }
  });
});
