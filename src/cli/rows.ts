import { readFile } from 'node:fs/promises';
import {
  connect,
  type LocksmithClient,
  type TableDescription,
} from '../client/locksmith-client.js';
import { ConnectionLostError, LocksmithError, UnauthenticatedError } from '../core/errors.js';
import { toStringBinary } from '../rows/bytes.js';
import type { Cell } from '../rows/cell.js';
import { formatCell } from '../rows/cell.js';
import type { ColumnFamilySpec } from '../rows/column-family.js';
import { Delete, Increment, Put } from '../rows/mutation.js';
import { Get, type Query, Scan } from '../rows/query.js';
import type { Result } from '../rows/result.js';
import type { OwnerLabel } from '../server/lock-wait-status.js';
import type { ServerStatus } from '../server/server-status.js';
import {
  durationOption,
  parseCommandLine,
  pathArgument,
  readTokenFile,
  UsageError,
} from './args.js';
import { errorLine } from './error-line.js';
import { lockAction } from './rows-lock.js';
import { ROWS_COMMON_FLAGS, ROWS_SUBCOMMANDS, type SubcommandUsage } from './usage.js';

const DEFAULT_SERVER = 'locksmith://127.0.0.1:7420';
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** What a subcommand does once connected; its exit code. */
export type Action = (client: LocksmithClient) => Promise<number>;

export interface Parsed {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
  command: string[] | undefined;
  /** A usage error naming this subcommand's usage. */
  misuse(message: string): UsageError;
}

/**
 * `locksmith rows <subcommand>`: the row store shell. It only parses, calls the client
 * (src/client) and prints; every argument is checked before the server is reached. Each run
 * is one session, closed (releasing whatever it holds) before the command exits.
 */
export async function run(args: string[]): Promise<number> {
  const [name, ...rest] = args;
  const names = Object.keys(ROWS_SUBCOMMANDS).join(', ');
  if (name === 'unlock') {
    throw new UsageError(
      'there is no "rows unlock": a row lock belongs to the session that took it, and each "locksmith rows" has its own session, which releases its locks when it exits; use "rows lock <table> <row> -- <command>" to hold a lock while a command runs',
    );
  }
  const usage = name === undefined ? undefined : ROWS_SUBCOMMANDS[name];
  if (name === undefined || usage === undefined) {
    const what =
      name === undefined
        ? 'expected a subcommand,'
        : `unknown subcommand ${JSON.stringify(name)}: expected`;
    throw new UsageError(`${what} one of ${names}; run "locksmith rows --help"`);
  }
  const parsed = parse(name, usage, rest);
  const action = ACTIONS[name as keyof typeof ACTIONS](parsed);
  const client = await connectTo(parsed.values, name);
  try {
    return await action(client);
  } catch (err) {
    // The command line was checked before connecting: an argument the server refuses (a cell
    // that is no counter, a table name it does not take) is a runtime failure, exit 1.
    if (!(err instanceof LocksmithError) || err.code !== 'INVALID_ARGUMENT') throw err;
    process.stderr.write(`${errorLine('rows', err)}\n`);
    return 1;
  } finally {
    await client.close();
  }
}

// A negative number (`incr t r f:q -5`, `--ts -1`) is an argument, never an option: no
// option has a short form. It is hidden behind a NUL, which no argument can contain, while
// the command line is parsed.
const NEGATIVE = /^-\d+$/;
const HIDDEN = '\0';

function parse(name: string, usage: SubcommandUsage, args: string[]): Parsed {
  const misuse = (message: string) =>
    new UsageError(`${message}; usage: locksmith rows ${usage.synopsis}`);
  const end = args.indexOf('--');
  const hidden = args.map((a, i) => ((end === -1 || i < end) && NEGATIVE.test(a) ? HIDDEN + a : a));
  let parsed: ReturnType<typeof parseCommandLine>;
  try {
    parsed = parseCommandLine(hidden, { ...ROWS_COMMON_FLAGS, ...usage.flags });
  } catch (err) {
    // parseArgs' advice (put the argument after --) does not hold here: -- starts a command.
    const message = (err as Error).message.split('. To specify')[0] as string;
    const hint = /^Unknown option '-/.test(message)
      ? ' (an argument that starts with "-" is written \\x2D…, e.g. \\x2Dfoo)'
      : '';
    throw misuse(`${message}${hint}`);
  }
  const unhide = (v: string) => (v.startsWith(HIDDEN) ? v.slice(1) : v);
  const values = Object.fromEntries(
    Object.entries(parsed.values).map(([k, v]) => [k, typeof v === 'string' ? unhide(v) : v]),
  );
  if (name !== 'lock' && parsed.command !== undefined) {
    throw misuse(`rows ${name} runs no command: unexpected --`);
  }
  return { values, positionals: parsed.positionals.map(unhide), command: parsed.command, misuse };
}

