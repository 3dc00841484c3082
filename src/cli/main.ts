#!/usr/bin/env node
import { LocksmithError } from '../core/errors.js';
import { errorLine, stackOf } from './error-line.js';
import {
  COMMAND_NAMES,
  type CommandName,
  commandUsage,
  isCommandName,
  subcommandUsage,
  topUsage,
  USAGES,
  version,
  wantsHelp,
} from './usage.js';

/**
 * The `locksmith` command. Each subcommand lives in its own file and exports
 * `run(args): Promise<number>` (the exit code). What a command throws is printed on one line
 * (see {@link errorLine}) and exits 2 for a usage error (`INVALID_ARGUMENT`), 1 otherwise;
 * `verify-server` and `stress` keep Lucene's exit codes, which they return themselves.
 * Every usage text comes from ./usage.ts; `--help`/`-h` (before any `--`) is answered here for
 * every command, before the command is loaded, and exits 0 (for a subcommand, its own usage).
 */
// A dependency's deprecation notice is for its developers, not for someone running a command:
// gRPC's TLS to an IP address (`--etcd https://127.0.0.1:2379`) printed DEP0123 on every run.
process.noDeprecation = true;

const COMMANDS: Record<CommandName, () => Promise<{ run(args: string[]): Promise<number> }>> = {
  serve: () => import('./serve.js'),
  lock: () => import('./lock.js'),
  status: () => import('./status.js'),
  elect: () => import('./elect.js'),
  'verify-server': () => import('./verify-server.js'),
  stress: () => import('./stress.js'),
  rows: () => import('./rows.js'),
};

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '-h' || name === '--help') {
    process.stdout.write(topUsage());
    return name === undefined ? 2 : 0;
  }
  if (name === '--version' || name === '-V') {
    process.stdout.write(`${version()}\n`);
    return 0;
  }
  if (name === 'help') {
    // `help`, `help --help`, `help <command>`, `help rows <subcommand>`: help never fails on a
    // request for help; only a name that is no command (or subcommand) is refused.
    const topic = rest.filter((a) => a !== '--help' && a !== '-h');
    const [command, sub, ...extra] = topic;
    if (command === undefined) {
      process.stdout.write(topUsage());
      return 0;
    }
    const known =
      isCommandName(command) &&
      extra.length === 0 &&
      (sub === undefined || USAGES[command].subcommands?.[sub] !== undefined);
    if (!known) {
      process.stderr.write(
        `locksmith help: unknown command ${JSON.stringify(topic.join(' '))}; expected one of ${COMMAND_NAMES.join(', ')}${command === 'rows' ? ` (rows subcommands: ${Object.keys(USAGES.rows.subcommands ?? {}).join(', ')})` : ''} (INVALID_ARGUMENT)\n`,
      );
      return 2;
    }
    process.stdout.write(sub === undefined ? commandUsage(command) : subcommandUsage(command, sub));
    return 0;
  }
  if (!isCommandName(name)) {
    process.stderr.write(
      `locksmith: unknown command ${JSON.stringify(name)}; run "locksmith help" for the commands (INVALID_ARGUMENT)\n`,
    );
    return 2;
  }
  if (wantsHelp(rest, USAGES[name].flags)) {
    // `locksmith rows put --help`: the subcommand's own usage.
    const sub = rest[0];
    const known = sub !== undefined && USAGES[name].subcommands?.[sub] !== undefined;
    process.stdout.write(known ? subcommandUsage(name, sub) : commandUsage(name));
    return 0;
  }
  try {
    return await (await COMMANDS[name]()).run(rest);
  } catch (err) {
    process.stderr.write(`${errorLine(name, err)}\n`);
    if (process.env.LOCKSMITH_DEBUG === '1') process.stderr.write(`${stackOf(err)}\n`);
    return isInvalidArgument(err) ? 2 : 1;
  }
}

function isInvalidArgument(err: unknown): boolean {
  return err instanceof LocksmithError && err.code === 'INVALID_ARGUMENT';
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
