/**
 * Master/slave servers (`locksmith serve --ha`), as real processes on one data directory: one
 * master, one slave that names the master to clients; rows written through the master; the
 * master killed with SIGKILL; the slave takes over with a larger token within the locker's
 * bound and serves every acknowledged row; a session of the old master is resumed there
 * (durable sessions). Each locker's failover time (kill → first successful call) is printed.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { connect } from '../../src/client/locksmith-client.js';
import { Get, Put } from '../../src/rows/index.js';
import { urlOf as databaseUrl, uniqueTable } from '../fixtures/db-servers.js';
import { eventually, sleep, tempDir } from '../helpers.js';
import {
  type HaServer,
  haStatus,
  masterToken,
  oneCall,
  sqliteLeaseFlags,
  startHa,
} from './ha-fixture.js';
import { RawClient } from './raw-client.js';

/** Generous: the machine runs other suites; the bound is the locker's, this is the noise. */
const MARGIN_MS = 3000;

/**
 * The whole proof for one locker: `ha` are the serve flags, `boundMs` the locker's takeover
 * bound after a SIGKILL (without the margin).
 */
async function failover(name: string, dataDir: string, ha: string[], boundMs: number) {
  const first = await startHa(dataDir, ha);
  let second: HaServer | undefined;
  try {
    const firstToken = await eventually(() => masterToken(first), 20_000, `${name}: a master`);
    second = await startHa(dataDir, ha);
    const slave = second;
    await eventually(
      () => slave.proc.line(/: slave: waiting for /),
      10_000,
      `${name}: the second server waiting as a slave`,
    );
    assert.equal(masterToken(slave), undefined, 'one master at a time');

    // The slave refuses a HELLO, names the master, and closes.
    await eventually(
      async () => (await haStatus(slave)).master !== undefined,
      10_000,
      'the slave to read master.json',
    );
    const refused = await RawClient.open(slave.proc.port);
    refused.send([0, 1, {}]);
    const answer = await refused.next((m) => m[0] === 2);
    assert.deepEqual(answer.slice(0, 3), [2, 0, 'NOT_MASTER']);
    assert.equal(answer[4], true, 'NOT_MASTER is retryable (elsewhere)');
    assert.deepEqual(answer[5], { master: first.address });
    await refused.whenClosed();

    // Status on both shows the roles.
    const masterHa = await haStatus(first);
    assert.equal(masterHa.role, 'master');
    assert.equal(masterHa.token, firstToken);
    const slaveHa = await haStatus(slave);
    assert.equal(slaveHa.role, 'slave');
    assert.deepEqual((slaveHa.master as { address: string }).address, first.address);
    assert.ok(
      (slaveHa.peers as { address: string }[]).some((p) => p.address === first.address),
      'the slave sees the master as a peer',
    );

    // Rows through the master; a session whose WELCOME carries the epoch.
    const acknowledged: string[] = [];
    {
      await using client = await connect(first.proc.url);
      await client.createTable('t', ['f']);
      const table = client.table('t');
      for (let i = 0; i < 40; i++) {
        await table.put(new Put(`row-${i}`).add('f', 'q', `v${i}`));
        acknowledged.push(`row-${i}`);
      }
    }
    const { raw: old, welcome } = await RawClient.session(first.proc.port);
    assert.equal(welcome.epoch, firstToken);
    assert.equal(welcome.role, 'master');
    old.socket.on('error', () => undefined);

    // kill -9 the master; the slave takes over.
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
      boundMs + MARGIN_MS + 10_000,
      `${name}: the slave to serve`,
      20,
    );
    const failoverMs = Date.now() - killedAt;
    process.stdout.write(
      `# ${name}: failover (kill -9 -> first successful call) ${failoverMs} ms (bound ${boundMs} ms + ${MARGIN_MS} ms margin)\n`,
    );
    assert.ok(
      failoverMs < boundMs + MARGIN_MS,
      `${name}: failover took ${failoverMs} ms, over the locker's bound ${boundMs} ms + ${MARGIN_MS} ms`,
    );
    const secondToken = await eventually(() => masterToken(slave), 5_000, 'the new master line');
    assert.ok(secondToken > firstToken, `token ${secondToken} > ${firstToken}`);

    // Every acknowledged row is there.
    {
      await using client = await connect(slave.proc.url);
      const table = client.table('t');
      for (const [i, row] of acknowledged.entries()) {
        const result = await table.get(new Get(row));
        assert.equal(result.getValue('f', 'q')?.toString(), `v${i}`, `acknowledged ${row}`);
      }
    }

    // The old master's session is resumed here (sessions are durable by default), under the
    // new epoch.
    const resume = await RawClient.open(slave.proc.port);
    resume.send([0, 1, { session: welcome.session, epoch: firstToken }]);
    const resumed = await resume.next((m) => m[0] === 0 || m[0] === 2);
    assert.equal(resumed[0], 0, `resumed: ${JSON.stringify(resumed)}`);
    const w = resumed[2] as { resumed: boolean; session: string; epoch: number; role: string };
    assert.equal(w.resumed, true);
    assert.equal(w.session, welcome.session);
    assert.equal(w.epoch, secondToken);
    assert.equal(w.role, 'master');
    resume.socket.destroy();

    const newHa = await haStatus(slave);
    assert.equal(newHa.role, 'master');
    assert.equal(newHa.token, secondToken);
    const failovers = newHa.failovers as { role: string; token: number }[];
    assert.deepEqual(failovers.at(-1)?.role, 'master');
    assert.equal(failovers.at(-1)?.token, secondToken);
    // The killed master's record still says master: the new one shows it gone at once (an older
    // token), so no status ever shows two masters.
    const peers = newHa.peers as { address: string; role: string; state: string }[];
    const dead = peers.find((p) => p.address === first.address);
    assert.deepEqual([dead?.role, dead?.state], ['master', 'gone'], JSON.stringify(peers));
    assert.equal(peers.filter((p) => p.role === 'master' && p.state === 'live').length, 0);
    return failoverMs;
  } finally {
    await first.proc.kill9().catch(() => undefined);
    if (second !== undefined) assert.equal(await second.proc.stop(), 0, 'a clean stop');
  }
}

