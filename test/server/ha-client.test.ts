/**
 * The client with master/slave servers: given both addresses, the
 * client is sent by the slave to the master (NOT_MASTER with the master's address); after a
 * `kill -9` of the master it follows the server that took over (a new epoch), and every write
 * it saw acknowledged is there. With durable sessions (the default) it resumes the same
 * session there: its row lock keeps its token, its puts under it succeed, and no other client
 * can take the row meanwhile. With `--sessions memory` its row lock handles abort with
 * `MASTER_CHANGED` and it opens a new session.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { connect, type FailoverEvent } from '../../src/client/locksmith-client.js';
import type { LockLostError } from '../../src/core/errors.js';
import { Get, Put } from '../../src/rows/index.js';
import { eventually, tempDir } from '../helpers.js';
import { type HaServer, masterToken, startHa } from './ha-fixture.js';

describe('the client with master/slave servers', () => {
  for (const mode of ['durable', 'memory'] as const) {
    it(`follows the master, and after a kill -9 the slave that takes over (--sessions ${mode}; conformance M1, M2, M7)`, async () => {
      using data = tempDir('locksmith-ha-client-');
      const ha = [
        '--ha',
        'shared-file',
        '--acquire-interval',
        '250ms',
        '--renew',
        '1s',
        '--sessions',
        mode,
      ];
      const first = await startHa(data.path, ha);
      let second: HaServer | undefined;
      // The servers are unref'd children and the client's reconnect timers unref'd: something
      // must keep this process alive while the client fails over.
      const alive = setInterval(() => undefined, 1000);
      try {
        const firstToken = await eventually(() => masterToken(first), 20_000, 'a master');
        second = await startHa(data.path, ha);
        const slave = second;
        await eventually(() => slave.proc.line(/: slave: waiting for /), 10_000, 'a slave');
        // master.json is read by the slave within a heartbeat.
        await eventually(
          async () => {
            const status = (await (
              await fetch(`http://127.0.0.1:${slave.httpPort}/status`)
            ).json()) as { ha: { master?: unknown } };
            return status.ha.master !== undefined;
          },
          10_000,
          'the slave to know the master',
        );

        // The slave's address first: it sends the client to the master.
        await using client = await connect(`locksmith://${slave.address},${first.address}`, {
          sessionLeaseMs: 10_000,
        });
        assert.equal(client.master, first.address);
        assert.equal(client.epoch, firstToken);
        await client.createTable('t', ['f']);
        const table = client.table('t');
        const acknowledged: string[] = [];
        for (let i = 0; i < 20; i++) {
          await table.put(new Put(`row-${i}`).add('f', 'q', `v${i}`));
          acknowledged.push(`row-${i}`);
        }
        const lock = await table.lockRow('held');
        const sessionId = client.session?.id;
        const lost: string[] = [];
        client.on('sessionLost', (reason) => lost.push(reason.code));
        const failover = once(client, 'failover') as Promise<[FailoverEvent]>;

        await first.proc.kill9();
        const [event] = await failover;
        const secondToken = await eventually(() => masterToken(slave), 10_000, 'the new master');
        assert.ok(secondToken > firstToken);
        assert.deepEqual(event, { from: first.address, to: slave.address, epoch: secondToken });
        assert.equal(client.master, slave.address);
        if (mode === 'memory') {
          assert.equal(lock.signal.aborted, true, 'the row lock did not survive the failover');
          assert.equal((lock.signal.reason as LockLostError).code, 'MASTER_CHANGED');
        } else {
          assert.deepEqual(lost, [], 'the session was not lost');
          assert.equal(client.session?.id, sessionId, 'the same session, resumed');
          assert.equal(lock.signal.aborted, false, 'the row lock survived the failover');
          lock.ensureValid();
          await using other = await connect(`locksmith://${slave.address}`);
          assert.equal(await other.table('t').tryLockRow('held'), null, 'nobody else gets the row');
          await table.put(new Put('held', { rowLock: lock }).add('f', 'q', 'under the old lock'));
          await lock.close();
        }

        for (const [i, row] of acknowledged.entries()) {
          const result = await table.get(new Get(row));
          assert.equal(result.getValue('f', 'q')?.toString(), `v${i}`, `acknowledged ${row}`);
        }
        const again = await table.lockRow('held');
        assert.ok(again.token > lock.token, 'a new grant has a larger token');
        await again.close();
      } finally {
        clearInterval(alive);
        await first.proc.kill9().catch(() => undefined);
        if (second !== undefined) assert.equal(await second.proc.stop(), 0);
      }
    });
  }
});
