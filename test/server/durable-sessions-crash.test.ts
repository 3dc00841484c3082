/**
 * Durable sessions through a crash at each window of the journal, with real processes: a
 * server (`test/fixtures/crash-serve.ts`) kills itself with SIGKILL at one point, the next
 * server starts on its data, and the clients carry on. Never two holders, no hang:
 *
 * - a grant recorded but never answered: the resent lockRow ends with one lock, the recorded
 *   one given back, nobody else holding the row meanwhile;
 * - an unlock released in memory but not recorded: the row comes back held by the session
 *   that was letting it go, which gives it back at resume; the queued waiter gets it then;
 * - a session recorded but its client perhaps never told: the client ends with one session,
 *   and an unknown one expires after its lease;
 * - a holder that dies with the server: its session comes back with a full lease (nothing
 *   expires because the server changed), then expires, and the waiter gets the row.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { connect, type LocksmithClient } from '../../src/client/locksmith-client.js';
import { Put } from '../../src/rows/index.js';
import { type ServeProcess, startServeProcess } from '../fixtures/serve-process.js';
import { eventually, exitOf, fixture, orphanProof, repoRoot, sleep, tempDir } from '../helpers.js';

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as { port: number }).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/** A server on `dir` and `port` that dies at `point`, and a way to start its successor. */
async function crashingServer(dir: string, point: 'granted' | 'released' | 'opened') {
  const port = await freePort();
  const flags = ['--port', String(port)];
  const first = await startServeProcess(dir, flags, 20_000, [fixture('crash-serve'), point]);
  const died = exitOf(first.proc);
  return {
    url: `locksmith://127.0.0.1:${port}`,
    first,
    /** Once the first server died by its own hand, starts the real server on its data. */
    successor: async (): Promise<ServeProcess> => {
      const exit = await died;
      assert.equal(
        exit.signal,
        'SIGKILL',
        `the crash server died by SIGKILL: ${String(exit.code)}`,
      );
      return startServeProcess(dir, flags);
    },
  };
}

/** Events of a client that matter across a crash. */
function watch(client: LocksmithClient) {
  const seen = { lost: [] as string[], resumed: [] as boolean[] };
  client.on('sessionLost', (reason) => seen.lost.push(reason.code));
  client.on('connected', (resumed) => seen.resumed.push(resumed));
  return seen;
}