describe('master/slave servers: failover after kill -9', { concurrency: false }, () => {
  it('shared-file (a lock file in the data directory) (conformance M1, M2)', async () => {
    using data = tempDir('locksmith-ha-file-');
    // The slave's retry (250 ms) plus its post-acquire pause (the keep-alive period, 1 s).
    await failover(
      'shared-file',
      data.path,
      ['--ha', 'shared-file', '--acquire-interval', '250ms', '--renew', '1s'],
      1250,
    );
  });

  it('lease-database on SQLite (conformance M1, M2)', async () => {
    using data = tempDir('locksmith-ha-sqlite-');
    using db = tempDir('locksmith-ha-sqlite-db-');
    // At most one lease after the last renewal, plus one renew period of polling.
    await failover('lease-database (SQLite)', data.path, sqliteLeaseFlags(db.path), 2500);
  });

  it('lease-database on PostgreSQL (conformance M1, M2)', async () => {
    using data = tempDir('locksmith-ha-pg-');
    const table = uniqueTable();
    await failover(
      'lease-database (PostgreSQL)',
      data.path,
      [
        '--ha',
        'lease-database',
        '--db',
        databaseUrl('postgres', data.path),
        '--lock-table',
        table,
        '--lease',
        '2s',
        '--renew',
        '500ms',
      ],
      2500,
    );
  });
});

/** The token of the server's next mastership after the one of `token`. */
function masteredAgain(server: HaServer, token: number): Promise<number> {
  return eventually(
    () => {
      const t = masterToken(server);
      return t !== undefined && t !== token ? t : undefined;
    },
    15_000,
    'mastership again',
  );
}

describe('master/slave servers: a master that loses its lock', () => {
  it('(--sessions memory) ends every session with MASTER_CHANGED, waits as a slave, and takes over again with a new token (conformance M3)', async () => {
    using data = tempDir('locksmith-ha-loss-');
    const server = await startHa(data.path, [
      '--ha',
      'shared-file',
      '--acquire-interval',
      '250ms',
      '--sessions',
      'memory',
    ]);
    try {
      const token = await eventually(() => masterToken(server), 20_000, 'a master');
      const { raw } = await RawClient.session(server.proc.port);
      // The lock file deleted under the master: its locker notices (within about a second).
      rmSync(join(data.path, 'lock'));
      const ended = await raw.next((m) => m[0] === 2 && m[1] === 0, 15_000);
      assert.equal(ended[2], 'MASTER_CHANGED');
      await raw.whenClosed();
      await eventually(
        () => server.proc.line(/: slave: waiting for .*\(was master: /),
        10_000,
        'the slave line after the loss',
      );
      const again = await masteredAgain(server, token);
      assert.ok(again > token, `token ${again} > ${token}`);
      const ha = await haStatus(server);
      const roles = (ha.failovers as { role: string }[]).map((f) => f.role);
      assert.deepEqual(roles, ['master', 'slave', 'master']);
      await sleep(10);
      await oneCall(server.proc.port);
    } finally {
      assert.equal(await server.proc.stop(), 0);
    }
  });
  it('(durable sessions) drops its connections without ending their sessions; when it is master again, they resume', async () => {
    using data = tempDir('locksmith-ha-loss-durable-');
    const server = await startHa(data.path, ['--ha', 'shared-file', '--acquire-interval', '250ms']);
    try {
      const token = await eventually(() => masterToken(server), 20_000, 'a master');
      const { raw, welcome } = await RawClient.session(server.proc.port, {
        sessionLeaseMs: 60_000,
      });
      await raw.call('createTable', ['t', ['f']]);
      const [lockId] = (await raw.call('lockRow', ['t', Buffer.from('r'), null, true])) as [
        string,
        number,
      ];
      rmSync(join(data.path, 'lock'));
      await raw.whenClosed(15_000);
      assert.equal(
        raw.messages.find((m) => m[0] === 2 && m[1] === 0),
        undefined,
        'no session was ended',
      );
      const again = await masteredAgain(server, token);
      const resume = await RawClient.open(server.proc.port);
      resume.send([0, 1, { session: welcome.session, epoch: token }]);
      const back = await resume.next((m) => m[0] === 0 || m[0] === 2);
      assert.equal(back[0], 0, `resumed: ${JSON.stringify(back)}`);
      const w = back[2] as { resumed: boolean; epoch: number; locks: [string, string][] };
      assert.equal(w.resumed, true);
      assert.equal(w.epoch, again);
      assert.deepEqual(w.locks, [[lockId, 't']], 'its lock is held again');
      resume.socket.destroy();
    } finally {
      assert.equal(await server.proc.stop(), 0);
    }
  });
});
