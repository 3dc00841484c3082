/**
 * A master paused (SIGSTOP) past its lease while a slave takes over: when it resumes
 * (SIGCONT), a write and a table creation that were waiting on its socket are refused — it no
 * longer counts itself master — nothing of them reaches the new master, its session ends with
 * `MASTER_CHANGED`, and it goes back to waiting as a slave.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { connect } from '../../src/client/locksmith-client.js';
import { Get } from '../../src/rows/index.js';
import { eventually, tempDir } from '../helpers.js';
import { type HaServer, haStatus, masterToken, sqliteLeaseFlags, startHa } from './ha-fixture.js';
import { RawClient } from './raw-client.js';

/** A put of one cell as the wire carries it (`f:q = value` on `row`). */
const wirePut = (row: string, value: string) => [
  Buffer.from(row),
  null,
  null,
  [['f', Buffer.from('q'), Buffer.from(value), null]],
];

/** The answer to call `id` or the end of the connection, whichever comes first. */
async function outcome(raw: RawClient, id: number): Promise<string> {
  try {
    const m = await raw.next((x) => (x[0] === 1 || x[0] === 2) && x[1] === id, 20_000);
    return m[0] === 1 ? 'ok' : String(m[2]);
  } catch {
    return raw.closed ? 'closed' : 'no answer';
  }
}

describe('master/slave servers: a paused master', () => {
  it('refuses, after SIGCONT, the calls it received while a newer master served', async () => {
    using data = tempDir('locksmith-ha-paused-');
    using db = tempDir('locksmith-ha-paused-db-');
    const ha = sqliteLeaseFlags(db.path);
    const first = await startHa(data.path, ha);
    let second: HaServer | undefined;
    try {
      const firstToken = await eventually(() => masterToken(first), 20_000, 'a master');
      second = await startHa(data.path, ha);
      const slave = second;
      await eventually(() => slave.proc.line(/: slave: waiting for /), 10_000, 'a slave');
      {
        await using client = await connect(first.proc.url);
        await client.createTable('t', ['f']);
      }
      const { raw } = await RawClient.session(first.proc.port, { sessionLeaseMs: 60_000 });
      raw.socket.on('error', () => undefined);

      first.proc.proc.kill('SIGSTOP');
      let resumed = false;
      try {
        const secondToken = await eventually(
          () => masterToken(slave),
          20_000,
          'the slave to take over from the paused master',
        );
        assert.ok(secondToken > firstToken);
        // Calls that reach the paused master's socket now; it reads them when it resumes.
        raw.send([1, 101, 'put', ['t', wirePut('paused-row', 'stale'), null]]);
        raw.send([1, 102, 'createTable', ['paused-table', ['f'], null]]);
        first.proc.proc.kill('SIGCONT');
        resumed = true;
        const answers = [await outcome(raw, 101), await outcome(raw, 102)];
        for (const answer of answers) {
          assert.ok(
            ['NOT_MASTER', 'closed', 'FENCED'].includes(answer),
            `a call to the deposed master must fail, got ${answers.join(', ')}`,
          );
        }
        // Its session ended with MASTER_CHANGED (unless the connection went first).
        const ended = raw.messages.find((m) => m[0] === 2 && m[1] === 0);
        if (ended !== undefined) assert.equal(ended[2], 'MASTER_CHANGED');
        await raw.whenClosed(15_000);
      } finally {
        if (!resumed) first.proc.proc.kill('SIGCONT');
      }

      // Nothing of them reached the new master; the old one waits as a slave again.
      {
        await using client = await connect(slave.proc.url);
        assert.deepEqual(await client.listTables(), ['t']);
        const row = await client.table('t').get(new Get('paused-row'));
        assert.equal(row.isEmpty, true, 'the stale put is nowhere');
      }
      await eventually(
        () => first.proc.line(/: slave: waiting for .*\(was master: /),
        15_000,
        'the deposed master to wait as a slave',
      );
      await eventually(
        async () => (await haStatus(first)).role === 'slave',
        5_000,
        'status role slave',
      );
    } finally {
      await first.proc.kill9().catch(() => undefined);
      if (second !== undefined) assert.equal(await second.proc.stop(), 0);
    }
  });
});
