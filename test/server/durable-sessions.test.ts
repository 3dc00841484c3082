/**
 * Durable sessions on one server: a session and its row locks survive the server's restart
 * (clean, or kill -9 of a real process) — the client resumes the same session, its handles stay
 * valid with the same tokens, its puts under them succeed, nobody else takes the rows
 * meanwhile, and a waiter keeps waiting. A grant whose answer was lost comes back listed in the
 * next WELCOME (the client gives it back). With `--sessions memory` none of it survives.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { describe, it } from 'node:test';
import { connect, type LocksmithClient } from '../../src/client/locksmith-client.js';
import type { LockLostError } from '../../src/core/errors.js';
import { Get, Put } from '../../src/rows/index.js';
import { LocksmithServer } from '../../src/server/server.js';
import { startServeProcess } from '../fixtures/serve-process.js';
import { eventually, sleep, tempDir } from '../helpers.js';
import { RawClient } from './raw-client.js';

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as { port: number }).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/** Events of a client that matter across a restart. */
function watch(client: LocksmithClient) {
  const seen = { lost: [] as string[], resumed: [] as boolean[] };
  client.on('sessionLost', (reason) => seen.lost.push(reason.code));
  client.on('connected', (resumed) => seen.resumed.push(resumed));
  return seen;
}

describe('durable sessions on one server', () => {
  it('a clean restart on the same data: the same session, its lock held with its token, no one else gets the row', async () => {
    using dir = tempDir('locksmith-durable-');
    const port = await freePort();
    const options = { dataDir: dir.path, port, durability: 'fsync' as const };
    let server = await LocksmithServer.listen(options);
    const url = `locksmith://127.0.0.1:${port}`;
    const alive = setInterval(() => undefined, 1000);
    await using holder = await connect(url, { sessionLeaseMs: 20_000 });
    try {
      const seen = watch(holder);
      const sessionId = holder.session?.id;
      await holder.createTable('t', ['f']);
      const table = holder.table('t');
      const lock = await table.lockRow('r');
      await table.put(new Put('r', { rowLock: lock }).add('f', 'q', 'before'));

      await server.close();
      server = await LocksmithServer.listen(options);
      await eventually(() => seen.resumed.length > 0, 20_000, 'the client to resume');
      assert.deepEqual(seen.resumed, [true], 'the session was resumed, not opened again');
      assert.deepEqual(seen.lost, [], 'no session was lost');
      assert.equal(holder.session?.id, sessionId);
      assert.equal(lock.signal.aborted, false, 'the lock survived the restart');
      lock.ensureValid();

      await using other = await connect(url);
      assert.equal(await other.table('t').tryLockRow('r'), null, 'the row is still held');
      await table.put(new Put('r', { rowLock: lock }).add('f', 'q', 'after'));
      const token = lock.token;
      await lock.close();
      const next = await other.table('t').lockRow('r');
      assert.ok(next.token > token, 'a new grant has a larger token');
      assert.equal(
        (await other.table('t').get(new Get('r'))).getValue('f', 'q')?.toString(),
        'after',
      );
      await next.close();
    } finally {
      clearInterval(alive);
      await server.close();
    }
  });

  for (const mode of ['durable', 'memory'] as const) {
    it(`kill -9 of a server process (--sessions ${mode}) while a waiter is queued`, async () => {
      using dir = tempDir('locksmith-durable-kill-');
      const port = await freePort();
      const flags = ['--port', String(port), '--sessions', mode];
      let proc = await startServeProcess(dir.path, flags);
      const url = `locksmith://127.0.0.1:${port}`;
      const alive = setInterval(() => undefined, 1000);
      try {
        await using holder = await connect(url, { sessionLeaseMs: 30_000 });
        await using waiter = await connect(url, { sessionLeaseMs: 30_000 });
        const seen = watch(holder);
        await holder.createTable('t', ['f']);
        const lock = await holder.table('t').lockRow('r');
        const token = lock.token;
        // Queued behind the holder when the server dies; the client sends it again.
        const waited = waiter.table('t').lockRow('r', { waitMs: 60_000 });
        await sleep(500);

        await proc.kill9();
        proc = await startServeProcess(dir.path, flags);
        await eventually(
          () => seen.resumed.length > 0 || seen.lost.length > 0,
          30_000,
          'a reconnect',
        );
        if (mode === 'memory') {
          await eventually(() => lock.signal.aborted, 10_000, 'the lock to be lost');
          assert.equal((lock.signal.reason as LockLostError).code, 'SESSION_EXPIRED');
          const got = await waited;
          assert.ok(got.token > token);
          await got.close();
          return;
        }
        assert.deepEqual(seen.lost, []);
        assert.equal(seen.resumed[0], true);
        assert.equal(lock.signal.aborted, false);
        assert.equal(lock.token, token);
        await holder.table('t').put(new Put('r', { rowLock: lock }).add('f', 'q', 'mine'));
        let settled = false;
        void waited.then(
          () => {
            settled = true;
          },
          () => {
            settled = true;
          },
        );
        await sleep(300);
        assert.equal(settled, false, 'the waiter still waits while the lock is held');
        await lock.close();
        const got = await waited;
        assert.ok(got.token > token, 'the waiter gets a larger token');
        await got.close();
      } finally {
        clearInterval(alive);
        await proc.kill9().catch(() => undefined);
      }
    });
  }

  it('a grant whose answer never arrived is listed when the session is resumed after a restart', async () => {
    using dir = tempDir('locksmith-durable-lost-answer-');
    const port = await freePort();
    const options = { dataDir: dir.path, port, durability: 'fsync' as const };
    let server = await LocksmithServer.listen(options);
    try {
      const { raw, welcome } = await RawClient.session(port);
      await raw.call('createTable', ['t', ['f']]);
      const [lockId] = (await raw.call('lockRow', ['t', Buffer.from('r'), null, true])) as [
        string,
        number,
      ];
      raw.socket.destroy();
      await server.close();
      server = await LocksmithServer.listen(options);
      const again = await RawClient.open(port);
      again.send([0, 1, { session: welcome.session, epoch: 0 }]);
      const back = (await again.next((m) => m[0] === 0 || m[0] === 2)) as unknown[];
      assert.equal(back[0], 0, `resumed: ${JSON.stringify(back)}`);
      const w = back[2] as { resumed: boolean; locks: [string, string][] };
      assert.equal(w.resumed, true);
      assert.deepEqual(w.locks, [[lockId, 't']]);
      again.socket.destroy();
    } finally {
      await server.close();
    }
  });
});
