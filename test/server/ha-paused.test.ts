/**
 * A master paused (SIGSTOP) past its lease while a slave takes over: when it resumes
 * (SIGCONT), a write and a table creation that were waiting on its socket are refused — it no
 * longer counts itself master — nothing of them reaches the new master, its session ends with
 * `MASTER_CHANGED`, and it goes back to waiting as a slave. And a client of the paused master
 * finds the new one while the old one is still paused: the paused process keeps
 * accepting TCP connections (the kernel does that for it) and never answers.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { handshakeTimeoutMs } from '../../src/client/client-connection.js';
import { connect, type FailoverEvent } from '../../src/client/locksmith-client.js';
import type { LockLostError } from '../../src/core/errors.js';
import { Get, Put } from '../../src/rows/index.js';
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
  it('refuses, after SIGCONT, the calls it received while a newer master served (conformance M6)', async () => {
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

  it('a client of the paused master finds the new master while the old one is still paused (conformance M7)', async (t) => {
    using data = tempDir('locksmith-ha-paused-client-');
    using db = tempDir('locksmith-ha-paused-client-db-');
    const ha = sqliteLeaseFlags(db.path);
    const first = await startHa(data.path, ha);
    let second: HaServer | undefined;
    let paused = false;
    // The servers are unref'd children and the client's reconnect timers unref'd: something
    // must keep this process alive while the client fails over.
    const alive = setInterval(() => undefined, 1000);
    try {
      const firstToken = await eventually(() => masterToken(first), 20_000, 'a master');
      second = await startHa(data.path, ha);
      const slave = second;
      await eventually(() => slave.proc.line(/: slave: waiting for /), 10_000, 'a slave');
      const connectTimeoutMs = 8_000;
      // A session lease shorter than the takeover (the locker's 2 s lease): the client gives
      // the session up, and looks for a master, while the old one is paused and the slave not
      // yet master — the case that waited for the old master to resume.
      await using client = await connect(`locksmith://${first.address},${slave.address}`, {
        sessionLeaseMs: 1_000,
        connectTimeoutMs,
      });
      assert.equal(client.master, first.address);
      await client.createTable('t', ['f']);
      await client.table('t').put(new Put('before', {}).add('f', 'q', 'on-first'));
      const lock = await client.table('t').lockRow('held');
      const failover = once(client, 'failover') as Promise<[FailoverEvent]>;

      first.proc.proc.kill('SIGSTOP');
      paused = true;
      const pausedAt = performance.now();
      // When the new master starts serving, as its own log says (polled).
      let servingAt = 0;
      const serving = eventually(
        () => {
          if (masterToken(slave) === undefined) return false;
          servingAt = performance.now();
          return true;
        },
        60_000,
        'the slave to take over',
        20,
      );
      let timer: NodeJS.Timeout | undefined;
      const [event] = await Promise.race([
        failover,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new Error('the client did not reach the new master while the old one was paused'),
              ),
            60_000,
          );
        }),
      ]).finally(() => clearTimeout(timer));
      const failedOverAt = performance.now();
      await serving;
      assert.equal(paused, true, 'the old master is still paused');
      const secondToken = masterToken(slave) as number;
      assert.ok(secondToken > firstToken);
      assert.deepEqual(event, { from: first.address, to: slave.address, epoch: secondToken });
      assert.equal(client.master, slave.address);
      assert.equal(lock.signal.aborted, true, 'the row lock did not survive the change of master');
      assert.ok(
        ['MASTER_CHANGED', 'SESSION_EXPIRED'].includes((lock.signal.reason as LockLostError).code),
        (lock.signal.reason as Error).message,
      );
      const lag = failedOverAt - servingAt;
      t.diagnostic(
        `paused → new master serving ${Math.round(servingAt - pausedAt)} ms; → the client's new session ${Math.round(failedOverAt - pausedAt)} ms (${Math.round(lag)} ms after the new master served)`,
      );
      // The contract: past the wedged old master within one handshake bound, plus one backoff
      // (at most 2 s) between rounds of the list; a generous margin for a busy machine.
      const bound = handshakeTimeoutMs(connectTimeoutMs, 2) + 2_000;
      assert.ok(
        lag < bound + 5_000,
        `the client reached the new master ${Math.round(lag)} ms after it served`,
      );
      // The client works on the new master, with what was acknowledged on the old one.
      const table = client.table('t');
      assert.equal((await table.get(new Get('before'))).getValue('f', 'q')?.toString(), 'on-first');
      await table.put(new Put('after', {}).add('f', 'q', 'on-second'));
      const again = await table.lockRow('held');
      await again.close();
    } finally {
      clearInterval(alive);
      if (paused) first.proc.proc.kill('SIGCONT');
      await first.proc.kill9().catch(() => undefined);
      if (second !== undefined) assert.equal(await second.proc.stop(), 0);
    }
  });
});
