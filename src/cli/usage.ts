import { readFileSync } from 'node:fs';
import { FACTORY_NAMES } from '../directory/factory-by-name.js';

/**
 * The one source of every usage text: the top-level usage lists each command's synopsis from
 * here, and `locksmith <command> --help` prints the same synopsis with its options and their
 * defaults, so the two cannot drift apart.
 */
export interface CommandUsage {
  /** The command line, after `locksmith `. */
  synopsis: string;
  /** One line: what the command does. */
  summary: string;
  /** Option (or argument) lines, each naming its default where it has one. */
  options: string[];
  /** Further paragraphs (exit codes, notes). */
  notes: string[];
  /**
   * The options the command parses (see `parseCommandLine` in ./args.ts): the command reads its
   * command line with these, and {@link wantsHelp} skips the value of each `string` one, so
   * `--name -h` names a lock `-h` rather than asking for help.
   */
  flags: OptionSpecs;
}

/** Option specs as `parseArgs` takes them (no short forms: `-h` is help, nothing else). */
export type OptionSpecs = Record<string, { type: 'string' | 'boolean' }>;

export const COMMAND_NAMES = [
  'serve',
  'lock',
  'status',
  'elect',
  'verify-server',
  'stress',
] as const;
export type CommandName = (typeof COMMAND_NAMES)[number];

const EXIT_CODES =
  'Exit codes: 0 ok, 1 locked or a runtime failure, 2 a bad command line (errors are one line: locksmith <command>: <message> (<CODE>)).';

