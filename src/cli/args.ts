import { parseArgs } from 'node:util';
import { InvalidArgumentError } from '../core/errors.js';

/** Thrown for a bad command line; the dispatcher prints it with the usage and exits 2. */
export class UsageError extends InvalidArgumentError {}

/**
 * Splits `args` at the first `--` and parses the options before it. `command` is everything
 * after `--` (undefined when there is no `--`).
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
  try {
    const { values, positionals } = parseArgs({
      args: before,
      options,
      allowPositionals: true,
      strict: true,
    });
    return { values: values as Record<string, string | boolean | undefined>, positionals, command };
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}
