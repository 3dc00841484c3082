/**
 * The servers a master/slave server shows (`status().ha.peers`): a record that stops being
 * rewritten is shown `gone` after PEER_GONE_MS on this server's clock and removed after
 * PEER_PRUNED_MS (every crash leaves one); a record that says `master` with a token older than
 * the known master's is shown `gone` at once, so no status shows two masters; records whose id
 * is not their file name are ignored, never removed.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { systemClock } from '../../src/core/clock.js';
import { HaRole, PEER_GONE_MS, PEER_PRUNED_MS, type PeerStatus } from '../../src/server/ha-role.js';
import { SharedFileLocker } from '../../src/store/shared-file-locker.js';
import { eventually, tempDir } from '../helpers.js';

describe('master/slave: the servers seen', () => {
  it('a silent record is shown gone, then removed; a master with an older token is gone at once', async () => {
    using data = tempDir('locksmith-ha-peers-');
    // Another process's mastership keeps this role a slave, whatever its clock says.
    const holder = new SharedFileLocker({ directory: data.path, acquireIntervalMs: 100 });
    const mastership = await holder.start();
    let offset = 0;
    const clock = { ...systemClock, monotonic: () => systemClock.monotonic() + offset };
    const role = new HaRole({
      id: 'me',
      address: '127.0.0.1:1',
      dataDir: data.path,
      options: { locker: new SharedFileLocker({ directory: data.path, acquireIntervalMs: 100 }) },
      clock,
      open: () => Promise.reject(new Error('never master in this test')),
    });
    const servers = join(data.path, 'servers');
    mkdirSync(servers, { recursive: true });
    const record = (id: string, role: string, token: number | null) =>
      JSON.stringify({ id, address: `${id}:7420`, role, since: 1, token, seenAt: Date.now() });
    writeFileSync(join(servers, 'crashed.json'), record('crashed', 'slave', null));
    writeFileSync(join(servers, 'old-master.json'), record('old-master', 'master', 5));
    writeFileSync(join(servers, 'liar.json'), record('../../escape', 'slave', null));
    writeFileSync(
      join(data.path, 'master.json'),
      JSON.stringify({ id: 'new-master', address: 'new:7420', token: 9, since: 2 }),
    );
    role.start();
    try {
      const peers = () => role.status().peers;
      const of = (id: string) => peers().find((p: PeerStatus) => p.id === id);
      await eventually(() => peers().length === 2, 10_000, 'the records read');
      assert.equal(of('crashed')?.state, 'live', 'just read: not yet known to be silent');
      assert.deepEqual(
        [of('old-master')?.role, of('old-master')?.state],
        ['master', 'gone'],
        'a master older than master.json is gone at once',
      );
      assert.equal(of('../../escape'), undefined, 'an id that is not its file name is ignored');

      offset += PEER_GONE_MS + 1;
      assert.equal(of('crashed')?.state, 'gone', 'silent for PEER_GONE_MS on this clock');

      offset += PEER_PRUNED_MS;
      await eventually(
        () => !existsSync(join(servers, 'crashed.json')),
        10_000,
        'the silent record to be removed',
      );
      await eventually(() => of('crashed') === undefined, 10_000, 'status to drop it');
      assert.ok(existsSync(join(servers, 'liar.json')), 'a record not its own is never removed');
      assert.ok(existsSync(join(servers, 'me.json')), 'this server writes its own');
    } finally {
      await role.close();
      await mastership.close();
      await holder.stop();
    }
  });
});
