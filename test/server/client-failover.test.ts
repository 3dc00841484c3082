/**
 * Clients follow the master: a client given several addresses connects to the first
 * that welcomes it, goes where a `NOT_MASTER` refusal points, and when its master goes away
 * (killed with SIGKILL, stepping down, replaced by one of another epoch) says clearly what was
 * lost (its session and every row lock: their handles' signals abort), fails the calls that
 * were in flight with `CONNECTION_LOST`, and sends later calls to the new master.
 *
 * Real servers throughout (a `locksmith serve` child process where a kill matters, in-process
 * servers on their own data directories otherwise). Where a server of this version cannot be
 * made to say something yet (a slave naming its master, a master of another epoch, a master
 * stepping down), a scripted peer speaks those frames of the protocol to the real client.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { connect, type FailoverEvent } from '../../src/client/locksmith-client.js';
import { parseMasterAddress, parseServerAddresses } from '../../src/client/server-address.js';
import { sessionContinuity } from '../../src/client/session-continuity.js';
import type { LockLostError } from '../../src/core/errors.js';
import { Get, Put } from '../../src/rows/index.js';
import { startServeProcess } from '../fixtures/serve-process.js';
import { eventually, tempDir } from '../helpers.js';
import { deadPort } from './dead-port.js';
import { notMaster, ScriptedPeer, welcome } from './scripted-peer.js';
import { startServer } from './server-fixture.js';

const label = (port: number) => `127.0.0.1:${port}`;

/** A scripted master of `epoch`: welcomes, grants `tryLockRow`, never answers `lockRow`, answers anything else with nil. */
function masterScript(epoch: number, session = 's1') {
  let locks = 0;
  return (c: { send(m: unknown[]): void }, m: unknown[]) => {
    if (m[0] === 0) c.send(welcome(session, epoch));
    else if (m[0] === 1 && m[2] === 'tryLockRow') c.send([1, m[1], [`lock-${++locks}`, 1, 60_000]]);
    else if (m[0] === 1 && m[2] !== 'lockRow') c.send([1, m[1], null]);
  };
}