export const USAGES: Record<CommandName, CommandUsage> = {
  serve: {
    synopsis:
      'serve [--data <dir>] [--host <address>] [--port <port>] [--handlers <n>] [--lease-period <duration>] [--session-lease <duration>] [--token-file <path>] [--tls-cert <path> --tls-key <path>] [--http-port <port>]',
    summary:
      'Serves the row store and its row locks over the network until SIGINT or SIGTERM (docs/server.md).',
    options: [
      '--data <dir>                the data directory, created if missing (default: ./locksmith-data)',
      '--host <address>            the address to listen on (default: 127.0.0.1, this machine only)',
      '--port <port>               the port, 0 for any free one (default: 7420)',
      '--handlers <n>              handlers for data calls; lock waits never hold one (default: 10)',
      '--lease-period <duration>   lease of a row lock and of a scanner (default: 60s)',
      '--session-lease <duration>  lease of a session that asks for none (default: 10s)',
      '--token-file <path>         clients must present the token in this file (default: none)',
      '--tls-cert <path>           PEM certificate: serve TLS only (with --tls-key)',
      '--tls-key <path>            PEM private key of the certificate',
      '--http-port <port>          serve GET /status and GET /metrics on this port (default: none)',
    ],
    notes: [
      'Prints "locksmith serve: listening on locksmith://<host>:<port> ..." once it accepts clients.',
      EXIT_CODES,
    ],
    flags: {
      data: { type: 'string' },
      host: { type: 'string' },
      port: { type: 'string' },
      handlers: { type: 'string' },
      'lease-period': { type: 'string' },
      'session-lease': { type: 'string' },
      'token-file': { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      'http-port': { type: 'string' },
    },
  },
  lock: {
    synopsis: 'lock <dir> [--factory native|simple] [--wait <duration>] -- <command> [args...]',
    summary: "Holds <dir>/write.lock while <command> runs; exits with the command's exit code.",
    options: [
      '--factory native|simple  the lock factory (default: native)',
      '--wait <duration>        wait up to this long for the holder, e.g. 2s, 500ms (default: fail at once)',
    ],
    notes: [
      'The directory is created if missing. The command gets LOCKSMITH_FENCING_TOKEN.',
      "Exit codes: the command's own (128 + signal if killed, 127 not found, 126 cannot run); 1 locked or a runtime failure; 2 a bad command line.",
    ],
    flags: { factory: { type: 'string' }, wait: { type: 'string' } },
  },
  status: {
    synopsis: 'status <dir> [--name <lock>] [--factory native|simple]',
    summary: 'Tells whether the lock in <dir> is free, held (by whom) or cannot be taken.',
    options: [
      '--name <lock>            the lock file name (default: write.lock)',
      '--factory native|simple  the lock factory (default: native)',
    ],
    notes: ['Exit codes: 0 free, 1 held, 2 a bad command line, 3 cannot lock.'],
    flags: { name: { type: 'string' }, factory: { type: 'string' } },
  },
  elect: {
    synopsis:
      'elect --locker shared-file --dir <dir> | --locker database|lease-database --db <url> [--table <name>] --id <name> [--lease <duration>] [--renew <duration>] [--acquire-interval <duration>] [--grace <duration>] [--fail-if-locked] -- <command> [args...]',
    summary: 'Runs <command> only while this process is master of a shared store.',
    options: [
      '--locker <kind>              shared-file, database or lease-database (required)',
      '--dir <dir>                  the store directory (shared-file only)',
      '--db <url>                   sqlite:<path>, postgres://..., mysql://... (database lockers only)',
      '--table <name>               the lock table (default: ACTIVEMQ_LOCK)',
      '--id <name>                  names this contender and the lease holder (required)',
      '--lease <duration>           the lease (lease-database only; default: 10s)',
      '--renew <duration>           keep-alive period (default: 5s; lease-database: 1/4 of the lease)',
      '--acquire-interval <duration> retry period while another is master (default: 10s; not lease-database)',
      '--grace <duration>           time between SIGTERM and SIGKILL for the command (default: 5s)',
      '--fail-if-locked             exit 1 at once if another process is master (default: wait)',
    ],
    notes: [EXIT_CODES],
    flags: {
      locker: { type: 'string' },
      dir: { type: 'string' },
      db: { type: 'string' },
      table: { type: 'string' },
      id: { type: 'string' },
      lease: { type: 'string' },
      renew: { type: 'string' },
      'acquire-interval': { type: 'string' },
      grace: { type: 'string' },
      'fail-if-locked': { type: 'boolean' },
    },
  },
  'verify-server': {
    synopsis: 'verify-server <bindHost> <clients>',
    summary: "Lucene's LockVerifyServer: checks that stress clients never hold a lock together.",
    options: [
      'bindHost  address to listen on (127.0.0.1 unless the clients run on other machines)',
      'clients   number of stress clients that will connect (1..256)',
    ],
    notes: [
      'Prints "Listening on <host>:<port>..." once it listens (the port is chosen by the system) and starts the clients together once all of them registered. Run the clients with "locksmith stress" or Lucene\'s LockStressTest.',
      "Exit codes, as Lucene's: 0 every client finished without a locking violation, 1 a bad command line or any failure.",
    ],
    flags: {},
  },
  stress: {
    synopsis:
      'stress <myID> <verifierHost> <verifierPort> <factory> <lockDir> <sleepTimeMS> <count>',
    summary: "Lucene's LockStressTest: obtains and releases a lock, reporting to verify-server.",
    options: [
      'myID          int from 0 .. 255 (unique for each client process)',
      'verifierHost  hostname that the verify server is listening on',
      'verifierPort  port that the verify server is listening on (1..65535)',
      `factory       lock factory to test: ${FACTORY_NAMES.join(', ')}`,
      'lockDir       path to the lock directory',
      'sleepTimeMS   milliseconds to pause between each obtain/release (0 or more)',
      'count         number of locking tries (0 or more)',
    ],
    notes: [
      'Run several, each with its own ID and the same lock directory, after "locksmith verify-server".',
      "Exit codes, as Lucene's: 0 success, 1 a bad command line or any failure.",
    ],
    flags: {},
  },
};

export function isCommandName(name: string): name is CommandName {
  return (COMMAND_NAMES as readonly string[]).includes(name);
}

/** `locksmith <command> --help`: synopsis, summary, options with defaults, notes. */
export function commandUsage(name: CommandName): string {
  const u = USAGES[name];
  return [
    `Usage: locksmith ${u.synopsis}`,
    '',
    u.summary,
    '',
    ...u.options.map((line) => `  ${line}`),
    '',
    ...u.notes,
    '',
  ].join('\n');
}

/** The top-level usage: every command's synopsis. */
export function topUsage(): string {
  return [
    'Usage: locksmith <command> [args]',
    '',
    ...COMMAND_NAMES.map((name) => `  locksmith ${USAGES[name].synopsis}`),
    '  locksmith help [<command>]',
    '  locksmith --version',
    '',
    'Run "locksmith <command> --help" for its options and their defaults.',
    '',
  ].join('\n');
}

/** The package's version, read at run time from the package.json next to dist/. */
export function version(): string {
  const text = readFileSync(new URL('../../package.json', import.meta.url), 'utf8');
  return String((JSON.parse(text) as { version?: unknown }).version);
}

/**
 * Whether `args` asks for help: `--help` or `-h` before any `--` (after it, they belong to
 * the command being run), and not the value of an option that takes one (`--name -h`): that
 * value is read as `parseCommandLine` reads it, the next argument unless it starts
 * with `--`.
 */
export function wantsHelp(args: string[], flags: OptionSpecs): boolean {
  const end = args.indexOf('--');
  const before = end === -1 ? args : args.slice(0, end);
  for (let i = 0; i < before.length; i++) {
    const arg = before[i] as string;
    if (arg === '--help' || arg === '-h') return true;
    const takesValue = arg.startsWith('--') && flags[arg.slice(2)]?.type === 'string';
    if (takesValue && !before[i + 1]?.startsWith('--')) i++;
  }
  return false;
}