/** Exactly `count` positionals (`optional` more may follow), named in the message. */
function positionals(p: Parsed, names: string[], optional = 0): string[] {
  const n = p.positionals.length;
  if (n < names.length || n > names.length + optional) {
    const got = n === 0 ? 'nothing' : p.positionals.map((a) => JSON.stringify(a)).join(' ');
    throw p.misuse(`expected ${names.join(' ')}, got ${got}`);
  }
  return p.positionals;
}

/**
 * A row, qualifier or value from the command line: UTF-8 text, with `\xNN` for the byte NN,
 * the way cells are printed (HBase's `Bytes.toBytesBinary`), so a printed row can be typed
 * back.
 */
function bytesArgument(text: string): Buffer {
  const parts: Buffer[] = [];
  let last = 0;
  for (const m of text.matchAll(/\\x([0-9A-Fa-f]{2})/g)) {
    parts.push(Buffer.from(text.slice(last, m.index), 'utf8'));
    parts.push(Buffer.from([Number.parseInt(m[1] as string, 16)]));
    last = m.index + 4;
  }
  parts.push(Buffer.from(text.slice(last), 'utf8'));
  return Buffer.concat(parts);
}

/** `family:qualifier` (the qualifier may be empty); `family` alone where `familyAlone`. */
function columnArgument(
  p: Parsed,
  text: string,
  familyAlone: boolean,
): { family: string; qualifier: Buffer | undefined } {
  const colon = text.indexOf(':');
  if (colon === -1) {
    if (familyAlone) return { family: text, qualifier: undefined };
    throw p.misuse(`column ${JSON.stringify(text)} is not <family>:<qualifier>`);
  }
  return { family: text.slice(0, colon), qualifier: bytesArgument(text.slice(colon + 1)) };
}

function integerArgument(p: Parsed, what: string, text: string, min: number): number {
  if (!/^-?\d{1,16}$/.test(text) || !Number.isSafeInteger(Number(text)) || Number(text) < min) {
    throw p.misuse(`${what} ${JSON.stringify(text)} must be a whole number, ${min} or more`);
  }
  return Number(text);
}

function str(p: Parsed, name: string): string | undefined {
  return p.values[name] as string | undefined;
}

function waitOption(p: Parsed): { waitMs?: number } {
  const text = str(p, 'wait');
  return text === undefined ? {} : { waitMs: durationOption('--wait', text) };
}

/** `--column` and `--versions` of a read. */
function shapeQuery<Q extends Query>(p: Parsed, query: Q): Q {
  const column = str(p, 'column');
  if (column !== undefined) {
    const { family, qualifier } = columnArgument(p, column, true);
    if (qualifier === undefined) query.addFamily(family);
    else query.addColumn(family, qualifier);
  }
  const versions = str(p, 'versions');
  if (versions !== undefined) query.setMaxVersions(integerArgument(p, '--versions', versions, 1));
  return query;
}

function cellLine(cell: Cell, values: boolean): string {
  const line = formatCell(cell);
  return values ? `${line} value=${toStringBinary(cell.value.toString('latin1'))}` : line;
}

function printResult(result: Result, values: boolean): void {
  for (const cell of result.cells) process.stdout.write(`${cellLine(cell, values)}\n`);
}

/**
 * A row as `--json` prints it: bytes (row, qualifier, value) as HBase's toStringBinary shows
 * them (printable ASCII as is, other bytes as \xNN), so the text is the shell's own notation.
 */
function rowJson(row: string, result: Result): object {
  return {
    row: toStringBinary(row),
    cells: result.cells.map((c) => ({
      family: c.family,
      qualifier: toStringBinary(c.qualifier),
      timestamp: c.timestamp,
      type: c.type,
      value: toStringBinary(c.value.toString('latin1')),
    })),
  };
}

/** HBase's shell ends a get or scan with this count: also what tells an empty answer. */
function rowCount(n: number): string {
  return `${n} row(s)\n`;
}

