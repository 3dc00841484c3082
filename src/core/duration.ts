import { InvalidArgumentError } from './errors.js';
import { describeValue } from './options.js';

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * The longest duration locksmith accepts anywhere: 2^31 - 1 ms (about 24.8 days), the longest
 * single timer Node.js can set. Refusing longer ones up front (rather than letting a timer
 * overflow and fire at once) means no lease, interval or timeout is ever silently wrong.
 */
export const MAX_DURATION_MS = 2_147_483_647;

/**
 * Parses a duration written with its unit: `500ms`, `2s`, `1.5m`, `1h`. A number passed as a
 * number is milliseconds; a string without a unit (`"2"`) is refused, since a reader cannot
 * tell whether it meant 2 ms or 2 s. Negative, malformed or too long values (see
 * {@link MAX_DURATION_MS}) are an {@link InvalidArgumentError} naming `what`.
 */
export function parseDuration(value: string | number, what = 'duration'): number {
  if (typeof value === 'number') return checkDuration(value, what);
  if (typeof value !== 'string') {
    throw new InvalidArgumentError(
      `Invalid ${what}: expected a string like 2s, got ${typeof value}`,
    );
  }
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$/.exec(value);
  if (match === null) {
    const bare = /^\s*\d+(?:\.\d+)?\s*$/.test(value);
    throw new InvalidArgumentError(
      bare
        ? `Invalid ${what} ${JSON.stringify(value)}: a duration needs a unit, like ${value.trim()}s or ${value.trim()}ms`
        : `Invalid ${what} ${JSON.stringify(value)}: expected a number with a unit (ms, s, m, h), like 500ms, 2s, 1m`,
    );
  }
  return checkDuration(Number(match[1]) * (UNITS[match[2] as string] ?? 1), what);
}

/** A duration that must not be 0: {@link checkDuration}, then > 0. */
export function checkPositiveDuration(value: number, what: string): number {
  if (checkDuration(value, what) === 0) {
    throw new InvalidArgumentError(`Invalid ${what} 0: must be > 0`);
  }
  return value;
}

/**
 * A number of milliseconds from 0 to {@link MAX_DURATION_MS}, or an
 * {@link InvalidArgumentError} that names `what` and the bound it broke. The library takes
 * durations as numbers only (every option ending in `Ms`); text with a unit (`'2s'`) is the
 * command line's, and the message says so, with the number to write instead.
 */
export function checkDuration(ms: number, what = 'duration'): number {
  return checkMilliseconds(ms, what, false);
}

/**
 * A wait limit: {@link checkDuration}, or `Infinity` for a wait without limit. One rule for
 * every wait of the library (`timeoutMs`, `waitMs`, `rowLockWaitMs`).
 */
export function checkWaitDuration(ms: unknown, what = 'wait'): number {
  return ms === Number.POSITIVE_INFINITY ? ms : checkMilliseconds(ms, what, true);
}

function checkMilliseconds(ms: unknown, what: string, orInfinity: boolean): number {
  const range = `a number of milliseconds from 0 to ${MAX_DURATION_MS}${orInfinity ? ', or Infinity to wait without limit' : ''}`;
  if (typeof ms === 'string') {
    let hint = '';
    try {
      hint = `: write ${parseDuration(ms)} for ${ms.trim()}`;
    } catch {}
    throw new InvalidArgumentError(
      `Invalid ${what} ${JSON.stringify(ms)}: must be ${range}, not text (text durations with a unit are for the command line${hint})`,
    );
  }
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    throw new InvalidArgumentError(`Invalid ${what} ${describeValue(ms)}: must be ${range}`);
  }
  if (ms > MAX_DURATION_MS) {
    throw new InvalidArgumentError(
      `Invalid ${what} ${ms} ms: the longest duration allowed is ${MAX_DURATION_MS} ms (about 24.8 days)${orInfinity ? '; Infinity waits without limit' : ''}`,
    );
  }
  return ms;
}
