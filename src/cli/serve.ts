import { readFile, stat } from 'node:fs/promises';
import { LocksmithServer } from '../server/server.js';
import {
  durationOption,
  parseCommandLine,
  pathArgument,
  readTokenFile,
  UsageError,
} from './args.js';
import { USAGES } from './usage.js';

const STOP_SIGNALS = ['SIGINT', 'SIGTERM'] as const;

function portOption(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  if (!/^\d{1,5}$/.test(text) || Number(text) > 65535) {
    throw new UsageError(`${name} ${JSON.stringify(text)} is not a port: 0..65535`);
  }
  return Number(text);
}

function countOption(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  if (!/^\d{1,6}$/.test(text) || Number(text) < 1) {
    throw new UsageError(`${name} ${JSON.stringify(text)} must be a whole number from 1 to 999999`);
  }
  return Number(text);
}

/** Reads the token, warning when other users can read the file. */
async function readToken(path: string): Promise<string> {
  const token = await readTokenFile(path);
  const { mode } = await stat(path);
  if ((mode & 0o077) !== 0) {
    process.stderr.write(
      `locksmith serve: warning: ${path} can be read by other users (mode ${(mode & 0o777).toString(8)}); chmod 600 it\n`,
    );
  }
  return token;
}

/**
 * `locksmith serve`: runs a {@link LocksmithServer} until SIGINT or SIGTERM, then closes it
 * (every session ends and releases its locks; tables are closed cleanly) and exits 0.
 */
export async function run(args: string[]): Promise<number> {
  const { values, positionals, command } = parseCommandLine(args, USAGES.serve.flags);
  if (positionals.length > 0 || command !== undefined) {
    throw new UsageError(`serve takes no arguments, got ${JSON.stringify(positionals[0] ?? '--')}`);
  }
  const str = (name: string) => values[name] as string | undefined;
  const dataDir = pathArgument('--data', str('data') ?? './locksmith-data');
  const host = str('host') ?? '127.0.0.1';
  const port = portOption('--port', str('port'), 7420);
  const handlers = countOption('--handlers', str('handlers'), 10);
  const leasePeriod = str('lease-period');
  const sessionLease = str('session-lease');
  const certPath = str('tls-cert');
  const keyPath = str('tls-key');
  if ((certPath === undefined) !== (keyPath === undefined)) {
    throw new UsageError('--tls-cert and --tls-key go together');
  }
  const httpPort =
    str('http-port') === undefined ? undefined : portOption('--http-port', str('http-port'), 0);
  const tokenPath = str('token-file');
  const token =
    tokenPath === undefined ? undefined : await readToken(pathArgument('--token-file', tokenPath));
  const tls =
    certPath === undefined || keyPath === undefined
      ? undefined
      : { cert: await readFile(certPath), key: await readFile(keyPath) };

  const server = await LocksmithServer.listen({
    dataDir,
    host,
    port,
    handlers,
    ...(leasePeriod === undefined
      ? {}
      : { leasePeriodMs: durationOption('--lease-period', leasePeriod) }),
    ...(sessionLease === undefined
      ? {}
      : { sessionLeaseMs: durationOption('--session-lease', sessionLease) }),
    ...(token === undefined ? {} : { token }),
    ...(tls === undefined ? {} : { tls }),
    ...(httpPort === undefined ? {} : { httpPort }),
  });
  const scheme = tls === undefined ? 'locksmith' : 'locksmiths';
  const where = server.host.includes(':') ? `[${server.host}]` : server.host;
  const tables = server.catalog.size;
  process.stdout.write(
    `locksmith serve: listening on ${scheme}://${where}:${server.port} (data ${dataDir}, ${tables} table${tables === 1 ? '' : 's'}${token === undefined ? '' : ', token required'}${server.httpPort === undefined ? '' : `, status on http://${where}:${server.httpPort}/status`})\n`,
  );
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(
      `locksmith serve: ${signal}: closing (sessions end, locks are released)\n`,
    );
    void server.close();
  };
  for (const signal of STOP_SIGNALS) process.on(signal, stop);
  await server.done;
  for (const signal of STOP_SIGNALS) process.off(signal, stop);
  process.stdout.write('locksmith serve: closed\n');
  return 0;
}
