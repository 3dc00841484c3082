/**
 * Client faults with real processes against a `locksmith serve` child process: a client killed
 * with SIGKILL while holding a row lock, one whose connection is cut, one paused with SIGSTOP
 * past its session lease. Each asserts who held the row when and with which token; the only
 * time bounds are the session lease's contract (the row is not handed on before the lease ran
 * out since the holder was last heard), with a margin for timer rounding only.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import { connect, type LocksmithClient } from '../../src/client/locksmith-client.js';
import { Get, Put } from '../../src/rows/index.js';
import { type FixtureProcess, spawnFixture } from '../fixtures/fixture-process.js';
import { type ServeProcess, startServeProcess } from '../fixtures/serve-process.js';
import { eventually, exitOf, tempDir } from '../helpers.js';
import { TcpProxy } from './tcp-proxy.js';

const LEASE_MS = 1_000;
/** Timer rounding between two processes' clocks (both monotonic, same machine). */
const ROUNDING_MS = 50;

/** A client process on `table`, once connected. */
async function clientProcess(url: string, table: string, options: object): Promise<FixtureProcess> {
  const p = spawnFixture('server-client', [url, table, JSON.stringify(options)]);
  await eventually(() => p.line(/^ready /), 20_000, 'the client process to connect');
  return p;
}

/** Sends a command and resolves with the first line matching `answer`. */
async function ask(p: FixtureProcess, command: string, answer: RegExp): Promise<string> {
  p.proc.stdin?.write(`${command}\n`);
  return eventually(
    () => p.line(answer),
    30_000,
    () => `${answer} (got ${p.lines.join(' | ')})`,
  );
}

const versions = async (c: LocksmithClient, table: string, row: string) =>
  (await c.table(table).get(new Get(row).setMaxVersions())).cells.map((cell) => ({
    value: cell.value.toString(),
    ts: cell.timestamp,
  }));

