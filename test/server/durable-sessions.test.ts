/**
 * Durable sessions on one server: a session and its row locks survive the server's restart
 * (clean, or kill -9 of a real process) — the client resumes the same session, its handles stay
 * valid with the same tokens, its puts under them succeed, nobody else takes the rows
 * meanwhile, and a waiter keeps waiting. A grant whose answer was lost comes back listed in the
 * next WELCOME (the client gives it back). With `--sessions memory` none of it survives.
 */
import assert from 'node:assert/strict';
import { readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { connect, type LocksmithClient } from '../../src/client/locksmith-client.js';
import type { LockLostError } from '../../src/core/errors.js';
import { Get, Put } from '../../src/rows/index.js';
import { LocksmithServer } from '../../src/server/server.js';
import { type ServeProcess, startServeProcess } from '../fixtures/serve-process.js';
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

/** Flags for a `serve` process on a port of its own, and its URL. */
async function serveFlags(extra: string[] = []): Promise<{ flags: string[]; url: string }> {
  const port = await freePort();
  return { flags: ['--port', String(port), ...extra], url: `locksmith://127.0.0.1:${port}` };
}

/** kill -9 of `proc`, a new server on its data, and a wait until the client reconnected. */
async function killAndRestart(
  proc: ServeProcess,
  dataDir: string,
  flags: string[],
  seen: ReturnType<typeof watch>,
): Promise<ServeProcess> {
  await proc.kill9();
  const next = await startServeProcess(dataDir, flags);
  await eventually(() => seen.resumed.length > 0 || seen.lost.length > 0, 30_000, 'a reconnect');
  return next;
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

        proc = await killAndRestart(proc, dir.path, flags, seen);
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

  it('kill -9 after the journal was checkpointed under lock churn: the held locks come back with their tokens, the released ones do not', async () => {
    using dir = tempDir('locksmith-durable-checkpoint-');
    const { flags, url } = await serveFlags();
    let proc = await startServeProcess(dir.path, flags);
    const alive = setInterval(() => undefined, 1000);
    try {
      await using holder = await connect(url, { sessionLeaseMs: 30_000 });
      const seen = watch(holder);
      await holder.createTable('t', ['f']);
      const table = holder.table('t');
      const held = [await table.lockRow('held-1'), await table.lockRow('held-2')];
      // The journal checkpoints once its log holds 4 MB: a cycle logs about 220 B.
      const snapshots = () =>
        readdirSync(join(dir.path, 'sessions')).filter((f) => f.endsWith('.snap')).length;
      const before = snapshots();
      let cycles = 0;
      await Promise.all(
        Array.from({ length: 16 }, async (_, w) => {
          for (let i = 0; i < 2_000; i++) {
            await (await table.lockRow(`churn-${w}-${i % 7}`)).close();
            cycles++;
          }
        }),
      );
      held.push(await table.lockRow('held-3'));
      for (const [i, l] of held.entries()) {
        await table.put(new Put(`held-${i + 1}`, { rowLock: l }).add('f', 'q', 'before'));
      }
      assert.ok(snapshots() > before, `no checkpoint of the journal after ${cycles} cycles`);
      const tokens = held.map((l) => l.token);

      proc = await killAndRestart(proc, dir.path, flags, seen);
      assert.deepEqual(seen.lost, []);
      assert.equal(seen.resumed[0], true);
      await using other = await connect(url);
      for (const [i, l] of held.entries()) {
        assert.equal(l.signal.aborted, false, `held-${i + 1} survived`);
        assert.equal(l.token, tokens[i]);
        await table.put(new Put(`held-${i + 1}`, { rowLock: l }).add('f', 'q', 'after'));
        assert.equal(await other.table('t').tryLockRow(`held-${i + 1}`), null);
      }
      // Every row of the churn was released: free for another session at once.
      for (let w = 0; w < 16; w++) {
        for (let r = 0; r < 7; r++) {
          const got = await other.table('t').tryLockRow(`churn-${w}-${r}`);
          assert.ok(got !== null, `churn-${w}-${r} is free`);
          await got.close();
        }
      }
    } finally {
      clearInterval(alive);
      await proc.kill9().catch(() => undefined);
    }
  });

  it('fencing across kill -9: a token from before the restart is refused on a free row, the resumed holder writes with its own', async () => {
    // Before: the restarted server knew no grant of a free row, so any old token passed.
    using dir = tempDir('locksmith-durable-fencing-');
    const { flags, url } = await serveFlags();
    let proc = await startServeProcess(dir.path, flags);
    const alive = setInterval(() => undefined, 1000);
    try {
      await using holder = await connect(url, { sessionLeaseMs: 30_000 });
      const seen = watch(holder);
      await holder.createTable('t', ['f']);
      const table = holder.table('t');
      const first = await table.lockRow('free');
      await first.close();
      const newest = await table.lockRow('free');
      await newest.close();
      await assert.rejects(table.put(new Put('free', { token: first.token }).add('f', 'q', 'x')), {
        code: 'STALE_TOKEN',
      });
      const held = await table.lockRow('held');

      proc = await killAndRestart(proc, dir.path, flags, seen);
      assert.deepEqual(seen.lost, []);
      for (const token of [first.token, newest.token]) {
        await assert.rejects(table.put(new Put('free', { token }).add('f', 'q', 'stale')), {
          code: 'STALE_TOKEN',
        });
      }
      await table.put(new Put('held', { rowLock: held, token: held.token }).add('f', 'q', 'own'));
      const next = await table.lockRow('free');
      assert.ok(next.token > newest.token);
      await table.put(new Put('free', { rowLock: next, token: next.token }).add('f', 'q', 'new'));
      assert.equal((await table.get(new Get('free'))).cells.length, 1, 'no stale write landed');
      await next.close();
      await held.close();
    } finally {
      clearInterval(alive);
      await proc.kill9().catch(() => undefined);
    }
  });

  it('the session journal deleted under a running server: grants fail once its lock file is seen gone, and after a restart its sessions are lost, not resumed', async () => {
    using dir = tempDir('locksmith-durable-deleted-');
    const { flags, url } = await serveFlags();
    let proc = await startServeProcess(dir.path, flags);
    const alive = setInterval(() => undefined, 1000);
    try {
      await using holder = await connect(url, { sessionLeaseMs: 30_000 });
      const seen = watch(holder);
      await holder.createTable('t', ['f']);
      const lock = await holder.table('t').lockRow('held');
      rmSync(join(dir.path, 'sessions'), { recursive: true, force: true });
      // The journal's lock file is watched: soon every grant fails, with the reason.
      const refused = await eventually(
        () =>
          holder
            .table('t')
            .lockRow('other')
            .then(
              async (l) => {
                await l.close().catch(() => undefined);
                return undefined;
              },
              (err: unknown) => err,
            ),
        10_000,
        'a grant refused',
        50,
      );
      assert.equal((refused as { code?: string }).code, 'IO_ERROR');
      assert.match((refused as Error).message, /refuses writes/);
      await assert.rejects(holder.table('t').lockRow('another'), { code: 'IO_ERROR' });

      proc = await killAndRestart(proc, dir.path, flags, seen);
      await eventually(() => lock.signal.aborted, 20_000, 'the lock to be lost');
      assert.equal((lock.signal.reason as LockLostError).code, 'SESSION_EXPIRED');
      await using other = await connect(url);
      const next = await other.table('t').lockRow('held', { waitMs: 10_000 });
      assert.ok(next.token > lock.token, 'the next grant has a larger token');
      await next.close();
    } finally {
      clearInterval(alive);
      await proc.kill9().catch(() => undefined);
    }
  });

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
