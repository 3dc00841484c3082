/**
 * Sessions carried over one connection (`client.openSession()`; `openSession`/`resumeSession`
 * on the wire): each is a whole session — its own locks, which no other session (the
 * connection's own included) can take, use or release — with a lease renewed by every frame
 * of the connection. They are resumed after a reconnect and after a kill -9 and restart of the
 * server (durable sessions), with their locks and tokens; hostile numbers and arguments get
 * clear errors and leave the server serving.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { connect } from '../../src/client/locksmith-client.js';
import { Get, Put } from '../../src/rows/index.js';
import { LocksmithServer } from '../../src/server/server.js';
import { startServeProcess } from '../fixtures/serve-process.js';
import { freePorts } from '../ha/cluster.js';
import { eventually, sleep, tempDir } from '../helpers.js';
import { masterToken, sqliteLeaseFlags, startHa } from './ha-fixture.js';
import { RawClient } from './raw-client.js';
import { TcpProxy } from './tcp-proxy.js';

let nextCallId = 1_000;

/** A CALL in session `number` of a raw connection: the RESULT value, or throws `{ code }`. */
async function callIn(
  raw: RawClient,
  number: number | undefined,
  method: string,
  args: unknown[],
): Promise<unknown> {
  const id = nextCallId++;
  raw.send(number === undefined ? [1, id, method, args] : [1, id, method, args, number]);
  const answer = await raw.next((m) => (m[0] === 1 || m[0] === 2) && m[1] === id);
  if (answer[0] === 2) throw Object.assign(new Error(String(answer[3])), { code: answer[2] });
  return answer[2];
}

async function server(extra: Record<string, unknown> = {}) {
  const dir = tempDir('locksmith-carried-');
  const srv = await LocksmithServer.listen({
    dataDir: dir.path,
    host: '127.0.0.1',
    port: 0,
    ...extra,
  });
  const admin = await connect(`locksmith://127.0.0.1:${srv.port}`);
  await admin.createTable('t', ['f']);
  await admin.close();
  return {
    srv,
    url: `locksmith://127.0.0.1:${srv.port}`,
    port: srv.port,
    async [Symbol.asyncDispose]() {
      await srv.close();
      dir[Symbol.dispose]();
    },
  };
}

