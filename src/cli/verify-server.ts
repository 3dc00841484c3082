import { LockViolationError } from '../core/errors.js';
import { LockVerifyServer } from '../directory/lock-verify-server.js';
import { errorLine } from './error-line.js';
import { commandUsage } from './usage.js';

/**
 * `locksmith verify-server <bindHost> <clients>`: Lucene's `LockVerifyServer` as a command.
 * Exit codes: 0 all clients finished cleanly, 1 usage error, violation or any other failure
 * (Lucene's server exits 0 even after a violation; this one does not). Only a wrong number of
 * arguments prints the usage; a bad value or a runtime failure (the address cannot be bound)
 * is one line, `locksmith verify-server: <message> (<CODE>)`.
 */
export async function run(args: string[]): Promise<number> {
  if (args.length !== 2) {
    process.stderr.write(commandUsage('verify-server'));
    return 1;
  }
  const [host = '', clientsArg = ''] = args;
  if (!/^\d{1,3}$/.test(clientsArg) || Number(clientsArg) < 1 || Number(clientsArg) > 256) {
    process.stderr.write(
      `locksmith verify-server: clients must be an integer from 1 to 256, got ${JSON.stringify(clientsArg)} (INVALID_ARGUMENT)\n`,
    );
    return 1;
  }
  const clients = Number(clientsArg);
  let server: LockVerifyServer;
  try {
    server = await LockVerifyServer.listen({
      host,
      clients,
      onStart: (ids) => {
        process.stdout.write(`All clients started (ids ${ids.join(', ')}), fire gun...\n`);
      },
      onFailure: (failure) => {
        const label =
          failure instanceof LockViolationError ? 'LOCK VIOLATION' : 'VERIFICATION ERROR';
        process.stderr.write(`\n*** ${label}: ${failure.message} ***\n\n`);
      },
    });
  } catch (err) {
    process.stderr.write(`${errorLine('verify-server', err)}\n`);
    return 1;
  }
  // Scripts and tests read the port from this line, so it must be out before any client
  // can be started.
  await new Promise<void>((resolve) =>
    process.stdout.write(`Listening on ${server.address}...\n`, () => resolve()),
  );
  const result = await server.done;
  const summary = `${result.clients.length} clients, ${result.acquisitions} acquisitions, ${result.releases} releases`;
  if (result.ok) {
    process.stdout.write(`Server terminated: ${summary}, no violation.\n`);
    return 0;
  }
  process.stderr.write(
    `Server terminated: VERIFICATION FAILED (${summary}):\n${result.failures.map((f) => `  ${f.message}\n`).join('')}`,
  );
  return 1;
}