const json = (p: Parsed) => p.values.json === true;

function describeLine(d: TableDescription): string {
  const families = d.families.map((f) => `${f.name} (maxVersions ${f.maxVersions})`).join(', ');
  const stamps = d.timestampOnArrival ? 'on arrival' : 'per mutation';
  const regions =
    d.splits.length === 0
      ? ''
      : `; ${d.splits.length + 1} regions, split at ${d.splits.map((k) => toStringBinary(k.toString('latin1'))).join(', ')}`;
  return `table ${d.name}: families ${families}; timestamps ${stamps}${regions}\n`;
}

/** Each subcommand: checks its arguments (before connecting), then what it does. */
const ACTIONS = {
  'create-table': (p: Parsed): Action => {
    if (p.positionals.length < 2) {
      throw p.misuse('expected <table> and at least one <family>[:<maxVersions>]');
    }
    const [table, ...specs] = p.positionals as [string, ...string[]];
    const families: ColumnFamilySpec[] = specs.map((spec) => {
      const [name, versions, extra] = spec.split(':');
      if (extra !== undefined || name === undefined) {
        throw p.misuse(`family ${JSON.stringify(spec)} is not <family>[:<maxVersions>]`);
      }
      if (versions === undefined) return name;
      return { name, maxVersions: integerArgument(p, `maxVersions of ${name}`, versions, 1) };
    });
    const timestampOnArrival = p.values['timestamp-on-arrival'] === true;
    const splitList = p.values.splits;
    const splits =
      typeof splitList === 'string'
        ? splitList.split(',').map((key) => {
            if (key === '') throw p.misuse('--splits: an empty split key (write a comma as \\x2C)');
            return bytesArgument(key);
          })
        : [];
    return async (client) => {
      process.stdout.write(
        `created ${describeLine(await client.createTable(table, families, { timestampOnArrival, splits }))}`,
      );
      return 0;
    };
  },
  'list-tables': (p: Parsed): Action => {
    positionals(p, []);
    return async (client) => {
      const names = await client.listTables();
      if (json(p)) process.stdout.write(`${JSON.stringify(names)}\n`);
      else for (const name of names) process.stdout.write(`${name}\n`);
      return 0;
    };
  },
  'drop-table': (p: Parsed): Action => {
    const [table] = positionals(p, ['<table>']) as [string];
    return async (client) => {
      await client.dropTable(table);
      process.stdout.write(`dropped table ${table}\n`);
      return 0;
    };
  },
  split: (p: Parsed): Action => {
    const [table, key] = positionals(p, ['<table>', '<row>']) as [string, string];
    if (key === '') throw p.misuse('<row>: an empty split key');
    const row = bytesArgument(key);
    return async (client) => {
      process.stdout.write(`split ${describeLine(await client.splitTable(table, row))}`);
      return 0;
    };
  },
  describe: (p: Parsed): Action => {
    const [table] = positionals(p, ['<table>']) as [string];
    return async (client) => {
      const description = await client.describeTable(table);
      process.stdout.write(
        json(p)
          ? `${JSON.stringify({ ...description, splits: description.splits.map((k) => toStringBinary(k.toString('latin1'))) })}\n`
          : describeLine(description),
      );
      return 0;
    };
  },
  put: (p: Parsed): Action => {
    const [table, row, column, value] = positionals(p, [
      '<table>',
      '<row>',
      '<family>:<qualifier>',
      '<value>',
    ]) as [string, string, string, string];
    const { family, qualifier } = columnArgument(p, column, false);
    const ts = str(p, 'ts');
    const put = new Put(bytesArgument(row)).add(
      family,
      qualifier as Buffer,
      bytesArgument(value),
      ts === undefined ? undefined : integerArgument(p, '--ts', ts, 0),
    );
    const options = waitOption(p);
    return async (client) => {
      await client.table(table).put(put, options);
      return 0;
    };
  },
  get: (p: Parsed): Action => {
    const [table, row] = positionals(p, ['<table>', '<row>']) as [string, string];
    const get = shapeQuery(p, new Get(bytesArgument(row)));
    const values = p.values.values === true;
    return async (client) => {
      const result = await client.table(table).get(get);
      if (json(p)) {
        process.stdout.write(
          `${JSON.stringify(result.isEmpty ? null : rowJson(get.row, result))}\n`,
        );
      } else {
        printResult(result, values);
        process.stdout.write(rowCount(result.isEmpty ? 0 : 1));
      }
      return 0;
    };
  },
  delete: (p: Parsed): Action => {
    const [table, row] = positionals(p, ['<table>', '<row>']) as [string, string];
    const del = new Delete(bytesArgument(row));
    const column = str(p, 'column');
    if (column !== undefined) {
      const { family, qualifier } = columnArgument(p, column, true);
      if (qualifier === undefined) del.deleteFamily(family);
      else del.deleteColumns(family, qualifier);
    }
    const options = waitOption(p);
    return async (client) => {
      await client.table(table).delete(del, options);
      return 0;
    };
  },
  scan: (p: Parsed): Action => {
    const [table] = positionals(p, ['<table>']) as [string];
    const start = str(p, 'start');
    const stop = str(p, 'stop');
    const scan = shapeQuery(
      p,
      new Scan({
        ...(start === undefined ? {} : { startRow: bytesArgument(start) }),
        ...(stop === undefined ? {} : { stopRow: bytesArgument(stop) }),
      }),
    );
    const limitText = str(p, 'limit');
    const limit =
      limitText === undefined
        ? Number.POSITIVE_INFINITY
        : integerArgument(p, '--limit', limitText, 1);
    const values = p.values.values === true;
    return async (client) => {
      let rows = 0;
      for await (const result of client.table(table).scan(scan)) {
        if (json(p)) {
          process.stdout.write(
            `${JSON.stringify(rowJson(result.row.toString('latin1'), result))}\n`,
          );
        } else printResult(result, values);
        if (++rows >= limit) break;
      }
      if (!json(p)) process.stdout.write(rowCount(rows));
      return 0;
    };
  },
  incr: (p: Parsed): Action => {
    const [table, row, column, amountText] = positionals(
      p,
      ['<table>', '<row>', '<family>:<qualifier>'],
      1,
    ) as [string, string, string, string | undefined];
    const { family, qualifier } = columnArgument(p, column, false);
    if (amountText !== undefined && !/^-?\d{1,19}$/.test(amountText)) {
      throw p.misuse(`amount ${JSON.stringify(amountText)} must be a whole number`);
    }
    const inc = new Increment(bytesArgument(row)).addColumn(
      family,
      qualifier as Buffer,
      amountText === undefined ? 1n : BigInt(amountText),
    );
    const options = waitOption(p);
    return async (client) => {
      const cell = (await client.table(table).increment(inc, options)).cells[0];
      process.stdout.write(`${cell?.value.readBigInt64BE(0) ?? ''}\n`);
      return 0;
    };
  },
  lock: (p: Parsed): Action => {
    const [table, row] = positionals(p, ['<table>', '<row>']) as [string, string];
    return lockAction(p, table, bytesArgument(row));
  },
  status: (p: Parsed): Action => {
    positionals(p, []);
    const json = p.values.json === true;
    return async (client) => {
      const status = await client.status();
      process.stdout.write(json ? `${JSON.stringify(status, null, 2)}\n` : statusSummary(status));
      return 0;
    };
  },
} satisfies Record<keyof typeof ROWS_SUBCOMMANDS, (p: Parsed) => Action>;

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

