import { InvalidArgumentError } from './errors.js';

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * Parses `500ms`, `2s`, `1.5m`, `1h` or a bare number of milliseconds. Negative, non-finite
 * or malformed values are an {@link InvalidArgumentError} naming `what`.
 */
export function parseDuration(value: string | number, what = 'duration'): number {
  if (typeof value === 'number') return checkDuration(value, what);
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(value);
  if (match === null) {
    throw new InvalidArgumentError(
      `Invalid ${what} ${JSON.stringify(value)}: expected a number with a unit, like 500ms, 2s, 1m`,
    );
  }
  return checkDuration(Number(match[1]) * (UNITS[match[2] ?? 'ms'] ?? 1), what);
}

/** A non-negative finite number of milliseconds, or an {@link InvalidArgumentError}. */
export function checkDuration(ms: number, what = 'duration'): number {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    throw new InvalidArgumentError(
      `Invalid ${what} ${String(ms)}: must be a finite number of milliseconds >= 0`,
    );
  }
  return ms;
}