describe('client faults against locksmith serve', () => {
  const data = tempDir('locksmith-client-faults-');
  let server: ServeProcess;
  let b: LocksmithClient;

  before(async () => {
    server = await startServeProcess(data.path);
    b = await connect(server.url, { name: 'observer' });
    await b.createTable('t', [{ name: 'f', maxVersions: 100 }]);
  });

  after(async () => {
    await b?.close();
    await server?.kill9();
    data[Symbol.dispose]();
  });

  it('a client killed with SIGKILL holds its row until its session lease ends, not before', async () => {
    const a = await clientProcess(server.url, 't', { sessionLeaseMs: LEASE_MS });
    const [, , , tokenA] = (await ask(a, 'lock k1', /^locked k1 /)).split(' ');
    assert.equal(await b.table('t').tryLockRow('k1'), null, 'the row is held by the client');
    // The server last hears from the client no earlier than this ping was asked for.
    const lastHeard = performance.now();
    await ask(a, 'ping', /^pinged$/);
    const exited = exitOf(a.proc);
    a.proc.kill('SIGKILL');
    await exited;
    const lock = await b.table('t').lockRow('k1', { waitMs: 30_000 });
    const grantedAfter = performance.now() - lastHeard;
    assert.ok(
      grantedAfter >= LEASE_MS - ROUNDING_MS,
      `the row was handed on ${grantedAfter} ms after the holder was last heard, before its ${LEASE_MS} ms lease`,
    );
    assert.ok(
      grantedAfter < LEASE_MS + 15_000,
      `the row was handed on only after ${grantedAfter} ms`,
    );
    assert.ok(lock.token > Number(tokenA), `token ${lock.token} after ${tokenA}`);
    await lock.close();
  });

  it('with releaseOnDisconnect, a killed client releases its row at once', async () => {
    const lease = 60_000;
    const a = await clientProcess(server.url, 't', {
      sessionLeaseMs: lease,
      releaseOnDisconnect: true,
    });
    const [, , , tokenA] = (await ask(a, 'lock k2', /^locked k2 /)).split(' ');
    let granted = false;
    const waiting = b
      .table('t')
      .lockRow('k2', { waitMs: 30_000 })
      .then((lock) => {
        granted = true;
        return lock;
      });
    await ask(a, 'ping', /^pinged$/);
    assert.equal(granted, false, 'the row was handed on while its holder lived');
    const killedAt = performance.now();
    a.proc.kill('SIGKILL');
    const lock = await waiting;
    const after = performance.now() - killedAt;
    assert.ok(after < lease / 4, `the row was handed on ${after} ms after the kill`);
    assert.ok(lock.token > Number(tokenA));
    await lock.close();
  });

  it('a client whose connection is cut resumes its session and keeps its lock', async () => {
    await using proxy = await TcpProxy.start(server.port);
    await using a = await connect(`locksmith://127.0.0.1:${proxy.port}`, {
      sessionLeaseMs: 5_000,
      name: 'behind a proxy',
    });
    const lock = await a.table('t').lockRow('k3');
    const order: string[] = [];
    const waiting = b
      .table('t')
      .lockRow('k3', { waitMs: 30_000 })
      .then((l) => {
        order.push('b granted');
        return l;
      });
    const sessionLost: unknown[] = [];
    a.on('sessionLost', (reason) => sessionLost.push(reason));
    const reconnected = once(a, 'connected');
    proxy.cut();
    const [resumed] = (await reconnected) as [boolean];
    assert.equal(resumed, true, 'the session was resumed');
    assert.equal(proxy.accepted, 2, 'the client connected again through the proxy');
    assert.equal(lock.signal.aborted, false, 'the lock survived the cut');
    lock.ensureValid();
    assert.deepEqual(sessionLost, []);
    assert.equal(await b.table('t').tryLockRow('k3'), null, 'the row is still held');
    await a.table('t').put(new Put('k3', { rowLock: lock as never }).add('f', 'q', 'after-cut'));
    order.push('a put');
    // b may hear of its grant before a hears its unlock answered: the order that matters is
    // that b is granted only after a asked to unlock.
    order.push('a unlocks');
    await lock.close();
    const bLock = await waiting;
    assert.deepEqual(order, ['a put', 'a unlocks', 'b granted']);
    assert.ok(bLock.token > lock.token);
    assert.deepEqual(
      (await versions(b, 't', 'k3')).map((v) => v.value),
      ['after-cut'],
    );
    await bLock.close();
  });

  it('a client paused past its session lease loses its row to another, and its late writes are refused', async () => {
    const a = await clientProcess(server.url, 't', { sessionLeaseMs: LEASE_MS });
    const [, , , tokenA] = (await ask(a, 'lock k4', /^locked k4 /)).split(' ');
    await ask(a, 'put k4 a-before', /^put \w+ k4 a-before/);
    assert.ok(a.line(/^put ok k4 a-before$/), a.lines.join(' | '));
    const lastHeard = performance.now();
    await ask(a, 'ping', /^pinged$/);
    a.proc.kill('SIGSTOP');
    try {
      const lock = await b.table('t').lockRow('k4', { waitMs: 30_000 });
      const grantedAfter = performance.now() - lastHeard;
      assert.ok(
        grantedAfter >= LEASE_MS - ROUNDING_MS,
        `the row was handed on ${grantedAfter} ms after the holder was last heard`,
      );
      assert.ok(lock.token > Number(tokenA), `token ${lock.token} after ${tokenA}`);
      await b.table('t').put(new Put('k4', { rowLock: lock as never }).add('f', 'q', 'b-owner'));
      // Queued while the holder sleeps: the first things it does when it wakes up.
      a.proc.stdin?.write('guard k4\nput k4 a-late\n');
      await new Promise((resolve) => setTimeout(resolve, 100));
      a.proc.kill('SIGCONT');
      const guard = await eventually(() => a.line(/^guard k4 /), 30_000, 'the guard');
      // The lock renews itself (the default): it has no lease of its own, so it is its session
      // that expired, not a lock lease (the server's is 60 s).
      assert.match(guard, /^guard k4 invalid SESSION_EXPIRED$/);
      const put = await eventually(() => a.line(/^put \w+ k4 a-late/), 30_000, 'the late put');
      assert.match(put, /^put refused k4 a-late \w+ signal=SESSION_EXPIRED$/);
      // Only b's write is on the row after b's grant; nothing from the paused client.
      assert.deepEqual(
        (await versions(b, 't', 'k4')).map((v) => v.value),
        ['b-owner', 'a-before'],
      );
      await lock.close();
    } finally {
      a.proc.kill('SIGCONT');
      a.proc.kill('SIGKILL');
    }
  });

  it('a lock whose session lease passed while the event loop was blocked is invalid at once (regression)', async () => {
    await using a = await connect(server.url, { sessionLeaseMs: 300, name: 'blocked' });
    const lock = await a.table('t').lockRow('k5');
    // Blocked like a paused process: no timer runs, and the server hears nothing for the lease.
    const until = performance.now() + 900;
    while (performance.now() < until);
    // The lock's own lease (the server's 60 s) has not run out, but its session's has: the
    // server may have handed the row on already, so the handle must not vouch for it.
    assert.throws(() => lock.ensureValid(), { code: 'SESSION_EXPIRED' });
    assert.equal(lock.signal.aborted, true);
    const other = await b.table('t').lockRow('k5', { waitMs: 30_000 });
    assert.ok(other.token > lock.token);
    await other.close();
  });
});