/** Connects with the common options; an unreachable server is one line naming it. */
async function connectTo(
  values: Record<string, string | boolean | undefined>,
  subcommand: string,
): Promise<LocksmithClient> {
  // A flag wins over the environment, which wins over the default (as ETCDCTL_ENDPOINTS).
  const url =
    (values.server as string | undefined) ??
    nonEmpty(process.env.LOCKSMITH_SERVER) ??
    DEFAULT_SERVER;
  const tokenFlag = values['token-file'] as string | undefined;
  const tokenPath = tokenFlag ?? nonEmpty(process.env.LOCKSMITH_TOKEN_FILE);
  const tokenWhat = tokenFlag === undefined ? 'LOCKSMITH_TOKEN_FILE' : '--token-file';
  const caPath = values['tls-ca'] as string | undefined;
  const timeout = values['connect-timeout'] as string | undefined;
  const connectTimeoutMs =
    timeout === undefined
      ? DEFAULT_CONNECT_TIMEOUT_MS
      : durationOption('--connect-timeout', timeout);
  const token =
    tokenPath === undefined
      ? undefined
      : await readTokenFile(pathArgument(tokenWhat, tokenPath), tokenWhat);
  const ca = caPath === undefined ? undefined : await readFile(pathArgument('--tls-ca', caPath));
  try {
    return await connect(url, {
      token,
      ...(ca === undefined ? {} : { tls: { ca } }),
      connectTimeoutMs,
      name: `locksmith rows ${subcommand} (pid ${process.pid})`,
    });
  } catch (err) {
    if (err instanceof UnauthenticatedError) {
      throw new UnauthenticatedError(
        token === undefined
          ? `the server at ${url} requires a token: pass --token-file <file> (its first line is the token) or set LOCKSMITH_TOKEN_FILE`
          : `the server at ${url} refused the token in ${tokenPath} (${tokenWhat}): it is not this server's token`,
        { cause: err },
      );
    }
    if (!(err instanceof ConnectionLostError)) throw err;
    throw new ConnectionLostError(`cannot reach the server at ${url}: ${err.message}`, {
      cause: err.cause,
    });
  }
}

