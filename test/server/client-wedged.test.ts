/**
 * Servers that accept connections and never answer: a paused or wedged process,
 * a half-dead host. The client gives each handshake a bound derived from `connectTimeoutMs` and
 * moves on to the next address; when every address fails, its error says why each did; and a
 * session whose server goes silent is dropped as a lost connection, the client finding the
 * master elsewhere while the silent server still holds the TCP connection open.
 *
 * The wedged servers are real `net.Server`s that accept and never write; the live ones are real
 * locksmith servers. A paused (SIGSTOP) master of a real master/slave pair: ha-paused.test.ts.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { handshakeTimeoutMs, silenceLimitMs } from '../../src/client/client-connection.js';
import { connect, type FailoverEvent } from '../../src/client/locksmith-client.js';
import { Put } from '../../src/rows/index.js';
import { eventually } from '../helpers.js';
import { deadPort } from './dead-port.js';
import { notMaster, ScriptedPeer, welcome } from './scripted-peer.js';
import { startServer } from './server-fixture.js';
import { WedgedListener } from './wedged-listener.js';

const label = (port: number) => `127.0.0.1:${port}`;

/** `promise`, or a rejection naming `what` after `ms` (a test's own guard, not a contract). */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  return Promise.race([promise, guard]).finally(() => clearTimeout(timer));
}

