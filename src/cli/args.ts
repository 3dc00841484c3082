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
 * `--option`) is a usage error naming the option.
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
    const spec = arg.startsWith('--') ? options[arg.slice(2)] : undefined;
    if (spec?.type !== 'string') {
      joined.push(arg);
      continue;
    }
    const value = before[i + 1];
    if (value === undefined || value.startsWith('--')) {
      throw new UsageError(`${arg} needs a value`);
    }
    joined.push(`${arg}=${value}`);
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
export async function readTokenFile(path: string): Promise<string> {
  const token = (await readFile(path, 'utf8')).split('\n')[0]?.trim() ?? '';
  if (token.length === 0) throw new UsageError(`--token-file ${path} is empty`);
  return token;
}