/**
 * How many in all, and how many of them the status lists when it lists only some (the server
 * caps its lists and counts all beside them; a server without the count lists all).
 */
function counted(all: unknown, listed: number, order: string): string {
  return typeof all === 'number' && all > listed
    ? `${all} (${listed} listed, ${order})`
    : `${listed}`;
}

/** A waiter or holder as the status names it: a session label and its client, or the caller. */
function ownerLine(owner: OwnerLabel | null): string {
  if (owner === null) return 'an anonymous call';
  return owner.session === null ? owner.client : `session ${owner.session} (${owner.client})`;
}

/** The server's status in a few lines: tables, sessions, held locks and owners, handlers. */
function statusSummary(status: ServerStatus): string {
  const { tables, sessions, locks, handlers } = status;
  const lines = [
    `server ${status.server} on ${status.listening}, up ${Math.round(status.uptimeMs / 1000)}s, ${status.connections} connection(s)`,
    `tables: ${tables.length}`,
    ...tables.map(
      (t) =>
        `  ${t.name}  families ${t.families.join(',')}  ${t.rows} row(s)${(t.regions ?? 1) > 1 ? `  ${t.regions} regions` : ''}`,
    ),
    `sessions: ${counted(status.sessionsOpen, sessions.length, 'most locks first')}`,
    ...sessions.map(
      (s) =>
        `  ${s.session}  ${s.client ?? 'unnamed'}  ${s.connected ? 'connected' : 'disconnected'}  ${s.locks} lock(s), ${s.waiting} waiting, ${s.scanners} scanner(s)`,
    ),
    `locks held: ${counted(status.locksHeld, locks.length, 'least lease left first')}`,
    ...locks.map(
      (l) =>
        `  ${l.table} ${l.row}  token ${l.token}  by session ${l.session} (${l.client ?? 'unnamed'})  ${l.renews ? 'renews with its session' : 'lease'}, ${Math.ceil(l.leaseRemainingMs / 1000)}s left`,
    ),
    `waiting for a row: ${counted(status.waiting, status.waits.length, 'row by row, first come first')}`,
    ...status.waits.map(
      (w) =>
        `  ${w.table} ${w.row}  ${w.explicit ? 'lockRow' : 'mutation'} by ${ownerLine(w.waiter)}  held by ${w.holder === null ? 'a mutation' : ownerLine(w.holder)}  for ${(w.waitedMs / 1000).toFixed(1)}s`,
    ),
    `handlers: ${Object.entries(handlers)
      .map(
        ([lane, l]) => `${lane} ${l.busy}/${l.size} busy, ${l.queued} queued, ${l.parked} parked`,
      )
      .join('; ')}`,
    ...fleetLines(status),
  ];
  return `${lines.join('\n')}\n`;
}

/** A fleet member's view of the fleet: its servers and their regions, its last moves. */
function fleetLines(status: ServerStatus): string[] {
  const fleet = status.fleet;
  if (fleet === undefined) return [];
  return [
    `fleet: this server ${fleet.address} (member ${fleet.id ?? 'joining'}, lease ${fleet.leaseMs / 1000}s); ${fleet.regions} region(s), ${fleet.unserved} served by nobody now`,
    ...fleet.members.map(
      (m) =>
        `  ${m.address}  ${m.live ? (m.leaving ? 'leaving' : 'live') : 'gone'}  ${m.regions} region(s)`,
    ),
    ...fleet.moves
      .slice(-5)
      .map((m) => `  moved ${m.region}: ${m.change} ${new Date(m.at).toISOString()} (${m.why})`),
  ];
}
