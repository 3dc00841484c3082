// Not a test: `locksmith serve --ha` processes for the master/slave proofs.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { type ServeProcess, startServeProcess } from '../fixtures/serve-process.js';
import { RawClient } from './raw-client.js';

export interface HaServer {
  proc: ServeProcess;
  httpPort: number;
  address: string;
}

export async function startHa(dataDir: string, ha: string[]): Promise<HaServer> {
  const proc = await startServeProcess(dataDir, ['--http-port', '0', ...ha]);
  const listening = proc.line(/listening on/) ?? '';
  const httpPort = Number(/dashboard on http:\/\/[^:]+:(\d+)\//.exec(listening)?.[1]);
  assert.ok(httpPort > 0, listening);
  return { proc, httpPort, address: `127.0.0.1:${proc.port}` };
}

/** The token of this server's latest "master (token N)" line, once there is one. */
export function masterToken(server: HaServer): number | undefined {
  const lines = server.proc.lines.filter((l) => /: master \(token \d+\)/.test(l));
  const last = lines.at(-1);
  return last === undefined ? undefined : Number(/token (\d+)/.exec(last)?.[1]);
}

export async function haStatus(server: HaServer): Promise<Record<string, unknown>> {
  const response = await fetch(`http://127.0.0.1:${server.httpPort}/status`);
  const status = (await response.json()) as { ha: Record<string, unknown> };
  return status.ha;
}

/** HELLO, then `listTables`: resolves once this server serves, else throws. */
export async function oneCall(port: number): Promise<void> {
  const { raw } = await RawClient.session(port);
  try {
    await raw.call('listTables', []);
  } finally {
    raw.socket.destroy();
  }
}

/** `--ha lease-database` on a SQLite file in `dir`, with a 2 s lease renewed every 500 ms. */
export function sqliteLeaseFlags(dir: string): string[] {
  return [
    '--ha',
    'lease-database',
    '--db',
    join(dir, 'lock.db'),
    '--lease',
    '2s',
    '--renew',
    '500ms',
  ];
}
