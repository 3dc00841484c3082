import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type ConnectOptions,
  connect,
  type LocksmithClient,
} from '../../src/client/locksmith-client.js';
import { LocksmithServer, type ServerOptions } from '../../src/server/server.js';

/** An in-process server on a fresh data directory and a free port, closed (and removed) at dispose. */
export async function startServer(
  options: Partial<ServerOptions> = {},
): Promise<LocksmithServer & { url: string; [Symbol.asyncDispose](): Promise<void> }> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'locksmith-server-'));
  const server = await LocksmithServer.listen({ port: 0, durability: 'none', ...options, dataDir });
  const url = `locksmith://127.0.0.1:${server.port}`;
  return Object.assign(server, {
    url,
    [Symbol.asyncDispose]: async () => {
      await server.close();
      if (options.dataDir === undefined) rmSync(dataDir, { recursive: true, force: true });
    },
  });
}

/** A client of `server`, closed at dispose. */
export async function client(
  server: { url: string },
  options: ConnectOptions = {},
): Promise<LocksmithClient> {
  return connect(server.url, options);
}