describe('client failover: addresses', () => {
  it('parses a comma list and an array; refuses every malformed address with a clear error', async () => {
    assert.deepEqual(
      parseServerAddresses('locksmith://h1:1,h2:2,[::1]:3').map((a) => [a.label, a.tls]),
      [
        ['h1:1', false],
        ['h2:2', false],
        ['[::1]:3', false],
      ],
    );
    assert.deepEqual(
      parseServerAddresses(['locksmiths://h1:1', 'locksmith://h2']).map((a) => [a.label, a.tls]),
      [
        ['h1:1', true],
        ['h2:7420', false],
      ],
    );
    assert.deepEqual(
      parseServerAddresses('locksmith://h1:1,locksmith://h1:1,h2:2').map((a) => a.label),
      ['h1:1', 'h2:2'],
    );
    // A bare host:port (a list of them) is locksmith://, as redis-cli and etcdctl take them.
    assert.deepEqual(
      parseServerAddresses('127.0.0.1:7420').map((a) => [a.label, a.tls]),
      [['127.0.0.1:7420', false]],
    );
    assert.deepEqual(
      parseServerAddresses('h1:1,h2:2,[::1]:3').map((a) => a.label),
      ['h1:1', 'h2:2', '[::1]:3'],
    );
    for (const [bad, pattern] of [
      ['locksmith://h1:1,,h2:2', /empty address/],
      ['h1:1,,h2:2', /empty address/],
      ['h1:99999', /Invalid server address/],
      ['locksmith://h1:1,http://h2:2', /scheme/],
      ['locksmith://h1:1,h2:99999', /Invalid server address/],
      [[], /empty/],
      [['locksmith://h1:1', 7], /#2 must be a string/],
      [['locksmith://h1:1,h2:2'], /one address per array element/],
      [42, /expected a server address/],
    ] as const) {
      assert.throws(() => parseServerAddresses(bad as never), {
        code: 'INVALID_ARGUMENT',
        message: pattern,
      });
      // connect() refuses before it dials anything.
      await assert.rejects(connect(bad as never), { code: 'INVALID_ARGUMENT', message: pattern });
    }
  });

  it('follows only a well-formed master address, over the same transport', () => {
    assert.equal(parseMasterAddress('10.0.0.2:7420', false)?.label, '10.0.0.2:7420');
    assert.equal(parseMasterAddress('db-2.example:7420', true)?.tls, true);
    assert.equal(parseMasterAddress('[::1]:7420', false)?.label, '[::1]:7420');
    for (const bad of [
      undefined,
      7420,
      '',
      'host-only',
      'h:0',
      'h:70000',
      'locksmith://h:1',
      'h:1/path',
      'user@h:1',
      'a b:1',
    ]) {
      assert.equal(parseMasterAddress(bad, false), undefined, String(bad));
    }
  });

  it('decides whether a WELCOME continues the session: resumed on any epoch (a master that put it back), else gone', () => {
    assert.equal(sessionContinuity(undefined, { resumed: false, epoch: 3 }), 'new');
    assert.equal(sessionContinuity({ epoch: 3 }, { resumed: true, epoch: 3 }), 'resumed');
    assert.equal(sessionContinuity({ epoch: 3 }, { resumed: true, epoch: 4 }), 'resumed');
    assert.equal(sessionContinuity({ epoch: 0 }, { resumed: true, epoch: 5 }), 'resumed');
    assert.equal(sessionContinuity({ epoch: 3 }, { resumed: false, epoch: 4 }), 'masterChanged');
    assert.equal(sessionContinuity({ epoch: 3 }, { resumed: false, epoch: 3 }), 'sessionExpired');
  });
});

describe('client failover: connecting', () => {
  it('a list whose first address is dead connects to the second (conformance M7)', async () => {
    await using b = await startServer();
    const dead = await deadPort();
    await using client = await connect(`locksmith://127.0.0.1:${dead},127.0.0.1:${b.port}`);
    assert.equal(client.master, label(b.port));
    assert.equal(client.epoch, 0);
    assert.equal(client.session?.address, label(b.port));
    await client.createTable('t', ['f']);
    assert.deepEqual(await client.listTables(), ['t']);
  });

  it('when no address answers, the error names every address tried and why (conformance M7)', async () => {
    const [d1, d2] = [await deadPort(), await deadPort()];
    await using slave = await ScriptedPeer.start((c, m) => {
      if (m[0] === 0) {
        c.send(notMaster());
        c.close();
      }
    });
    const err = await connect(
      [`locksmith://127.0.0.1:${d1}`, slave.url, `locksmith://127.0.0.1:${d2}`],
      {
        connectTimeoutMs: 1_500,
      },
    ).then(
      () => assert.fail('connected'),
      (e: Error) => e,
    );
    assert.equal((err as { code?: string }).code, 'CONNECTION_LOST');
    for (const port of [d1, slave.port, d2]) assert.match(err.message, new RegExp(label(port)));
    assert.match(err.message, /NOT_MASTER; it named no usable master address/);
    assert.match(err.message, /ECONNREFUSED/);
  });

  it('a NOT_MASTER refusal naming the master sends the client there (conformance M7)', async () => {
    await using b = await startServer();
    await using slave = await ScriptedPeer.start((c, m) => {
      if (m[0] === 0) {
        c.send(notMaster(label(b.port)));
        c.close();
      }
    });
    // The master is not even in the list: the slave's word is enough.
    await using client = await connect(slave.url);
    assert.equal(client.master, label(b.port));
    assert.equal(slave.accepted, 1);
    await client.createTable('t', ['f']);
  });

  it('a NOT_MASTER naming a malformed address is not followed: the next in the list is tried', async () => {
    await using b = await startServer();
    await using slave = await ScriptedPeer.start((c, m) => {
      if (m[0] === 0) {
        c.send(notMaster('evil.example:7420/../x'));
        c.close();
      }
    });
    await using client = await connect([slave.url, b.url]);
    assert.equal(client.master, label(b.port));
  });

  it('two slaves naming each other: the client backs off instead of spinning, and says so', async () => {
    let portB = 0;
    await using a = await ScriptedPeer.start((c, m) => {
      if (m[0] === 0) {
        c.send(notMaster(label(portB)));
        c.close();
      }
    });
    await using b = await ScriptedPeer.start((c, m) => {
      if (m[0] === 0) {
        c.send(notMaster(label(a.port)));
        c.close();
      }
    });
    portB = b.port;
    await assert.rejects(connect([a.url, b.url], { connectTimeoutMs: 2_000 }), {
      code: 'CONNECTION_LOST',
      message: new RegExp(`${label(b.port)}: .*it names the master ${label(a.port)}`),
    });
    // With the backoff (50 ms doubling to 2 s), two seconds hold a few rounds, not thousands.
    assert.ok(a.accepted + b.accepted < 100, `${a.accepted + b.accepted} attempts`);
  });
});

describe('client failover: losing the master', () => {
  it('server A killed with SIGKILL while the client holds a lock: the client fails over to B (conformance M7)', async (t) => {
    using dataA = tempDir('locksmith-failover-a-');
    const a = await startServeProcess(dataA.path);
    try {
      await using b = await startServer();
      await using setupB = await connect(b.url);
      await setupB.createTable('t', ['f']);
      await using other = await connect(a.url, { connectTimeoutMs: 1_000 });
      await other.createTable('t', ['f']);
      const busy = await other.table('t').lockRow('busy');
      assert.ok(busy.token > 0);

      await using client = await connect([a.url, b.url], { sessionLeaseMs: 10_000 });
      assert.equal(client.master, label(a.port));
      const lock = await client.table('t').lockRow('k');
      await client.table('t').put(new Put('k', { rowLock: lock }).add('f', 'q', 'on-a'));
      // In flight at the break: a lock wait on A (the row is held by another session). Lock
      // calls are sent again after a lost connection: this one to B, where the row is free.
      const inFlight = client.table('t').lockRow('busy', { waitMs: 60_000 });
      // Answered after the lock call was read (same connection, in order): it is on A.
      await client.ping();
      const events: string[] = [];
      client.on('sessionLost', (r) => events.push(`sessionLost ${r.code}`));
      client.on('failover', (e) => events.push(`failover ${e.to}`));
      client.on('connected', (resumed) => events.push(`connected ${resumed}`));
      const failover = once(client, 'failover') as Promise<[FailoverEvent]>;

      const killedAt = performance.now();
      await a.kill9();

      const [event] = await failover;
      t.diagnostic(
        `new session on B ${Math.round(performance.now() - killedAt)} ms after the kill`,
      );
      assert.deepEqual(event, { from: label(a.port), to: label(b.port), epoch: 0 });
      const sentAgain = await inFlight;
      assert.equal(sentAgain.signal.aborted, false, 'granted by B, in the new session');
      await sentAgain.close();
      assert.equal(lock.signal.aborted, true, 'the lock handle was aborted');
      // Standalone servers both have epoch 0: B does not know the session (SESSION_EXPIRED).
      assert.equal((lock.signal.reason as LockLostError).code, 'SESSION_EXPIRED');
      assert.throws(() => lock.ensureValid(), { code: 'SESSION_EXPIRED' });
      assert.deepEqual(events, [
        'sessionLost SESSION_EXPIRED',
        `failover ${label(b.port)}`,
        'connected false',
      ]);
      assert.equal(client.master, label(b.port));
      assert.equal(client.heldLocks, 0);
      // Later calls go to B.
      const lockB = await client.table('t').lockRow('k');
      await client.table('t').put(new Put('k', { rowLock: lockB }).add('f', 'q', 'on-b'));
      await lockB.close();
      const cells = (await setupB.table('t').get(new Get('k'))).cells;
      assert.deepEqual(
        cells.map((c) => c.value.toString()),
        ['on-b'],
      );
    } finally {
      await a.kill9().catch(() => undefined);
    }
  });

  it('a master that steps down (ERROR 0 MASTER_CHANGED): locks abort with MASTER_CHANGED, the client finds the new master (conformance M7)', async () => {
    await using b = await startServer();
    await using b0 = await connect(b.url);
    await b0.createTable('t', ['f']);
    await using old = await ScriptedPeer.start(masterScript(7));
    await using client = await connect([old.url, b.url]);
    assert.equal(client.epoch, 7);
    assert.equal(client.session?.role, 'master');
    const lock = await client.table('t').tryLockRow('k');
    assert.ok(lock !== null);
    // Sent again after the connection is lost: to the new master, in the new session.
    const inFlight = client.table('t').lockRow('other', { waitMs: 60_000 });
    await eventually(
      () => old.received.some((r) => r.message[2] === 'lockRow'),
      10_000,
      'the lock call to reach the old master',
    );
    const failover = once(client, 'failover') as Promise<[FailoverEvent]>;
    // Stepping down: every session ends with MASTER_CHANGED; asked again, it names the master.
    old.script = (c, m) => {
      if (m[0] === 0) {
        c.send(notMaster(label(b.port)));
        c.close();
      }
    };
    old.broadcast([2, 0, 'MASTER_CHANGED', 'This server is no longer master', false]);
    const [event] = await failover;
    assert.deepEqual(event, { from: label(old.port), to: label(b.port), epoch: 0 });
    assert.equal((lock.signal.reason as LockLostError).code, 'MASTER_CHANGED');
    assert.throws(() => lock.ensureValid(), { code: 'MASTER_CHANGED' });
    const sentAgain = await inFlight;
    assert.equal(sentAgain.signal.aborted, false);
    await sentAgain.close();
    assert.equal(client.master, label(b.port));
    assert.equal(client.epoch, 0);
    assert.deepEqual(await client.listTables(), ['t']);
    // A lock of the old session is refused here, never sent to the new master as if held.
    await assert.rejects(
      client.table('t').put(new Put('k', { rowLock: lock }).add('f', 'q', 'stale')),
      { code: 'UNKNOWN_ROW_LOCK' },
    );
    assert.equal((await b0.table('t').get(new Get('k'))).isEmpty, true);
  });

  it('a WELCOME of another epoch that resumes the session keeps it: its locks stay held, those it does not know are given back', async () => {
    let epoch = 7;
    let lockId = '';
    await using peer = await ScriptedPeer.start((c, m) => {
      if (m[0] !== 0) {
        if (m[0] === 1 && m[2] === 'tryLockRow') {
          lockId = 'held-lock-1';
          c.send([1, m[1], [lockId, 42, 0]]);
          return;
        }
        return masterScript(epoch)(c, m);
      }
      const hello = m[2] as Record<string, unknown>;
      if (hello.session === undefined) c.send(welcome('s1', epoch));
      // A new master that put the session back: its lock, and one granted whose answer was lost.
      else
        c.send(
          welcome('s1', epoch, {
            resumed: true,
            locks: [
              [lockId, 't'],
              ['unknown-2', 't'],
            ],
          }),
        );
    });
    await using client = await connect(peer.url);
    const lock = await client.table('t').tryLockRow('k');
    assert.ok(lock !== null);
    const lost: LockLostError[] = [];
    client.on('sessionLost', (r) => lost.push(r));
    const failover = once(client, 'failover') as Promise<[FailoverEvent]>;
    epoch = 8;
    peer.cut();
    const [event] = await failover;
    assert.deepEqual(event, { from: label(peer.port), to: label(peer.port), epoch: 8 });
    assert.deepEqual(lost, [], 'the session goes on');
    assert.equal(client.session?.id, 's1');
    assert.equal(lock.signal.aborted, false, 'its lock is still held');
    assert.equal(lock.token, 42);
    await eventually(
      () => peer.received.some((r) => r.message[2] === 'unlockRow'),
      10_000,
      'the unknown grant to be given back',
    );
    const unlocks = peer.received.filter((r) => r.message[2] === 'unlockRow');
    assert.deepEqual(
      unlocks.map((r) => r.message[3]),
      [['t', 'unknown-2']],
    );
  });

  for (const answer of ['welcome of another epoch', 'MASTER_CHANGED'] as const) {
    it(`resuming sends the session's epoch; a ${answer} ends the session with MASTER_CHANGED (conformance M7)`, async () => {
      let epoch = 7;
      await using peer = await ScriptedPeer.start((c, m) => {
        if (m[0] !== 0) return masterScript(epoch)(c, m);
        const hello = m[2] as Record<string, unknown>;
        if (hello.session === undefined) c.send(welcome(epoch === 7 ? 's1' : 's2', epoch));
        else if (answer === 'MASTER_CHANGED')
          c.send([2, 0, 'MASTER_CHANGED', 'The master changed', false]);
        // A new master that does not have the session (sessions in memory) opens another.
        else c.send(welcome('s2', epoch, { resumed: false }));
      });
      await using client = await connect(peer.url);
      const lock = await client.table('t').tryLockRow('k');
      assert.ok(lock !== null);
      const lost: LockLostError[] = [];
      client.on('sessionLost', (r) => lost.push(r));
      const failover = once(client, 'failover') as Promise<[FailoverEvent]>;
      epoch = 8;
      peer.cut();
      const [event] = await failover;
      assert.deepEqual(event, { from: label(peer.port), to: label(peer.port), epoch: 8 });
      assert.deepEqual(peer.hellos[1], { session: 's1', epoch: 7 });
      assert.deepEqual(
        lost.map((r) => r.code),
        ['MASTER_CHANGED'],
      );
      assert.equal((lock.signal.reason as LockLostError).code, 'MASTER_CHANGED');
      assert.equal(client.epoch, 8);
      if (answer === 'MASTER_CHANGED') {
        // A fresh HELLO on the same connection opened a new session.
        assert.deepEqual(peer.hellos[2], {});
        assert.equal(client.session?.id, 's2');
      } else {
        assert.equal(client.session?.id, 's2', 'the WELCOME opened a new session');
      }
    });
  }

  it('a call refused with NOT_MASTER mid-session is sent to the master it names (conformance M7)', async () => {
    await using b = await startServer();
    await using b0 = await connect(b.url);
    await b0.createTable('on-b', ['f']);
    const script = masterScript(5);
    await using old = await ScriptedPeer.start((c, m) => {
      if (m[0] === 1 && m[2] === 'listTables')
        c.send([2, m[1], 'NOT_MASTER', 'No longer master', true, { master: label(b.port) }]);
      else script(c, m);
    });
    await using client = await connect(old.url);
    const lock = await client.table('t').tryLockRow('k');
    const failover = once(client, 'failover') as Promise<[FailoverEvent]>;
    // Refused before it ran, so it is sent again, to the master.
    assert.deepEqual(await client.listTables(), ['on-b']);
    const [event] = await failover;
    assert.deepEqual(event, { from: label(old.port), to: label(b.port), epoch: 0 });
    assert.equal(lock?.signal.aborted, true);
    assert.equal(client.master, label(b.port));
  });
  // With real master/slave servers (kill -9 of the master, NOT_MASTER redirect, new epoch,
  // MASTER_CHANGED on the lock handles): test/server/ha-client.test.ts.
});