describe('sessions carried over one connection', () => {
  it('are separate owners: exclusive locks, released by their own close, counted by the server', async () => {
    await using s = await server();
    await using client = await connect(s.url);
    const a = await client.openSession();
    const b = await client.openSession();
    assert.notEqual(a.id, b.id);
    assert.notEqual(a.id, client.session?.id);
    const held = await a.table('t').lockRow('r');
    assert.equal(await b.table('t').tryLockRow('r'), null, 'another carried session waits');
    assert.equal(await client.table('t').tryLockRow('r'), null, "the connection's own waits");
    await a.table('t').put(new Put('r', { rowLock: held }).add('f', 'q', 'a'));
    // A put naming a's lock from b: refused, b does not hold it.
    await assert.rejects(b.table('t').put(new Put('r', { rowLock: held }).add('f', 'q', 'b')), {
      code: 'UNKNOWN_ROW_LOCK',
    });
    assert.equal(s.srv.status().sessionsOpen, 3);
    const waiting = b.table('t').lockRow('r', { waitMs: 10_000 });
    await sleep(50);
    await a.close();
    assert.equal(held.signal.aborted, true, "a closed: its handle's signal aborted");
    const next = await waiting;
    assert.ok(next.token > held.token, 'the next grant has a larger token');
    await b.close();
    assert.notEqual(await client.table('t').tryLockRow('r'), null, 'b closed: the row is free');
    assert.equal(s.srv.status().sessionsOpen, 1);
  });

  it('on the wire: a session number names the session; none is another session’s proof', async () => {
    await using s = await server();
    const { raw } = await RawClient.session(s.port);
    try {
      const [idA] = (await callIn(raw, undefined, 'openSession', [7, null])) as [string, number];
      assert.match(idA, /^[A-Za-z0-9_-]{22}$/);
      const [lockId] = (await callIn(raw, 7, 'lockRow', ['t', 'r', null])) as [string];
      // The connection's own session does not hold it: it may not release it.
      await assert.rejects(callIn(raw, undefined, 'unlockRow', ['t', lockId]), {
        code: 'UNKNOWN_ROW_LOCK',
      });
      await callIn(raw, undefined, 'openSession', [8, null]);
      await assert.rejects(callIn(raw, 8, 'unlockRow', ['t', lockId]), {
        code: 'UNKNOWN_ROW_LOCK',
      });
      await callIn(raw, 7, 'unlockRow', ['t', lockId]);
      // Refusals that leave the connection serving.
      for (const [number, method, args, code] of [
        [99, 'ping', [], 'SESSION_EXPIRED'],
        [undefined, 'openSession', [7, null], 'INVALID_ARGUMENT'],
        [7, 'openSession', [9, null], 'INVALID_ARGUMENT'],
        [undefined, 'openSession', [0, null], 'INVALID_ARGUMENT'],
        [undefined, 'openSession', [2 ** 32, null], 'INVALID_ARGUMENT'],
        [undefined, 'openSession', ['x', null], 'INVALID_ARGUMENT'],
        [undefined, 'openSession', [10, 'soon'], 'INVALID_ARGUMENT'],
        [undefined, 'openSession', [10, 1], 'INVALID_ARGUMENT'],
        [undefined, 'openSession', [10, null, 'yes'], 'INVALID_ARGUMENT'],
        [undefined, 'openSession', [10, null, false, 'extra'], 'INVALID_ARGUMENT'],
        [undefined, 'resumeSession', [11, 'no-such-session'], 'SESSION_EXPIRED'],
        [undefined, 'resumeSession', [11, 42], 'INVALID_ARGUMENT'],
        [undefined, 'resumeSession', [11], 'INVALID_ARGUMENT'],
      ] as const) {
        await assert.rejects(
          callIn(raw, number, method, [...args]),
          { code },
          `${method} ${JSON.stringify(args)} in ${String(number)}`,
        );
      }
      assert.equal(await callIn(raw, 7, 'ping', []), null, 'still serving');
      // A malformed session number is a broken stream: PROTOCOL_ERROR, and the connection closes.
      raw.send([1, nextCallId++, 'ping', [], -1]);
      const err = await raw.next((m) => m[0] === 2 && m[1] === 0);
      assert.equal(err[2], 'PROTOCOL_ERROR');
      await raw.whenClosed();
    } finally {
      raw.destroy();
    }
    // The server serves on.
    await using client = await connect(s.url);
    assert.notEqual(await client.table('t').tryLockRow('r'), null);
  });

  it('a connection carries at most --max-sessions-per-connection of them', async () => {
    await using s = await server({ maxSessionsPerConnection: 3 });
    await using client = await connect(s.url);
    // Closed ones give their place back.
    for (let i = 0; i < 5; i++) await (await client.openSession()).close();
    for (let i = 0; i < 3; i++) await client.openSession();
    await assert.rejects(client.openSession(), { code: 'LIMIT_EXCEEDED' });
    await using other = await connect(s.url);
    await other.openSession();
  });

  it('lives while its connection speaks, and a lease after it falls silent', async () => {
    await using s = await server({ minSessionLeaseMs: 500 });
    const { raw } = await RawClient.session(s.port, { sessionLeaseMs: 60_000 });
    try {
      await callIn(raw, undefined, 'openSession', [1, 1_000]);
      await callIn(raw, 1, 'lockRow', ['t', 'r', null]);
      await callIn(raw, undefined, 'openSession', [2, 1_000, true]);
      await callIn(raw, 2, 'lockRow', ['t', 'q', null]);
      // Three leases of frames in the connection's own session keep both alive.
      for (let i = 0; i < 10; i++) {
        await sleep(300);
        await callIn(raw, undefined, 'ping', []);
      }
      await using other = await connect(s.url);
      assert.equal(await other.table('t').tryLockRow('r'), null, 'still held after 3 s');
      assert.equal(await other.table('t').tryLockRow('q'), null);
      // Silence: the connection stays open, but says nothing for longer than the lease.
      await sleep(1_500);
      await eventually(
        async () => (await other.table('t').tryLockRow('r')) !== null,
        5_000,
        'the silent session expired and its lock with it',
      );
      await assert.rejects(callIn(raw, 1, 'ping', []), { code: 'SESSION_EXPIRED' });
    } finally {
      raw.destroy();
    }
  });

  it('releaseOnDisconnect ends it with its connection; otherwise another connection resumes it', async () => {
    await using s = await server();
    const first = await RawClient.session(s.port);
    const [keptId] = (await callIn(first.raw, undefined, 'openSession', [1, null])) as [string];
    const [lockId] = (await callIn(first.raw, 1, 'lockRow', ['t', 'kept', null])) as [string];
    await callIn(first.raw, undefined, 'openSession', [2, null, true]);
    await callIn(first.raw, 2, 'lockRow', ['t', 'dropped', null]);
    await using other = await connect(s.url);
    first.raw.destroy();
    await eventually(
      async () => (await other.table('t').tryLockRow('dropped')) !== null,
      5_000,
      'the releaseOnDisconnect session ended with its connection',
    );
    assert.equal(await other.table('t').tryLockRow('kept'), null, 'the other one lives on');
    const second = await RawClient.session(s.port);
    try {
      const [leaseMs, locks] = (await callIn(second.raw, undefined, 'resumeSession', [
        5,
        keptId,
      ])) as [number, [string, string][]];
      assert.ok(leaseMs > 0);
      assert.deepEqual(locks, [[lockId, 't']]);
      await callIn(second.raw, 5, 'unlockRow', ['t', lockId]);
      assert.notEqual(await other.table('t').tryLockRow('kept'), null);
      // Resumed while another connection carries it: that one no longer does.
      const third = await RawClient.session(s.port);
      try {
        await callIn(third.raw, undefined, 'resumeSession', [1, keptId]);
        await assert.rejects(callIn(second.raw, 5, 'ping', []), { code: 'SESSION_EXPIRED' });
        assert.equal(await callIn(third.raw, 1, 'ping', []), null);
      } finally {
        third.raw.destroy();
      }
    } finally {
      second.raw.destroy();
    }
  });

  it('resumed by another connection: the client hears so at its next call and counts it lost', async () => {
    await using s = await server();
    await using client = await connect(s.url);
    const session = await client.openSession();
    const lost: string[] = [];
    session.on('lost', (reason) => lost.push(reason.code));
    const lock = await session.table('t').lockRow('r');
    const { raw } = await RawClient.session(s.port);
    try {
      await callIn(raw, undefined, 'resumeSession', [1, session.id]);
      await assert.rejects(session.table('t').tryLockRow('q'), { code: 'SESSION_EXPIRED' });
      assert.deepEqual(lost, ['SESSION_EXPIRED']);
      assert.equal(lock.signal.aborted, true, "the lock is the other connection's now");
    } finally {
      raw.destroy();
    }
  });

  it('a dropped connection: the client resumes the session, its lock handle valid, its put succeeds', async () => {
    await using s = await server();
    await using proxy = await TcpProxy.start(s.port);
    await using client = await connect(`locksmith://127.0.0.1:${proxy.port}`);
    const session = await client.openSession();
    const lost: string[] = [];
    session.on('lost', (reason) => lost.push(reason.code));
    const table = session.table('t');
    const lock = await table.lockRow('r');
    const waiting = session.table('t').lockRow('w', { waitMs: 30_000 });
    const reconnected = new Promise((resolve) => client.once('connected', resolve));
    proxy.cut();
    await reconnected;
    await table.put(new Put('r', { rowLock: lock }).add('f', 'q', 'after'));
    assert.equal(lock.signal.aborted, false);
    assert.deepEqual(lost, []);
    assert.ok(await waiting, 'a lock call in flight went through after the reconnect');
    await using other = await connect(s.url);
    assert.equal(await other.table('t').tryLockRow('r'), null);
  });

  it('kill -9 of the server, restart on its data: the session and its lock come back', async () => {
    using dir = tempDir('locksmith-carried-kill-');
    const [port] = (await freePorts(1)) as [number];
    const flags = ['--port', String(port)];
    let proc = await startServeProcess(dir.path, flags);
    const url = `locksmith://127.0.0.1:${port}`;
    try {
      await using client = await connect(url, { sessionLeaseMs: 20_000 });
      await client.createTable('t', ['f']);
      const session = await client.openSession({ sessionLeaseMs: 20_000 });
      const lost: string[] = [];
      session.on('lost', (reason) => lost.push(reason.code));
      const lock = await session.table('t').lockRow('r');
      const token = lock.token;
      await proc.kill9();
      proc = await startServeProcess(dir.path, flags);
      await eventually(() => client.connected, 20_000, 'the client to reconnect');
      await session.table('t').put(new Put('r', { rowLock: lock }).add('f', 'q', 'after'));
      assert.equal(lock.token, token);
      assert.equal(lock.signal.aborted, false);
      assert.deepEqual(lost, []);
      await using other = await connect(url);
      assert.equal(await other.table('t').tryLockRow('r'), null, 'nobody else got the row');
      await session.close();
      assert.notEqual(await other.table('t').tryLockRow('r'), null, 'closed: released');
    } finally {
      await proc.kill9().catch(() => undefined);
    }
  });

  it('kill -9 of the master (--ha lease-database): the session resumes on the new master with its lock', async () => {
    using dir = tempDir('locksmith-carried-ha-');
    const flags = sqliteLeaseFlags(dir.path);
    const first = await startHa(dir.path, flags);
    let second: Awaited<ReturnType<typeof startHa>> | undefined;
    try {
      await eventually(() => masterToken(first), 10_000, 'the first server to be master');
      second = await startHa(dir.path, flags);
      await using client = await connect([first.proc.url, second.proc.url], {
        sessionLeaseMs: 20_000,
      });
      await client.createTable('t', ['f']);
      const session = await client.openSession({ sessionLeaseMs: 20_000 });
      const lost: string[] = [];
      session.on('lost', (reason) => lost.push(reason.code));
      const lock = await session.table('t').lockRow('r');
      await first.proc.kill9();
      const to = second.address;
      await eventually(
        () => client.connected && client.master === to,
        30_000,
        'the client on the new master',
      );
      await session.table('t').put(new Put('r', { rowLock: lock }).add('f', 'q', 'after'));
      assert.equal(lock.signal.aborted, false);
      assert.deepEqual(lost, []);
      await using other = await connect(second.proc.url);
      assert.equal(await other.table('t').tryLockRow('r'), null, 'nobody else got the row');
    } finally {
      await first.proc.kill9().catch(() => undefined);
      await second?.proc.kill9().catch(() => undefined);
    }
  });

  it('SIGSTOP of the server past the lease: the client counts the session and its lock lost by its own clock; after SIGCONT the row goes to the next session', async () => {
    using dir = tempDir('locksmith-carried-stop-');
    const [port] = (await freePorts(1)) as [number];
    const proc = await startServeProcess(dir.path, ['--port', String(port)]);
    const url = `locksmith://127.0.0.1:${port}`;
    const leaseMs = 1_500;
    let stopped = false;
    try {
      await using client = await connect(url, { sessionLeaseMs: leaseMs });
      await client.createTable('t', ['f']);
      const session = await client.openSession({ sessionLeaseMs: leaseMs });
      const lost: { code: string; whileStopped: boolean }[] = [];
      session.on('lost', (reason) => lost.push({ code: reason.code, whileStopped: stopped }));
      const lock = await session.table('t').lockRow('r');
      await session.table('t').put(new Put('r', { rowLock: lock }).add('f', 'q', 'before'));
      let abortedWhileStopped: boolean | undefined;
      lock.signal.addEventListener('abort', () => {
        abortedWhileStopped = stopped;
      });

      stopped = proc.proc.kill('SIGSTOP');
      assert.ok(stopped, 'the server was stopped');
      // The server can hand the row on only once it runs again: the client must have given up
      // its lock before that, on its own clock (a lease from its last proof of the server).
      await eventually(() => lock.signal.aborted, 3 * leaseMs + 10_000, 'the lock to be lost');
      assert.equal(abortedWhileStopped, true, 'the lock was lost while the server was stopped');
      assert.deepEqual(
        lost.map((l) => l.whileStopped),
        [true],
        'the session was lost while the server was stopped',
      );
      assert.throws(() => lock.ensureValid());
      await assert.rejects(
        session.table('t').put(new Put('r', { rowLock: lock }).add('f', 'q', 'late')),
      );

      proc.proc.kill('SIGCONT');
      stopped = false;
      await using other = await connect(url);
      const next = await other.table('t').lockRow('r', { waitMs: 20_000 });
      assert.ok(next.token > lock.token, 'the next grant has a larger token');
      await other.table('t').put(new Put('r', { rowLock: next }).add('f', 'q', 'next'));
      const value = (await other.table('t').get(new Get('r'))).getValue('f', 'q')?.toString();
      assert.equal(value, 'next', 'nothing written under the lost lock after it was lost');
      await next.close();
    } finally {
      if (stopped) proc.proc.kill('SIGCONT');
      await proc.kill9().catch(() => undefined);
    }
  });

  it('with --sessions memory a restart loses it, and the client says so', async () => {
    using dir = tempDir('locksmith-carried-memory-');
    const [port] = (await freePorts(1)) as [number];
    const flags = ['--port', String(port), '--sessions', 'memory'];
    let proc = await startServeProcess(dir.path, flags);
    const url = `locksmith://127.0.0.1:${port}`;
    try {
      await using client = await connect(url);
      await client.createTable('t', ['f']);
      const session = await client.openSession();
      const lost: string[] = [];
      session.on('lost', (reason) => lost.push(reason.code));
      const lock = await session.table('t').lockRow('r');
      await proc.kill9();
      proc = await startServeProcess(dir.path, flags);
      await eventually(() => lost.length > 0, 20_000, 'the session to be lost');
      assert.equal(lock.signal.aborted, true);
      await assert.rejects(session.table('t').tryLockRow('x'), { code: 'SESSION_EXPIRED' });
    } finally {
      await proc.kill9().catch(() => undefined);
    }
  });
});
