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
  /**
   * A command made of subcommands (`rows`): each has its own usage, shown by
   * `locksmith <command> <subcommand> --help` and on a usage error; {@link flags} is then the
   * union of theirs, for {@link wantsHelp}.
   */
  subcommands?: Record<string, SubcommandUsage>;
}

/** One subcommand of a command: `locksmith <command> <synopsis>`. */
export interface SubcommandUsage {
  synopsis: string;
  summary: string;
  options: string[];
  /** Its own options; the command's common ones are added when it parses. */
  flags: OptionSpecs;
}

/**
 * Option specs as `parseArgs` takes them. `-h` is help for every command; a few options have a
 * one-letter `short` form too (`lock -s`, `lock -E <n>`, as flock(1) spells them), given on its
 * own (`-s -E 75`, not `-sE75`).
 */
export type OptionSpecs = Record<string, { type: 'string' | 'boolean'; short?: string }>;

/** The etcd locker's own flags, the same for `elect --locker etcd` and `serve --ha etcd`. */
export const ETCD_FLAG_SPECS: OptionSpecs = {
  etcd: { type: 'string' },
  election: { type: 'string' },
  'etcd-user': { type: 'string' },
  'etcd-password-file': { type: 'string' },
  'etcd-ca': { type: 'string' },
  'etcd-cert': { type: 'string' },
  'etcd-key': { type: 'string' },
};

export const COMMAND_NAMES = [
  'serve',
  'lock',
  'status',
  'elect',
  'verify-server',
  'stress',
  'rows',
] as const;
export type CommandName = (typeof COMMAND_NAMES)[number];

/** Options every `locksmith rows` subcommand takes: where the server is, how to reach it. */
export const ROWS_COMMON_FLAGS: OptionSpecs = {
  server: { type: 'string' },
  'token-file': { type: 'string' },
  'tls-ca': { type: 'string' },
  'connect-timeout': { type: 'string' },
};

/** What `get` and `scan` share: which columns, how many versions, values or not. */
const READ_OPTIONS = [
  '--column <f>[:<q>]       only this family, or this column (default: every family)',
  '--versions <n>           versions per column, newest first (default: 1)',
  '--values                 show each value too, as toStringBinary shows bytes',
];
const READ_FLAGS: OptionSpecs = {
  column: { type: 'string' },
  versions: { type: 'string' },
  values: { type: 'boolean' },
  json: { type: 'boolean' },
};
const ROW_WAIT =
  "--wait <duration>        wait up to this long for the row's lock (default: the server's, 30s)";

