/**
 * A server in its own process for bench/server.bench.ts, so that it has its own event loop the
 * way a deployment does. `node server-child.js locksmith '<ServerOptions JSON>'` runs a
 * `LocksmithServer` on a fresh temporary data directory (removed at exit); `node
 * server-child.js echo` runs the loopback floor: the same TCP path, framing (src/wire/frame.ts)
 * and MessagePack (src/wire/codec.ts), answering a HELLO with a WELCOME and every CALL with a
 * RESULT of nil, so that the real client can talk to it and `ping()` measures everything but
 * the server's own work.
 *
 * Lines: it prints `listening <port>` once ready; on `mem` it collects garbage (when run with
 * --expose-gc) and prints `mem <rss> <heapUsed>` (bytes); on `sessions` it prints
 * `sessions <count>`; on `cpu` the CPU time it used so far, `cpu <µs>`; stdin closing ends it.
 * Its options are the server's, plus `pgStorage: {database, tablePrefix}` for tables kept in
 * PostgreSQL.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { postgresRegionStorage } from '../src/rows/postgres-region-storage.js';
import { LocksmithServer, type ServerOptions } from '../src/server/server.js';
import { decode, encodeFrame } from '../src/wire/codec.js';
import { FrameReader } from '../src/wire/frame.js';

const WELCOME = {
  session: 'echo',
  resumed: false,
  sessionLeaseMs: 600_000,
  lockLeaseMs: 60_000,
  rowLockWaitMs: 30_000,
  maxFrameBytes: 16 * 1024 * 1024,
  maxInFlight: 1024,
  server: 'echo',
  locks: [],
};

/** Answers like the real connection does: answers of one event-loop turn leave in one write. */
function echoConnection(socket: Socket): void {
  const reader = new FrameReader();
  let corked = false;
  const send = (message: unknown[]) => {
    if (!corked) {
      corked = true;
      socket.cork();
      setImmediate(() => {
        corked = false;
        socket.uncork();
      });
    }
    socket.write(encodeFrame(message));
  };
  socket.setNoDelay(true);
  socket.on('error', () => undefined);
  socket.on('data', (chunk: Buffer) => {
    for (const payload of reader.push(chunk)) {
      const message = decode(payload) as unknown[];
      if (message[0] === 0) send([0, 1, WELCOME]);
      else if (message[0] === 1) send([1, message[1], null]);
    }
  });
}

async function main(): Promise<void> {
  const [mode = 'locksmith', json = '{}'] = process.argv.slice(2);
  let port: number;
  let close: () => Promise<void>;
  let sessions = () => 0;
  if (mode === 'echo') {
    const server = createServer(echoConnection);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
    close = () => new Promise((resolve) => server.close(() => resolve()));
  } else {
    const dataDir = mkdtempSync(join(tmpdir(), 'locksmith-bench-server-'));
    const { pgStorage, ...options } = JSON.parse(json) as Partial<ServerOptions> & {
      pgStorage?: { database: string; tablePrefix: string };
    };
    const openStorage =
      pgStorage === undefined ? undefined : postgresRegionStorage({ ...pgStorage, root: dataDir });
    const server = await LocksmithServer.listen({ port: 0, ...options, openStorage, dataDir });
    port = server.port;
    sessions = () => server.sessions.size;
    close = async () => {
      await server.close();
      rmSync(dataDir, { recursive: true, force: true });
    };
  }
  process.stdout.write(`listening ${port}\n`);
  const lines = createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    if (line === 'mem') {
      const gc = (globalThis as { gc?: () => void }).gc;
      gc?.();
      gc?.();
      const { rss, heapUsed } = process.memoryUsage();
      process.stdout.write(`mem ${rss} ${heapUsed}\n`);
    } else if (line === 'cpu') {
      const { user, system } = process.cpuUsage();
      process.stdout.write(`cpu ${user + system}\n`);
    } else if (line === 'sessions') {
      process.stdout.write(`sessions ${sessions()}\n`);
    }
  });
  lines.on('close', () => {
    close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}

await main();
