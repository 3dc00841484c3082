/**
 * What a client can make the server hold is bounded (docs/server.md, "Limits"):
 *
 * - clients that send calls and never read the answers cost the server at most about
 *   `maxBufferedBytes` each (it stops reading them, and starts none of their calls, until they
 *   read), and the memory comes back when they go; a client that reads late gets every answer;
 * - past the server-wide budget of unsent answers, a connection over its own bound is closed
 *   (its session lives on);
 * - sockets in all and from one address, and sessions, are bounded, each refusal a clear
 *   `LIMIT_EXCEEDED`, and a freed place is given to the next client.
 *
 * Memory is the test process's own (the server runs in it), after a GC: the bounds are what a
 * bug would blow through many times over, never a measure of speed.
 */
import assert from 'node:assert/strict';
import { connect as netConnect, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { encode } from '../../src/wire/codec.js';
import { frame } from '../../src/wire/frame.js';
import { eventually, sleep } from '../helpers.js';
import { RawClient } from './raw-client.js';
import { startServer } from './server-fixture.js';

const MiB = 1024 * 1024;
const VALUE = Buffer.alloc(64 * 1024, 7);
const GET_BIG = ['t', ['big', null, [[], 1, 0, 2 ** 53 - 1]]];

function gcFunction(): () => void {
  const g = (globalThis as { gc?: () => void }).gc;
  if (g !== undefined) return g;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}
const gc = gcFunction();

/** Heap and buffers of this process after a full GC (what the server holds, in bytes). */
async function held(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    gc();
    await sleep(20);
  }
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

/** A client that says HELLO, sends `calls` gets of the big row, and never reads a byte. */
function nonReader(port: number, calls: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host: '127.0.0.1', port }, () => {
      socket.pause();
      const frames = [frame(encode([0, 1, {}]))];
      for (let id = 1; id <= calls; id++) frames.push(frame(encode([1, id, 'get', GET_BIG])));
      socket.write(Buffer.concat(frames));
      resolve(socket);
    });
    socket.on('error', () => undefined);
    socket.once('error', reject);
  });
}

async function bigRowServer(options: Parameters<typeof startServer>[0] = {}) {
  const server = await startServer(options);
  const { raw } = await RawClient.session(server.port);
  await raw.call('createTable', ['t', ['f']]);
  await raw.call('put', ['t', ['big', null, null, [['f', 'q', VALUE, null]]], 0]);
  raw.destroy();
  await eventually(() => server.connections.size === 0, 60_000);
  return server;
}

/** Until the server has nothing running or queued for anyone. */
async function settled(server: Awaited<ReturnType<typeof startServer>>): Promise<void> {
  await eventually(
    () => server.lanes.handler.busy === 0 && server.lanes.handler.queued === 0,
    60_000,
  );
  await sleep(200);
}

describe('memory a client can pin', () => {
  it('clients that never read cost about maxBufferedBytes each, and give it back when they go', async (t) => {
    await using server = await bigRowServer();
    const before = await held();
    const rssBefore = process.memoryUsage().rss;
    // 4 clients x 2000 answers of 64 KiB: 500 MiB if the server buffered what they ask for.
    const clients = await Promise.all([1, 2, 3, 4].map(() => nonReader(server.port, 2000)));
    await settled(server);
    const during = await held();
    const rssDuring = process.memoryUsage().rss;
    const perClient = (during - before) / clients.length;
    for (const c of clients) c.destroy();
    await eventually(() => server.connections.size === 0, 60_000);
    await sleep(200);
    const after = await held();
    const rssAfter = process.memoryUsage().rss;
    t.diagnostic(
      `held (heap + buffers) before ${(before / MiB).toFixed(1)} MiB, with 4 non-reading clients ${(during / MiB).toFixed(1)} MiB (${(perClient / MiB).toFixed(2)} MiB each), after they left ${(after / MiB).toFixed(1)} MiB; RSS ${(rssBefore / MiB).toFixed(0)} / ${(rssDuring / MiB).toFixed(0)} / ${(rssAfter / MiB).toFixed(0)} MiB`,
    );
    // The default bound is 1 MiB of unsent answers per connection; the rest is a few answers
    // and the calls read but not started. Without the bound this was 30+ MiB each.
    assert.ok(perClient < 8 * MiB, `each non-reading client holds ${perClient} bytes`);
    assert.ok(after - before < 4 * MiB, `${after - before} bytes not given back`);
  });

  it('a client that reads late gets every answer, in full', async () => {
    await using server = await bigRowServer({ maxBufferedBytes: 256 * 1024 });
    const { raw } = await RawClient.session(server.port);
    raw.socket.pause();
    const answers = Array.from({ length: 300 }, () => raw.call('get', GET_BIG));
    await settled(server);
    raw.socket.resume();
    const results = (await Promise.all(answers)) as [unknown, unknown[][]][];
    assert.equal(results.length, 300);
    for (const [, cells] of results) {
      assert.equal(Buffer.from(cells[0]?.[4] as Uint8Array).equals(VALUE), true);
    }
    assert.equal(raw.closed, false);
    raw.destroy();
  });

  it('past the server-wide budget, a connection over its own bound is closed; its session lives on', async () => {
    await using server = await bigRowServer({
      maxBufferedBytes: 64 * 1024,
      maxBufferedBytesTotal: 128 * 1024,
    });
    const reader = await RawClient.session(server.port);
    const sessions = server.sessions.size;
    // Each ends up holding more than its own bound (64 KiB) unsent; two are over the budget.
    const clients = [await nonReader(server.port, 500), await nonReader(server.port, 500)];
    await eventually(() => server.connections.size <= 2, 60_000);
    await settled(server);
    assert.equal(server.connections.size, 2, 'one non-reader was dropped, the reader was not');
    assert.equal(server.sessions.size, sessions + 2, 'the dropped connection’s session lives on');
    // Everyone else is served as before.
    assert.equal(await reader.raw.call('ping', []), null);
    for (const c of clients) c.destroy();
    reader.raw.destroy();
  });
});