/** `locksmith rows <subcommand>`: the row store shell. */
export const ROWS_SUBCOMMANDS: Record<string, SubcommandUsage> = {
  'create-table': {
    synopsis:
      'create-table <table> <family>[:<maxVersions>]... [--timestamp-on-arrival] [--splits <row>,<row>...]',
    summary: 'Creates a table with its column families (maxVersions default: 3).',
    options: [
      "--timestamp-on-arrival   HBase 0.90's batch timestamps, read when a mutation arrives (default: off)",
      '--splits <row>,...       split the table into regions, each starting at one of these rows (up to 1,000; \\xNN for a byte; default: one region)',
    ],
    flags: { 'timestamp-on-arrival': { type: 'boolean' }, splits: { type: 'string' } },
  },
  'list-tables': {
    synopsis: 'list-tables [--json]',
    summary: 'Prints the name of each table, one a line.',
    options: ['--json                   print a JSON array of the names'],
    flags: { json: { type: 'boolean' } },
  },
  'drop-table': {
    synopsis: 'drop-table <table>',
    summary: 'Drops a table and its data; every lock on it is lost (LOCK_LOST). Cannot be undone.',
    options: [],
    flags: {},
  },
  split: {
    synopsis: 'split <table> <row>',
    summary:
      'Splits a live table at <row> (\\xNN for a byte): the region holding it ends there, a new region holds the rows from <row> on, with their locks.',
    options: [],
    flags: {},
  },
  describe: {
    synopsis: 'describe <table> [--json]',
    summary: 'Prints the column families of a table and how its timestamps are read.',
    options: ['--json                   print the description as JSON'],
    flags: { json: { type: 'boolean' } },
  },
  put: {
    synopsis: 'put <table> <row> <family>:<qualifier> <value> [--ts <ms>] [--wait <duration>]',
    summary: "Writes one cell; waits for the row's lock if another session holds it.",
    options: [
      "--ts <ms>                the cell's timestamp, ms since the epoch (default: the server's time)",
      ROW_WAIT,
    ],
    flags: { ts: { type: 'string' }, wait: { type: 'string' } },
  },
  get: {
    synopsis:
      'get <table> <row> [--column <family>[:<qualifier>]] [--versions <n>] [--values] [--json]',
    summary:
      'Prints the cells of one row (row/family:qualifier/timestamp/Type/vlen=N), then "1 row(s)", or "0 row(s)" when there is no such row.',
    options: [
      ...READ_OPTIONS,
      '--json                   print the row as one JSON object {row, cells: [...]}, or null when there is none',
    ],
    flags: READ_FLAGS,
  },
  delete: {
    synopsis: 'delete <table> <row> [--column <family>[:<qualifier>]] [--wait <duration>]',
    summary: 'Deletes the whole row, a family, or every version of a column.',
    options: [
      '--column <f>[:<q>]       only this family, or this column (default: the whole row)',
      ROW_WAIT,
    ],
    flags: { column: { type: 'string' }, wait: { type: 'string' } },
  },
  scan: {
    synopsis:
      'scan <table> [--start <row>] [--stop <row>] [--limit <n>] [--column <family>[:<qualifier>]] [--versions <n>] [--values] [--json]',
    summary:
      'Prints the cells of the rows in [start, stop), in byte order, then how many rows: "N row(s)".',
    options: [
      "--start <row>            the first row (default: the table's first)",
      '--stop <row>             the row to stop before (default: the end of the table)',
      '--limit <n>              at most this many rows (default: all)',
      ...READ_OPTIONS,
      '--json                   print each row as one JSON object {row, cells: [...]} a line',
    ],
    flags: {
      start: { type: 'string' },
      stop: { type: 'string' },
      limit: { type: 'string' },
      ...READ_FLAGS,
    },
  },
  incr: {
    synopsis: 'incr <table> <row> <family>:<qualifier> [<amount>] [--wait <duration>]',
    summary:
      'Adds <amount> (default 1, may be negative) to a 64-bit counter; prints the new value.',
    options: [ROW_WAIT],
    flags: { wait: { type: 'string' } },
  },
  lock: {
    synopsis: 'lock <table> <row> [--wait <duration>] [--grace <duration>] -- <command> [args...]',
    summary: "Holds the row's lock while <command> runs; exits with the command's exit code.",
    options: [
      '--wait <duration>        wait up to this long for the holder, e.g. 5s (default: fail at once)',
      '--grace <duration>       time between SIGTERM and SIGKILL when the command must stop (default: 5s)',
    ],
    flags: { wait: { type: 'string' }, grace: { type: 'string' } },
  },
  status: {
    synopsis: 'status [--json]',
    summary:
      "Summarizes the server's status: tables, sessions, held row locks and their owners, handlers.",
    options: [
      '--json                   print the status as the server gives it (default: a summary)',
    ],
    flags: { json: { type: 'boolean' } },
  },
};

function allFlags(common: OptionSpecs, subcommands: Record<string, SubcommandUsage>): OptionSpecs {
  return Object.assign({}, common, ...Object.values(subcommands).map((s) => s.flags));
}

const EXIT_CODES =
  'Exit codes: 0 ok, 1 locked or a runtime failure, 2 a bad command line (errors are one line: locksmith <command>: <message> (<CODE>)).';

