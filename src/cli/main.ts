#!/usr/bin/env node
import { isErrno, LocksmithError } from '../core/errors.js';

/**
 * The `locksmith` command. Each subcommand lives in its own file and exports
 * `run(args): Promise<number>` (the exit code). What a command throws is printed on one line
 * (see {@link errorLine}) and exits 2 for a usage error (`INVALID_ARGUMENT`), 1 otherwise;
 * `verify-server` and `stress` keep Lucene's exit codes, which they return themselves.
 */
const COMMANDS: Record<
  string,
  { summary: string; load: () => Promise<{ run(args: string[]): Promise<number> }> }
> = {
  lock: {
    summary: 'lock <dir> [--factory native|simple] [--wait <duration>] -- <command> [args...]',
    load: () => import('./lock.js'),
  },
  elect: {
    summary:
      'elect --locker shared-file --dir <dir> | --locker database|lease-database --db <url> [--table <name>] --id <name> [--lease <d>] [--renew <d>] [--acquire-interval <d>] [--grace <d>] [--fail-if-locked] -- <command> [args...]',
    load: () => import('./elect.js'),
  },
  status: { summary: 'status <dir> [--name <lock>]', load: () => import('./status.js') },
  'verify-server': {
    summary: 'verify-server <bindHost> <clients>',
    load: () => import('./verify-server.js'),
  },
  stress: {
    summary:
      'stress <myID> <verifierHost> <verifierPort> <factory> <lockDir> <sleepTimeMS> <count>',
    load: () => import('./stress.js'),
  },
};

export function usage(): string {
  return [
    'Usage: locksmith <command> [args]',
    '',
    ...Object.values(COMMANDS).map((c) => `  locksmith ${c.summary}`),
  ].join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '-h' || name === '--help' || name === 'help') {
    process.stdout.write(`${usage()}\n`);
    return name === undefined ? 2 : 0;
  }
  const command = COMMANDS[name];
  if (command === undefined) {
    process.stderr.write(
      `locksmith: unknown command ${JSON.stringify(name)}; run "locksmith help" for the commands (INVALID_ARGUMENT)\n`,
    );
    return 2;
  }
  try {
    return await (await command.load()).run(rest);
  } catch (err) {
    process.stderr.write(`${errorLine(name, err)}\n`);
    if (process.env.LOCKSMITH_DEBUG === '1') process.stderr.write(`${stackOf(err)}\n`);
    return isInvalidArgument(err) ? 2 : 1;
  }
}

function isInvalidArgument(err: unknown): boolean {
  return err instanceof LocksmithError && err.code === 'INVALID_ARGUMENT';
}

/**
 * Every error a command throws becomes one line, `locksmith <cmd>: <message> (<CODE>)`: the
 * LocksmithError code, else the OS error code (`ENOENT`, …). The OS error behind a
 * LocksmithError is named too, since its message alone ("Cannot open …") does not say why.
 * The stack is for LOCKSMITH_DEBUG=1 only.
 */
function errorLine(command: string, err: unknown): string {
  const who = command === '' ? 'locksmith' : `locksmith ${command}`;
  const oneLine = (text: string) => text.replace(/\s*\n\s*/g, '; ').trim();
  if (!(err instanceof Error)) return `${who}: ${oneLine(String(err))} (INTERNAL)`;
  let message = oneLine(err.message);
  const cause = err.cause;
  if (err instanceof LocksmithError) {
    if (
      !(cause instanceof LocksmithError) &&
      isErrno(cause) &&
      !message.includes(cause.code as string)
    )
      message += `: ${cause.code}`;
    return `${who}: ${message} (${err.code})`;
  }
  if (isErrno(err)) return `${who}: ${message} (${err.code})`;
  return `${who}: ${message} (INTERNAL; LOCKSMITH_DEBUG=1 shows the stack)`;
}

/** The stack of `err` and of each of its causes. */
function stackOf(err: unknown): string {
  const parts: string[] = [];
  for (let e = err, depth = 0; e !== undefined && depth < 8; depth++) {
    parts.push(e instanceof Error ? (e.stack ?? String(e)) : String(e));
    e = e instanceof Error ? e.cause : undefined;
  }
  return parts.join('\nCaused by: ');
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    // main catches what the commands throw; this is for a failure of the dispatcher itself.
    process.stderr.write(`${errorLine('', err)}\n`);
    process.exitCode = 1;
  },
);
