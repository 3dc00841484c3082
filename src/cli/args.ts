import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { parseDuration } from '../core/duration.js';
import { InvalidArgumentError } from '../core/errors.js';

/** Thrown for a bad command line; the dispatcher prints it on one line and exits 2. */
export class UsageError extends InvalidArgumentError {}

/**
 * Splits `args` at the first `--` and parses the options before it. `command` is everything
 * after `--` (undefined when there is no `--`).
 *
 * An option that takes a value accepts one that starts with a single `-` (`--wait -1s`,
 * `--name -x`), so that the option's own check names the mistake; Node's parser would call it
 * "ambiguous" and suggest `--wait=-1s`. A missing value (`--wait` last, or followed by another
 * `--option`) is a usage error naming the option. An option's `short` form (`-E 75`, `-s`) is
 * read as its long one; it stands alone (no `-E75`, no `-sE`).
 */
export function parseCommandLine<
  T extends Record<string, { type: 'string' | 'boolean'; short?: string }>,
>(
  args: string[],
  options: T,
): {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
  command: string[] | undefined;
} {
  const split = args.indexOf('--');
  const before = split === -1 ? args : args.slice(0, split);
  const command = split === -1 ? undefined : args.slice(split + 1);
  const joined: string[] = [];
  for (let i = 0; i < before.length; i++) {
    const arg = before[i] as string;
    checkKnown(arg, options);
    const long = arg.startsWith('--')
      ? arg
      : /^-[^-]$/.test(arg)
        ? longOf(arg.slice(1), options)
        : undefined;
    const spec = long === undefined ? undefined : options[long.slice(2)];
    if (spec?.type !== 'string') {
      joined.push(spec === undefined ? arg : (long as string));
      continue;
    }
    const value = before[i + 1];
    if (value === undefined || value.startsWith('--')) {
      throw new UsageError(`${arg} needs a value`);
    }
    joined.push(`${long}=${value}`);
    i++;
  }
  try {
    const { values, positionals } = parseArgs({
      args: joined,
      options,
      allowPositionals: true,
      strict: true,
    });
    return { values: values as Record<string, string | boolean | undefined>, positionals, command };
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/**
 * Refuses an option the command does not have, naming the nearest one it has: Node's own
 * message quotes it oddly and advises `--` before it, which is wrong for commands whose `--`
 * starts the command to run.
 */
function checkKnown(arg: string, options: Record<string, unknown>): void {
  if (!arg.startsWith('-') || arg === '-' || /^-\d/.test(arg)) return;
  const name = arg.startsWith('--') ? (arg.slice(2).split('=')[0] as string) : arg.slice(1);
  if (arg.startsWith('--') ? Object.hasOwn(options, name) : isShort(name, options)) return;
  // kubectl's and etcdctl's `-o json` / `--output json`: here it is `--json`.
  const near =
    (name === 'o' || name === 'output') && Object.hasOwn(options, 'json')
      ? 'json'
      : nearest(name.replace(/^-+/, ''), Object.keys(options));
  throw new UsageError(
    `unknown option ${arg.split('=')[0]}${near === undefined ? '' : ` (did you mean --${near}?)`}`,
  );
}

function isShort(name: string, options: Record<string, unknown>): boolean {
  return Object.values(options).some((o) => (o as { short?: string }).short === name);
}

/** `--<long>` for the option whose short form is `short`, if one is. */
function longOf(short: string, options: Record<string, { short?: string }>): string | undefined {
  const long = Object.keys(options).find((k) => options[k]?.short === short);
  return long === undefined ? undefined : `--${long}`;
}

/** The option name closest to `name` by edit distance, if close enough to be a typo. */
export function nearest(name: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(1, Math.floor(name.length / 3)) + 1;
  for (const c of candidates) {
    const d = editDistance(name, c);
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}

/** Levenshtein distance, with a transposition counted as one edit (`wiat` → `wait`). */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i] as number[];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min((d[i - 1] as number[])[j] as number, row[j - 1] as number) + 1;
      v = Math.min(v, ((d[i - 1] as number[])[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        v = Math.min(v, ((d[i - 2] as number[])[j - 2] as number) + 1);
      }
      row[j] = v;
    }
  }
  return (d[a.length] as number[])[b.length] as number;
}

/**
 * The value of a duration option, in ms: a number with its unit (`500ms`, `2s`, `1m`, `1h`).
 * A bare number is refused, since `--wait 2` could mean 2 ms or 2 s; the message shows the
 * option written out with a unit. Negative, malformed and too long values are refused too.
 */
export function durationOption(name: string, text: string): number {
  const trimmed = text.trim();
  if (trimmed.startsWith('-')) {
    throw new UsageError(
      `${name} ${JSON.stringify(text)} is negative: a duration is 0 or more, like ${name} 2s`,
    );
  }
  if (/^\d+(?:\.\d+)?$/.test(trimmed)) {
    throw new UsageError(
      `${name} ${JSON.stringify(text)} has no unit: write ${name} ${trimmed}s for seconds or ${name} ${trimmed}ms for milliseconds`,
    );
  }
  if (!/^\d+(?:\.\d+)?\s*(?:ms|s|m|h)$/.test(trimmed)) {
    throw new UsageError(
      `${name} ${JSON.stringify(text)} is not a duration: write a number and a unit (ms, s, m, h), like ${name} 2s`,
    );
  }
  try {
    return parseDuration(text, name);
  } catch (err) {
    // Well formed but out of range: core's message names the limit.
    throw new UsageError((err as Error).message);
  }
}

/** A path given on the command line: not empty, no NUL. Returned as given. */
export function pathArgument(what: string, text: string | undefined): string {
  if (text === undefined || text.length === 0) throw new UsageError(`${what} is empty`);
  if (text.includes('\0')) throw new UsageError(`${what} ${JSON.stringify(text)} contains NUL`);
  return text;
}

/**
 * The token in `path` (`--token-file`): its first line, trimmed; an empty one is a usage error.
 * Shared by `serve` and `rows` so both read the same token from the same file.
 */
export async function readTokenFile(path: string, what = '--token-file'): Promise<string> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'no such file'
        : code === 'EACCES'
          ? 'permission denied'
          : code === 'EISDIR'
            ? 'it is a directory'
            : (code ?? (err as Error).message);
    throw new UsageError(`${what} ${path}: cannot read the token file (${why})`);
  }
  const token = text.split('\n')[0]?.trim() ?? '';
  if (token.length === 0) throw new UsageError(`${what} ${path} is empty`);
  return token;
}
