#!/usr/bin/env node
import { LocksmithError } from '../core/errors.js';
import { UsageError } from './args.js';

/**
 * The `locksmith` command. Each subcommand lives in its own file and exports
 * `run(args): Promise<number>` (the exit code); usage errors exit 2 unless the subcommand's
 * original (Lucene's stress test) says otherwise.
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
    process.stderr.write(`locksmith: unknown command ${JSON.stringify(name)}\n${usage()}\n`);
    return 2;
  }
  return (await command.load()).run(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (
      err instanceof UsageError ||
      (err instanceof LocksmithError && err.code === 'INVALID_ARGUMENT')
    ) {
      process.stderr.write(`locksmith: ${err.message}\n`);
      process.exitCode = 2;
      return;
    }
    const detail =
      err instanceof LocksmithError
        ? `${err.message} [${err.code}]`
        : String((err as Error)?.stack ?? err);
    process.stderr.write(`locksmith: ${detail}\n`);
    process.exitCode = 1;
  },
);