describe('connection and session limits', () => {
  async function refused(port: number): Promise<unknown[]> {
    const raw = await RawClient.open(port);
    const error = await raw.next((m) => m[0] === 2 && m[1] === 0);
    await raw.whenClosed();
    return error;
  }

  it('maxConnectionsPerAddress: one more socket from the address is refused; a freed place is reused', async () => {
    await using server = await startServer({ maxConnectionsPerAddress: 3 });
    const held = await Promise.all([1, 2, 3].map(() => RawClient.session(server.port)));
    const error = await refused(server.port);
    assert.equal(error[2], 'LIMIT_EXCEEDED');
    assert.match(String(error[3]), /127\.0\.0\.1 has 3 connections open.*limit is 3/);
    held[0]?.raw.destroy();
    await eventually(() => server.status().sockets === 2, 60_000);
    const again = await RawClient.session(server.port);
    assert.equal(typeof again.welcome.session, 'string');
    for (const h of [...held, again]) h.raw.destroy();
  });

  it('maxConnections: counted from accept, before HELLO', async () => {
    await using server = await startServer({ maxConnections: 2 });
    const silent = await Promise.all([1, 2].map(() => RawClient.open(server.port)));
    const error = await refused(server.port);
    assert.equal(error[2], 'LIMIT_EXCEEDED');
    assert.match(String(error[3]), /2 connections open; the limit is 2/);
    for (const s of silent) s.destroy();
    await eventually(() => server.status().sockets === 0, 60_000);
    const { raw } = await RawClient.session(server.port);
    raw.destroy();
  });

  it('maxSessions: a HELLO beyond is refused; a closed session makes room', async () => {
    await using server = await startServer({ maxSessions: 2 });
    const a = await RawClient.session(server.port);
    const b = await RawClient.session(server.port);
    const raw = await RawClient.open(server.port);
    raw.send([0, 1, {}]);
    const error = await raw.next((m) => m[0] === 2 && m[1] === 0);
    assert.equal(error[2], 'LIMIT_EXCEEDED');
    assert.match(String(error[3]), /2 sessions; the limit is 2/);
    await a.raw.call('closeSession', []);
    const c = await RawClient.session(server.port);
    assert.equal(server.sessions.size, 2);
    for (const x of [a.raw, b.raw, c.raw, raw]) x.destroy();
  });

  it('every limit is validated', async () => {
    for (const [name, value] of [
      ['maxConnections', 0],
      ['maxConnectionsPerAddress', -1],
      ['maxSessions', 1.5],
      ['maxBufferedBytes', 1024],
      ['maxBufferedBytesTotal', { toString: 1 }],
      ['shutdownTimeoutMs', Number.NaN],
    ] as const) {
      await assert.rejects(
        startServer({ [name]: value }),
        (err: { code?: string; message: string }) =>
          err.code === 'INVALID_ARGUMENT' && err.message.includes(name),
      );
    }
  });
});
