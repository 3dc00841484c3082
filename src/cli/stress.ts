import { lockFactoryByName } from '../directory/factory-by-name.js';
import type { LockFactory } from '../directory/lock-factory.js';
import { runLockStressTest } from '../directory/lock-stress-test.js';
import { errorLine } from './error-line.js';
import { commandUsage } from './usage.js';

/**
 * `locksmith stress …`: Lucene's `LockStressTest` as a command, interchangeable with it.
 * Exit codes as in Lucene: 0 success, 1 usage error; any failure of the run (a violation seen
 * by the server, a double obtain, a lost connection) also exits 1, with the reason on stderr.
 * Only a wrong number of arguments prints the usage; a bad value is one line naming it.
 */
export async function run(args: string[]): Promise<number> {
  if (args.length !== 7) {
    process.stderr.write(commandUsage('stress'));
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
    return badArgument(`myID must be an integer from 0 to 255, got ${JSON.stringify(idArg)}`);
  }
  const port = parseInteger(portArg);
  const sleepTimeMs = parseInteger(sleepArg);
  const count = parseInteger(countArg);
  const bad =
    port === undefined || port < 1 || port > 65535
      ? `verifierPort must be an integer from 1 to 65535, got ${JSON.stringify(portArg)}`
      : sleepTimeMs === undefined || sleepTimeMs < 0
        ? `sleepTimeMS must be an integer, 0 or more, got ${JSON.stringify(sleepArg)}`
        : count === undefined || count < 0
          ? `count must be an integer, 0 or more, got ${JSON.stringify(countArg)}`
          : undefined;
  if (bad !== undefined || port === undefined || sleepTimeMs === undefined || count === undefined) {
    return badArgument(bad ?? 'bad arguments');
  }
  let factory: LockFactory;
  try {
    factory = lockFactoryByName(factoryName);
  } catch (err) {
    return badArgument((err as Error).message.replace(/\s*\n\s*/g, '; '));
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
    process.stderr.write(
      `${errorLine('stress', err).replace(': ', `: client ${myId} failed: `)}\n`,
    );
    return 1;
  }
}

/** A bad argument value: one line naming it (Lucene's exit code 1, not the whole usage). */
function badArgument(message: string): number {
  process.stderr.write(`locksmith stress: ${message} (INVALID_ARGUMENT)\n`);
  return 1;
}

function parseInteger(text: string): number | undefined {
  if (!/^[+-]?\d{1,15}$/.test(text)) return undefined;
  return Number(text);
}
