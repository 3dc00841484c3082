/**
 * SIGTERM stops `locksmith serve` promptly whatever is running: large puts in flight and
 * queued behind them, a client that never reads its answers, and a socket that opened a TLS
 * connection and never finished its handshake (before, the server waited for that socket as
 * long as Node's TLS handshake timeout, two minutes). The contract is `--shutdown-timeout`:
 * the close waits that long at most for work in flight; the bound checked is that plus a
 * generous margin for a loaded machine (the work itself is not what is measured).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect as netConnect, type Socket } from 'node:net';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { connect } from '../../src/client/locksmith-client.js';
import { Put } from '../../src/rows/index.js';
import { encode } from '../../src/wire/codec.js';
import { frame } from '../../src/wire/frame.js';
import { startServeProcess } from '../fixtures/serve-process.js';
import { exitOf, sleep, tempDir } from '../helpers.js';
import { selfSigned } from './self-signed.js';

const SHUTDOWN_TIMEOUT_MS = 2_000;
const MARGIN_MS = 30_000;

function rawSocket(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host: '127.0.0.1', port }, () => resolve(socket));
    socket.on('error', () => undefined);
    socket.once('error', reject);
  });
}

describe('shutdown', () => {
  it('SIGTERM under large puts, a non-reading client and an unfinished TLS handshake: the process exits within --shutdown-timeout', async (t) => {
    using dir = tempDir('locksmith-shutdown-');
    const files = selfSigned(dir.path);
    if (typeof files === 'string') {
      t.skip(`skipped: ${files}; this test needs openssl to make a self-signed certificate`);
      return;
    }
    const server = await startServeProcess(join(dir.path, 'data'), [
      '--tls-cert',
      files.cert,
      '--tls-key',
      files.key,
      '--shutdown-timeout',
      `${SHUTDOWN_TIMEOUT_MS}ms`,
    ]);
    const sockets: Socket[] = [];
    try {
      const url = `locksmiths://localhost:${server.port}`;
      const ca = readFileSync(files.cert);
      const client = await connect(url, { tls: { ca } });
      await client.createTable('t', ['f']);
      const table = client.table('t');
      const big = new Put('big');
      for (let i = 0; i < 20_000; i++) big.add('f', `q${i}`, 'v');
      // Many large puts: one running, the rest queued behind it.
      const puts = Array.from({ length: 20 }, () => table.put(big).catch((err: unknown) => err));
      // A TCP socket that never starts its TLS handshake, and one that never reads.
      sockets.push(await rawSocket(server.port));
      const nonReader = await rawSocket(server.port);
      nonReader.pause();
      nonReader.write(frame(encode([0, 1, {}])));
      sockets.push(nonReader);
      await sleep(300);

      const exited = exitOf(server.proc);
      const sent = Date.now();
      server.proc.kill('SIGTERM');
      const bound = SHUTDOWN_TIMEOUT_MS + MARGIN_MS;
      const outcome = await Promise.race([
        exited.then(({ code }) => ({ code })),
        sleep(bound).then(() => 'still running' as const),
      ]);
      const tookMs = Date.now() - sent;
      t.diagnostic(`exited ${tookMs} ms after SIGTERM`);
      assert.notEqual(outcome, 'still running', `no exit within ${bound} ms of SIGTERM`);
      assert.deepEqual(outcome, { code: 0 });
      assert.ok(server.lines.some((l) => /SIGTERM: closing/.test(l)));
      await Promise.all(puts);
      await client.close().catch(() => undefined);
    } finally {
      for (const s of sockets) s.destroy();
      if (server.proc.exitCode === null && server.proc.signalCode === null) await server.kill9();
    }
  });
});