describe('client: servers that accept and never answer', () => {
  it('connect() gets past any number of wedged addresses to the live one, one handshake bound each (conformance M7)', async () => {
    await using live = await startServer();
    const wedged: WedgedListener[] = [];
    try {
      for (let i = 0; i < 6; i++) wedged.push(await WedgedListener.start());
      const connectTimeoutMs = 8_000;
      const bound = handshakeTimeoutMs(connectTimeoutMs, wedged.length + 1);
      assert.equal(bound, 1_000, 'a list of 7: connectTimeoutMs / 8');
      const started = performance.now();
      // Succeeding at all is the contract: six bounds (6 s) fit in connectTimeoutMs (8 s).
      await using client = await connect([...wedged.map((w) => w.url()), live.url], {
        connectTimeoutMs,
      });
      const elapsed = performance.now() - started;
      assert.equal(client.master, label(live.port));
      for (const w of wedged) {
        assert.equal(w.accepted, 1, 'each wedged server was tried once');
        await eventually(() => w.closedByClient === 1, 10_000, 'its connection to be abandoned');
      }
      // Each wedged server had its whole bound: a slow server is not given up early.
      assert.ok(elapsed >= 6 * bound - 50, `connected after ${Math.round(elapsed)} ms`);
      await client.createTable('t', ['f']);
    } finally {
      for (const w of wedged) await w[Symbol.asyncDispose]();
    }
  });

  it('the handshake bound: a quarter of connectTimeoutMs, less for a list of four or more (conformance M7)', () => {
    assert.equal(handshakeTimeoutMs(10_000, 1), 2_500);
    assert.equal(handshakeTimeoutMs(10_000, 3), 2_500);
    assert.equal(handshakeTimeoutMs(10_000, 4), 2_000);
    assert.equal(handshakeTimeoutMs(10_000, 9), 1_000);
    assert.equal(handshakeTimeoutMs(0, 2), 1);
  });

  it('when every address fails, the error says why each one did (conformance M7)', async () => {
    await using wedged = await WedgedListener.start();
    await using wedgedTls = await WedgedListener.start();
    const [dead, deadMaster] = [await deadPort(), await deadPort()];
    await using slave = await ScriptedPeer.start((c, m) => {
      if (m[0] === 0) {
        c.send(notMaster(label(deadMaster)));
        c.close();
      }
    });
    const connectTimeoutMs = 6_000;
    const err = await connect(
      [wedged.url(), wedgedTls.url('locksmiths'), `locksmith://${label(dead)}`, slave.url],
      { connectTimeoutMs },
    ).then(
      () => assert.fail('connected'),
      (e: Error) => e,
    );
    assert.equal((err as { code?: string }).code, 'CONNECTION_LOST');
    // Each address, then why it failed (the one under way when the time ran out says so).
    for (const [address, why] of [
      [wedged.label, 'timed out in the handshake: connected, but no answer to HELLO after'],
      [wedgedTls.label, 'timed out: connected, but the TLS handshake was not over after'],
      [label(dead), `connect ECONNREFUSED ${label(dead)}(;|$)`],
      [
        label(slave.port),
        `This server is a slave \\(NOT_MASTER; it names the master ${label(deadMaster)}\\)(;|$)`,
      ],
      // Where the slave sent the client: tried too, and said why.
      [label(deadMaster), `connect ECONNREFUSED ${label(deadMaster)}(;|$)`],
    ]) {
      assert.match(err.message, new RegExp(`[:;] ${address}: ${why}`), address);
    }
  });

  it('one wedged address: the error says the handshake timed out (conformance M7)', async () => {
    await using wedged = await WedgedListener.start();
    await assert.rejects(connect(wedged.url(), { connectTimeoutMs: 2_000 }), {
      code: 'CONNECTION_LOST',
      message: new RegExp(
        `^Could not connect to ${wedged.label} within 2000 ms: timed out in the handshake`,
      ),
    });
  });

  it('a session whose server goes silent is dropped, and the client finds the master elsewhere (conformance M7)', async (t) => {
    const leaseMs = 1_000;
    await using live = await startServer();
    await using setup = await connect(live.url);
    await setup.createTable('t', ['f']);
    // A master that answers until it is muted, then says nothing more on any connection, old
    // or new, while keeping them open: what a paused process looks like from outside.
    let muted = false;
    await using silent = await ScriptedPeer.start((c, m) => {
      if (muted) return;
      if (m[0] === 0) c.send(welcome('s1', 0, { sessionLeaseMs: leaseMs }));
      else if (m[0] === 1 && m[2] !== 'put') c.send([1, m[1], null]);
    });
    // A wedged server between the two: once the session is given up, nothing rescues a client
    // waiting on one but its own handshake bound.
    await using wedged = await WedgedListener.start();
    await using client = await connect([silent.url, wedged.url(), live.url], {
      connectTimeoutMs: 8_000,
    });
    assert.equal(client.master, label(silent.port));
    // Pings keep a live, idle session going past the silence limit.
    await new Promise((resolve) => setTimeout(resolve, 2 * leaseMs));
    assert.equal(client.connected, true, 'a live server answering pings is kept');
    assert.equal(silent.accepted, 1);
    assert.equal(wedged.accepted, 0);

    const events: string[] = [];
    client.on('disconnected', (r) => events.push(`disconnected ${r.message}`));
    client.on('sessionLost', (r) => events.push(`sessionLost ${r.code}`));
    const failover = once(client, 'failover') as Promise<[FailoverEvent]>;
    // In flight when the server goes silent: a write (fails: it may have been applied) and a
    // read (sent again to the new master).
    const write = client.table('t').put(new Put('k', {}).add('f', 'q', 'v'));
    const writeFailed = assert.rejects(write, { code: 'CONNECTION_LOST' });
    muted = true;
    const mutedAt = performance.now();
    const read = client.listTables();
    read.catch(() => undefined); // awaited below; a failure before then is the guard's to report
    // TCP never gives up on this connection: only the client's silence limit ends it.
    const [event] = await within(failover, 20_000, 'the failover away from the silent server');
    const after = performance.now() - mutedAt;
    assert.deepEqual(event, { from: label(silent.port), to: label(live.port), epoch: 0 });
    t.diagnostic(
      `silence limit ${silenceLimitMs(leaseMs)} ms (counted from the last frame heard); new session on the live server ${Math.round(after)} ms after the server went silent`,
    );
    assert.match(
      events.find((e) => e.startsWith('disconnected')) ?? events.join(' | '),
      /^disconnected .*nothing heard from .* for \d+ ms/,
    );
    await writeFailed;
    assert.deepEqual(await read, ['t']);
    assert.equal(client.master, label(live.port));
    assert.ok(wedged.accepted >= 1, 'the wedged server was tried on the way');
  });
});
