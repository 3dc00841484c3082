import { LocksmithError, LockViolationError } from '../core/errors.js';
import { LockVerifyServer } from '../directory/lock-verify-server.js';

const USAGE = `Usage: locksmith verify-server <bindHost> <clients>

  bindHost = address to listen on (127.0.0.1 unless the clients run on other machines)
  clients  = number of stress clients that will connect (1..256)

Prints "Listening on <host>:<port>..." once it listens (the port is chosen by the system),
starts the clients together once all of them registered, and exits 0 when every client
finished without a locking violation, 1 otherwise. Run the clients with "locksmith stress"
or Lucene's LockStressTest.
`;

/**
 * `locksmith verify-server <bindHost> <clients>`: Lucene's `LockVerifyServer` as a command.
 * Exit codes: 0 all clients finished cleanly, 1 usage error, violation or any other failure
 * (Lucene's server exits 0 even after a violation; this one does not).
 */
export async function run(args: string[]): Promise<number> {
  if (args.length !== 2) {
    process.stderr.write(USAGE);
    return 1;
  }
  const [host = '', clientsArg = ''] = args;
  const clients = /^[+-]?\d+$/.test(clientsArg) ? Number(clientsArg) : Number.NaN;
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
    if (!(err instanceof LocksmithError)) throw err;
    process.stderr.write(`locksmith verify-server: ${err.message}\n\n${USAGE}`);
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