describe('durable sessions: a crash at each window of the journal', { concurrency: false }, () => {
  it('the server dies after recording a grant, before answering it: the lockRow sent again ends with one holder', async () => {
    using dir = tempDir('locksmith-crash-granted-');
    const server = await crashingServer(dir.path, 'granted');
    let next: ServeProcess | undefined;
    try {
      await using holder = await connect(server.url, { sessionLeaseMs: 30_000 });
      const seen = watch(holder);
      await holder.createTable('t', ['f']);
      const asked = holder.table('t').lockRow('r', { waitMs: 60_000 });
      next = await server.successor();
      const lock = await asked;
      assert.deepEqual(seen.lost, [], 'the session was not lost');
      assert.equal(seen.resumed.at(-1), true, 'the session was resumed');
      assert.equal(lock.signal.aborted, false);
      lock.ensureValid();
      await using other = await connect(server.url);
      assert.equal(await other.table('t').tryLockRow('r'), null, 'the row is held, once');
      await holder.table('t').put(new Put('r', { rowLock: lock }).add('f', 'q', 'v'));
      await eventually(() => holder.heldLocks === 1, 10_000, 'the unanswered grant given back');
      const token = lock.token;
      await lock.close();
      const after = await other.table('t').lockRow('r', { waitMs: 10_000 });
      assert.ok(after.token > token, 'the next grant has a larger token');
      await after.close();
    } finally {
      await server.first.kill9().catch(() => undefined);
      await next?.kill9().catch(() => undefined);
    }
  });

  it('the server dies after releasing a row in memory, before recording it: the row comes back to the session letting it go, then to the waiter', async () => {
    using dir = tempDir('locksmith-crash-released-');
    const server = await crashingServer(dir.path, 'released');
    let next: ServeProcess | undefined;
    try {
      await using holder = await connect(server.url, { sessionLeaseMs: 30_000 });
      await using waiter = await connect(server.url, { sessionLeaseMs: 30_000 });
      await holder.createTable('t', ['f']);
      const lock = await holder.table('t').lockRow('r');
      const waited = waiter.table('t').lockRow('r', { waitMs: 60_000 });
      await sleep(300);
      const closed = lock.close().then(
        () => 'closed',
        (err: Error) => `failed: ${err.message}`,
      );
      next = await server.successor();
      const got = await waited;
      assert.ok(got.token > lock.token, 'the waiter gets a larger token');
      assert.equal(lock.signal.aborted, true, "the holder's handle is done with");
      await closed;
      assert.equal(holder.heldLocks, 0, 'the holder holds nothing');
      await using other = await connect(server.url);
      assert.equal(await other.table('t').tryLockRow('r'), null, 'one holder: the waiter');
      await got.close();
    } finally {
      await server.first.kill9().catch(() => undefined);
      await next?.kill9().catch(() => undefined);
    }
  });

  it('the server dies as a session is recorded: the client ends with one session; one it never learned of expires after its lease', async () => {
    using dir = tempDir('locksmith-crash-opened-');
    const server = await crashingServer(dir.path, 'opened');
    let next: ServeProcess | undefined;
    const leaseMs = 3_000;
    try {
      const connecting = connect(server.url, { sessionLeaseMs: leaseMs, connectTimeoutMs: 30_000 });
      next = await server.successor();
      await using client = await connecting;
      await client.createTable('t', ['f']);
      const lock = await client.table('t').lockRow('r');
      // The recorded session, whether or not the client resumed it, is gone or live within
      // a lease of the successor's start (with a margin for a busy machine).
      await eventually(
        async () => (await client.status()).sessionsOpen === 1,
        leaseMs * 2 + 10_000,
        'one session left',
      );
      lock.ensureValid();
      await lock.close();
    } finally {
      await server.first.kill9().catch(() => undefined);
      await next?.kill9().catch(() => undefined);
    }
  });

  it('a lockRow waiting while the server is down ends at its own timeout, and is not granted later', async () => {
    using dir = tempDir('locksmith-crash-waiter-');
    const port = await freePort();
    const flags = ['--port', String(port)];
    let server = await startServeProcess(dir.path, flags);
    const url = `locksmith://127.0.0.1:${port}`;
    const waitMs = 2_000;
    try {
      await using holder = await connect(url, { sessionLeaseMs: 30_000 });
      await using waiter = await connect(url, { sessionLeaseMs: 30_000 });
      await holder.createTable('t', ['f']);
      const lock = await holder.table('t').lockRow('r');
      const startedAt = Date.now();
      const waited = waiter
        .table('t')
        .lockRow('r', { waitMs })
        .then(
          () => 'granted',
          (err: { code?: string }) => err.code,
        );
      await sleep(300);
      await server.kill9();
      // Down for longer than the wait: the client must give up by itself.
      const outcome = await waited;
      const tookMs = Date.now() - startedAt;
      assert.equal(outcome, 'LOCK_TIMEOUT');
      // The contract is the wait's bound; the margin is for a busy machine.
      assert.ok(tookMs < waitMs + 5_000, `the wait ended after ${tookMs} ms (waitMs ${waitMs})`);
      server = await startServeProcess(dir.path, flags);
      await eventually(
        () => holder.session !== undefined && !lock.signal.aborted,
        20_000,
        'resume',
      );
      await lock.close();
      await using other = await connect(url);
      const got = await other.table('t').lockRow('r', { waitMs: 10_000 });
      assert.equal(waiter.heldLocks, 0, 'the waiter was granted nothing');
      assert.ok(got.token > lock.token);
      await got.close();
    } finally {
      await server.kill9().catch(() => undefined);
    }
  });

  it('a holder that dies with the server: its session comes back with a full lease, then expires, and the waiter gets the row', async () => {
    using dir = tempDir('locksmith-crash-holder-');
    const port = await freePort();
    const flags = ['--port', String(port)];
    let server = await startServeProcess(dir.path, flags);
    const url = `locksmith://127.0.0.1:${port}`;
    const leaseMs = 4_000;
    // The holder, a process of its own: takes the row, says its token, and waits to be killed.
    const script = `
      import { connect } from ${JSON.stringify(join(repoRoot, 'dist/client/index.js'))};
      const client = await connect(${JSON.stringify(url)}, { sessionLeaseMs: ${leaseMs} });
      await client.createTable('t', ['f']);
      const lock = await client.table('t').lockRow('r');
      process.stdout.write('token ' + lock.token + '\\n');
      setInterval(() => {}, 1000);
    `;
    const holder = orphanProof(
      spawn(process.execPath, ['--input-type=module', '-e', script], {
        stdio: ['ignore', 'pipe', 'inherit'],
      }),
    );
    // The holder is unref'd (orphanProof): keep this process alive while it has not spoken.
    const alive = setInterval(() => undefined, 1000);
    try {
      const token = await new Promise<number>((resolve, reject) => {
        let out = '';
        holder.stdout?.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          const m = /token (\d+)/.exec(out);
          if (m !== null) resolve(Number(m[1]));
        });
        holder.once('exit', (code) => reject(new Error(`the holder exited (${code})`)));
      });
      const holderGone = exitOf(holder);
      holder.kill('SIGKILL');
      await server.kill9();
      await holderGone;
      server = await startServeProcess(dir.path, flags);
      const restartedAt = Date.now();
      await using waiter = await connect(url);
      assert.equal(
        await waiter.table('t').tryLockRow('r'),
        null,
        "the dead holder's session came back with its lock: nothing expires because the server changed",
      );
      const got = await waiter.table('t').lockRow('r', { waitMs: leaseMs * 2 + 20_000 });
      const waitedMs = Date.now() - restartedAt;
      assert.ok(got.token > token, 'a larger token');
      assert.ok(
        waitedMs >= leaseMs - 500,
        `the session lasted its full lease from the restart (${waitedMs} ms)`,
      );
      await got.close();
    } finally {
      clearInterval(alive);
      holder.kill('SIGKILL');
      await server.kill9().catch(() => undefined);
    }
  });
});
