import { LocksmithError } from '../core/errors.js';
import { FACTORY_NAMES, lockFactoryByName } from '../directory/factory-by-name.js';
import type { LockFactory } from '../directory/lock-factory.js';
import { runLockStressTest } from '../directory/lock-stress-test.js';

const USAGE = `Usage: locksmith stress <myID> <verifierHost> <verifierPort> <factory> <lockDir> <sleepTimeMS> <count>

  myID         = int from 0 .. 255 (should be unique for test process)
  verifierHost = hostname that the verify server is listening on
  verifierPort = port that the verify server is listening on
  factory      = lock factory to test: ${FACTORY_NAMES.join(', ')}
  lockDir      = path to the lock directory
  sleepTimeMS  = milliseconds to pause between each lock obtain/release
  count        = number of locking tries

You should run multiple instances of this process, each with its own
unique ID, and each pointing to the same lock directory, to verify
that locking is working correctly.

Make sure you are first running "locksmith verify-server" (or Lucene's LockVerifyServer).
`;

/**
 * `locksmith stress …`: Lucene's `LockStressTest` as a command, interchangeable with it.
 * Exit codes as in Lucene: 0 success, 1 usage error; any failure of the run (a violation seen
 * by the server, a double obtain, a lost connection) also exits 1, with the reason on stderr.
 */
export async function run(args: string[]): Promise<number> {
  if (args.length !== 7) {
    process.stderr.write(USAGE);
    return 1;
  }
  const [
    idArg = '',
    host = '',
    portArg = '',
    factoryName = '',
    lockDir = '',
    sleepArg = '',
    countArg = '',
  ] = args;
  const myId = parseInteger(idArg);
  if (myId === undefined || myId < 0 || myId > 255) {
    process.stderr.write(
      `myID must be a unique int 0..255, got ${JSON.stringify(idArg)}\n\n${USAGE}`,
    );
    return 1;
  }
  const port = parseInteger(portArg);
  const sleepTimeMs = parseInteger(sleepArg);
  const count = parseInteger(countArg);
  const bad =
    port === undefined || port < 1 || port > 65535
      ? `verifierPort must be an int 1..65535, got ${JSON.stringify(portArg)}`
      : sleepTimeMs === undefined || sleepTimeMs < 0
        ? `sleepTimeMS must be a non-negative int, got ${JSON.stringify(sleepArg)}`
        : count === undefined || count < 0
          ? `count must be a non-negative int, got ${JSON.stringify(countArg)}`
          : undefined;
  if (bad !== undefined || port === undefined || sleepTimeMs === undefined || count === undefined) {
    process.stderr.write(`${bad}\n\n${USAGE}`);
    return 1;
  }
  let factory: LockFactory;
  try {
    factory = lockFactoryByName(factoryName);
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n\n${USAGE}`);
    return 1;
  }

  process.stdout.write(
    `Connecting to server ${host}:${port} and registering as client ${myId}...\n`,
  );
  try {
    const result = await runLockStressTest({
      myId,
      verifierHost: host,
      verifierPort: port,
      factory,
      lockDir,
      sleepTimeMs,
      count,
    });
    const rate = result.elapsedMs > 0 ? Math.round((count * 1000) / result.elapsedMs) : count;
    process.stdout.write(
      `Finished ${count} tries: ${result.obtained} obtained, ${result.failed} held elsewhere, ` +
        `${result.doubleObtainProbes} double-obtain probes, ${Math.round(result.elapsedMs)} ms (${rate} tries/s).\n`,
    );
    return 0;
  } catch (err) {
    const detail =
      err instanceof LocksmithError
        ? `${err.message} [${err.code}]`
        : String((err as Error)?.stack ?? err);
    process.stderr.write(`locksmith stress: client ${myId} failed: ${detail}\n`);
    return 1;
  }
}

function parseInteger(text: string): number | undefined {
  if (!/^[+-]?\d{1,15}$/.test(text)) return undefined;
  return Number(text);
}