export const USAGES: Record<CommandName, CommandUsage> = {
  serve: {
    synopsis:
      'serve [--data <dir>] [--host <address>] [--port <port>] [--handlers <n>] [--lease-period <duration>] [--session-lease <duration>] [--sessions durable|memory] [--token-file <path>] [--tls-cert <path> --tls-key <path>] [--http-port <port>] [--max-connections <n>] [--max-connections-per-address <n>] [--max-sessions <n>] [--max-sessions-per-connection <n>] [--max-buffered <size>] [--max-buffered-total <size>] [--shutdown-timeout <duration>] [--storage postgres://... [--storage-prefix <name>] [--fleet [--lease <duration>] [--renew <duration>] [--advertise <host:port>] [--ha etcd --etcd <url>[,<url>...] [--election <prefix>]]]] [--ha shared-file|database|lease-database|etcd [--db <url>] [--lock-table <name>] [--etcd <url>[,<url>...]] [--election <name>] [--etcd-user <name> --etcd-password-file <path>] [--etcd-ca <path> [--etcd-cert <path> --etcd-key <path>]] [--lease <duration>] [--renew <duration>] [--acquire-interval <duration>] [--fail-if-locked] [--advertise <host:port>]]',
    summary:
      'Serves the row store and its row locks over the network until SIGINT or SIGTERM (docs/server.md).',
    options: [
      '--data <dir>                the data directory, created if missing (default: ./locksmith-data)',
      '--host <address>            the address to listen on (default: 127.0.0.1, this machine only)',
      '--port <port>               the port, 0 for any free one (default: 7420)',
      '--handlers <n>              handlers for data calls; lock waits never hold one (default: 10)',
      '--lease-period <duration>   lease of a row lock and of a scanner (default: 60s)',
      '--session-lease <duration>  lease of a session that asks for none (default: 10s)',
      '--sessions durable|memory   durable: sessions and row locks are recorded and survive a restart or a failover (with --fleet: row locks survive a move of their region); memory: they end with the server (default: durable)',
      '--token-file <path>         clients must present the token in this file (default: none)',
      '--tls-cert <path>           PEM certificate: serve TLS only (with --tls-key)',
      '--tls-key <path>            PEM private key of the certificate',
      '--http-port <port>          serve the dashboard (GET /), GET /status and GET /metrics on this port (default: none)',
      '--max-connections <n>       sockets open at once; more are refused (default: 1024)',
      '--max-connections-per-address <n> sockets open at once from one address (default: 256)',
      '--max-sessions <n>          sessions at once, connected or within their lease (default: 10000)',
      '--max-sessions-per-connection <n>  sessions a connection carries besides its own (default: 1024)',
      '--max-buffered <size>       unsent answers per connection before it stops reading; one more frame and it is closed (default: 1MiB)',
      '--max-buffered-total <size> unsent answers of all connections; past it a connection over its own bound is closed (default: 256MiB)',
      '--shutdown-timeout <duration> how long a stop waits for calls in flight (default: 10s)',
      '--storage <url>             keep the tables, their data and the sessions in PostgreSQL (postgres://...) instead of under --data; servers on other machines then share them (default: files under --data)',
      '--storage-prefix <name>     the name prefix of the storage tables, one per group of servers (default: locksmith)',
      "--fleet                     serve a share of the --storage tables beside the other --fleet servers on it: regions spread evenly over the live servers, a dead server's taken over after --lease (default 5s), SIGTERM hands them over; row locks move with their region (--sessions durable); the members' leases are in the --storage database, or in etcd with --ha etcd",
      '--ha <locker>               master/slave with other servers on the same --data (or the same --storage): shared-file (a lock file in --data), database, lease-database or etcd (default: standalone)',
      '--db <url>                  the lock database: a SQLite path, sqlite:<path>, postgres://..., mysql://... (database lockers)',
      '--lock-table <name>         the lock table (default: ACTIVEMQ_LOCK)',
      "--etcd <url>[,<url>...]     the etcd members' client URLs, http://host:port or https://host:port (etcd only)",
      "--election <name>           the etcd election, as etcdctl elect <name> (default: locksmith/serve; one per data directory); with --fleet, the prefix of the fleet's keys (default: locksmith-fleet/<storage prefix>)",
      '--etcd-user <name>          etcd user (with --etcd-password-file; default: no authentication)',
      '--etcd-password-file <path> the etcd password: the first line of this file (default: none)',
      '--etcd-ca <path>            PEM CA of the etcd members: TLS to etcd (default: no TLS)',
      '--etcd-cert <path>          PEM client certificate for etcd, with --etcd-key (default: none)',
      '--etcd-key <path>           PEM private key of --etcd-cert (default: none)',
      '--lease <duration>          the lease (lease-database and etcd; whole seconds for etcd; default: 10s)',
      "--renew <duration>          keep-alive period (default: the locker's; lease-database and etcd: 1/4 of the lease)",
      '--acquire-interval <duration> retry period while a slave (default: 10s; not lease-database nor etcd)',
      '--fail-if-locked            exit 1 at once if another server is master (default: wait as a slave)',
      '--advertise <host:port>     where clients reach this server, told by slaves (default: --host:--port)',
    ],
    notes: [
      'Prints "locksmith serve: listening on locksmith://<host>:<port> ..." once it accepts clients.',
      'With --ha it then prints each change of role: "locksmith serve: slave: waiting for ..." and "locksmith serve: master (token <n>) on <host:port>".',
      EXIT_CODES,
    ],
    flags: {
      data: { type: 'string' },
      host: { type: 'string' },
      port: { type: 'string' },
      handlers: { type: 'string' },
      'lease-period': { type: 'string' },
      'session-lease': { type: 'string' },
      sessions: { type: 'string' },
      'token-file': { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      'http-port': { type: 'string' },
      'max-connections': { type: 'string' },
      'max-connections-per-address': { type: 'string' },
      'max-sessions': { type: 'string' },
      'max-sessions-per-connection': { type: 'string' },
      'max-buffered': { type: 'string' },
      'max-buffered-total': { type: 'string' },
      'shutdown-timeout': { type: 'string' },
      storage: { type: 'string' },
      'storage-prefix': { type: 'string' },
      fleet: { type: 'boolean' },
      ha: { type: 'string' },
      db: { type: 'string' },
      'lock-table': { type: 'string' },
      ...ETCD_FLAG_SPECS,
      lease: { type: 'string' },
      renew: { type: 'string' },
      'acquire-interval': { type: 'string' },
      'fail-if-locked': { type: 'boolean' },
      advertise: { type: 'string' },
    },
  },
  lock: {
    synopsis:
      'lock (<dir> [--name <lock>] [--factory native|simple] | --file <path>) [-s|--shared] [--wait <duration>] [-E|--conflict-exit-code <n>] -- <command> [args...]',
    summary:
      "Holds <dir>/<lock> (write.lock unless --name says), or the file --file names, while <command> runs; exits with the command's exit code.",
    options: [
      '--name <lock>            the lock file in <dir> (default: write.lock)',
      '--factory native|simple  the lock factory (default: native)',
      '--file <path>            lock this file instead of a directory (created if missing; its directory must exist)',
      '-s, --shared             a shared (read) lock: shared holders coexist, an exclusive one excludes them (default: exclusive; native only)',
      '--wait <duration>        wait up to this long for the holder, e.g. 2s, 500ms (default: fail at once)',
      '-E, --conflict-exit-code <n>  exit with <n> (0-255) when the lock is held elsewhere (default: 1)',
    ],
    notes: [
      'The directory is created if missing. The command gets LOCKSMITH_FENCING_TOKEN (<lock>.fence, or <path>.fence with --file, keeps the counter); a shared lock gets no token (the variable is unset).',
      "The native factory, --shared and --file take a kernel lock: on Linux an OFD lock (fcntl), which conflicts with Java/POSIX fcntl locks but not with flock(1)'s flock(2) locks; flock(2) on macOS/BSD.",
      "Exit codes: the command's own (128 + signal if killed, 127 not found, 126 cannot run); 1 locked, or the -E code; 1 a runtime failure; 2 a bad command line.",
    ],
    flags: {
      name: { type: 'string' },
      factory: { type: 'string' },
      file: { type: 'string' },
      shared: { type: 'boolean', short: 's' },
      wait: { type: 'string' },
      'conflict-exit-code': { type: 'string', short: 'E' },
    },
  },
  status: {
    synopsis: 'status <dir> [--name <lock>] [--factory native|simple] [--json]',
    summary: 'Tells whether the lock in <dir> is free, held (by whom) or cannot be taken.',
    options: [
      '--name <lock>            the lock file name (default: write.lock)',
      '--factory native|simple  the lock factory (default: native)',
      '--json                   print what was found as one JSON object (the exit code is the same)',
    ],
    notes: ['Exit codes: 0 free, 1 held, 2 a bad command line, 3 cannot lock.'],
    flags: { name: { type: 'string' }, factory: { type: 'string' }, json: { type: 'boolean' } },
  },
  elect: {
    synopsis:
      'elect --locker shared-file --dir <dir> | --locker database|lease-database --db <url> [--table <name>] | --locker etcd --etcd <url>[,<url>...] [--election <name>] [--etcd-user <name> --etcd-password-file <path>] [--etcd-ca <path> [--etcd-cert <path> --etcd-key <path>]] --id <name> [--lease <duration>] [--renew <duration>] [--acquire-interval <duration>] [--grace <duration>] [--fail-if-locked] -- <command> [args...]',
    summary: 'Runs <command> only while this process is master of a shared store.',
    options: [
      '--locker <kind>              shared-file, database, lease-database or etcd (required)',
      '--dir <dir>                  the store directory (shared-file only)',
      '--db <url>                   a SQLite path, sqlite:<path>, postgres://..., mysql://... (database lockers only)',
      '--table <name>               the lock table (default: ACTIVEMQ_LOCK)',
      "--etcd <url>[,<url>...]      the etcd members' client URLs, http://host:port or https://host:port (etcd only)",
      '--election <name>            the etcd election, as etcdctl elect <name> (default: locksmith/elect)',
      '--etcd-user <name>           etcd user (with --etcd-password-file; default: no authentication)',
      '--etcd-password-file <path>  the etcd password: the first line of this file (default: none)',
      '--etcd-ca <path>             PEM CA of the etcd members: TLS to etcd (default: no TLS)',
      '--etcd-cert <path>           PEM client certificate for etcd, with --etcd-key (default: none)',
      '--etcd-key <path>            PEM private key of --etcd-cert (default: none)',
      '--id <name>                  names this contender: the lease holder, the etcd proposal (required)',
      '--lease <duration>           the lease (lease-database and etcd; whole seconds for etcd; default: 10s)',
      '--renew <duration>           keep-alive period (default: 5s; lease-database and etcd: 1/4 of the lease)',
      '--acquire-interval <duration> retry period while another is master (default: 10s; not lease-database nor etcd)',
      '--grace <duration>           time between SIGTERM and SIGKILL for the command (default: 5s)',
      '--fail-if-locked             exit 1 at once if another process is master (default: wait)',
    ],
    notes: [EXIT_CODES],
    flags: {
      locker: { type: 'string' },
      dir: { type: 'string' },
      db: { type: 'string' },
      table: { type: 'string' },
      ...ETCD_FLAG_SPECS,
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
  rows: {
    synopsis:
      'rows <subcommand> [args...] [--server <url>] [--token-file <path>] [--tls-ca <path>] [--connect-timeout <duration>]',
    summary: 'The row store shell: tables, cells, counters and row locks on a locksmith server.',
    options: [
      '--server <url>           the server, locksmith://host:port, host:port or locksmiths:// for TLS (default: $LOCKSMITH_SERVER, else locksmith://127.0.0.1:7420)',
      "--token-file <path>      the server's token, the file's first line (default: $LOCKSMITH_TOKEN_FILE, else none)",
      "--tls-ca <path>          PEM certificate to trust for locksmiths:// (default: the system's)",
      '--connect-timeout <duration>  how long to keep trying to reach the server (default: 10s)',
    ],
    notes: [
      `Subcommands ("locksmith rows <subcommand> --help" for their options):\n${Object.values(
        ROWS_SUBCOMMANDS,
      )
        .map((s) => `  rows ${s.synopsis}`)
        .join('\n')}`,
      "Rows, qualifiers and values are UTF-8 text; \\xNN stands for the byte NN, as cells are printed (HBase's Bytes.toStringBinary), so a printed row can be typed back.",
      'There is no "rows unlock": a row lock belongs to the session that took it, and each "locksmith rows" has its own session, which ends (releasing its locks) when the command exits. "rows lock -- <command>" holds a lock for as long as <command> runs.',
      `${EXIT_CODES} rows lock: the command's own code, as "locksmith lock".`,
    ],
    flags: allFlags(ROWS_COMMON_FLAGS, ROWS_SUBCOMMANDS),
    subcommands: ROWS_SUBCOMMANDS,
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

/**
 * `locksmith <command> <subcommand> --help`, and the usage a subcommand's usage error names:
 * its synopsis, summary and options, then the command's common options.
 */
export function subcommandUsage(name: CommandName, subcommand: string): string {
  const u = USAGES[name];
  const sub = u.subcommands?.[subcommand];
  if (sub === undefined) return commandUsage(name);
  return [
    `Usage: locksmith ${name} ${sub.synopsis}`,
    '',
    sub.summary,
    '',
    ...[...sub.options, ...u.options].map((line) => `  ${line}`),
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
 * the command being run), and not the value of an option that takes one, by its long or its
 * short name (`--name -h`, `-E -h`): that value is read as `parseCommandLine` reads it, the
 * next argument unless it starts with `--`.
 */
export function wantsHelp(args: string[], flags: OptionSpecs): boolean {
  const end = args.indexOf('--');
  const before = end === -1 ? args : args.slice(0, end);
  for (let i = 0; i < before.length; i++) {
    const arg = before[i] as string;
    if (arg === '--help' || arg === '-h') return true;
    const spec = arg.startsWith('--')
      ? flags[arg.slice(2)]
      : /^-[^-]$/.test(arg)
        ? Object.values(flags).find((f) => f.short === arg.slice(1))
        : undefined;
    if (spec?.type === 'string' && !before[i + 1]?.startsWith('--')) i++;
  }
  return false;
}
