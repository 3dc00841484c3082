import type { Clock } from './clock.js';
import { systemClock } from './clock.js';
import { InvalidArgumentError } from './errors.js';

/**
 * Checks for the options every public entry point takes. Each runs before the entry point
 * changes any state, so a refused call leaves nothing half-done, and each fails with an
 * {@link InvalidArgumentError} (`INVALID_ARGUMENT`) naming the option and what it got.
 */

/** `undefined` becomes `{}`; anything but a plain object is refused. */
export function checkOptionsObject<T extends object>(options: T | undefined, what: string): T {
  if (options === undefined) return {} as T;
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidArgumentError(`${what} must be an object, got ${describeValue(options)}`);
  }
  return options;
}

/** The `clock` option: the system clock by default, else one with `monotonic`, `wall`, `sleep`. */
export function checkClock(clock: Clock | undefined, what = 'clock'): Clock {
  if (clock === undefined) return systemClock;
  if (
    typeof clock !== 'object' ||
    clock === null ||
    typeof clock.sleep !== 'function' ||
    typeof clock.monotonic !== 'function' ||
    typeof clock.wall !== 'function' ||
    (clock.setTimer !== undefined && typeof clock.setTimer !== 'function')
  ) {
    throw new InvalidArgumentError(
      `${what} must implement monotonic(), wall() and sleep(), got ${describeValue(clock)}`,
    );
  }
  return clock;
}

/**
 * An optional `signal`: `undefined` or a real `AbortSignal`. An `AbortController` passed by
 * mistake (a common slip) is named in the message.
 */
export function checkSignal(signal: unknown, what = 'signal'): AbortSignal | undefined {
  if (signal === undefined || signal instanceof AbortSignal) return signal;
  const hint =
    signal instanceof AbortController ? ' (an AbortController was passed: pass its .signal)' : '';
  throw new InvalidArgumentError(
    `${what} must be an AbortSignal, got ${describeValue(signal)}${hint}`,
  );
}

/** A boolean option, or an {@link InvalidArgumentError} naming it. */
export function checkBoolean(value: unknown, what: string): boolean {
  if (typeof value !== 'boolean') {
    throw new InvalidArgumentError(`${what} must be a boolean, got ${describeValue(value)}`);
  }
  return value;
}

/**
 * Whether `value` is an object with a function under each of `names`: the duck-typed check
 * for an injected collaborator (a logger, a service, a locker). The caller words the refusal,
 * since only it knows what the object is for.
 */
export function hasMethods(value: unknown, ...names: string[]): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return names.every((name) => typeof v[name] === 'function');
}

/** An optional callback: `undefined` or a function. */
export function checkCallback<F extends (...args: never[]) => unknown>(
  value: F | undefined,
  what: string,
): F | undefined {
  if (value === undefined || typeof value === 'function') return value;
  throw new InvalidArgumentError(`${what} must be a function, got ${describeValue(value)}`);
}

/**
 * A fencing token: a safe integer >= 0. NaN, infinities, fractions, strings and objects are
 * refused, so no malformed value can ever compare as "newer" or reset a floor.
 */
export function checkToken(token: unknown, what = 'fencing token'): number {
  if (typeof token !== 'number' || !Number.isSafeInteger(token) || token < 0) {
    throw new InvalidArgumentError(
      `${what} must be a safe integer >= 0, got ${describeValue(token)}`,
    );
  }
  return token;
}

/** A short, safe rendering of any value for an error message (never throws). */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
    case 'number':
    case 'boolean':
    case 'bigint':
    case 'undefined':
    case 'symbol':
      return String(value);
    case 'function':
      return 'a function';
    default: {
      // A value from the wire may be a map with a `constructor` (or its `name`) of any type:
      // only a string name is shown, and nothing of the value is converted to a primitive.
      let name: unknown;
      try {
        name = (value as { constructor?: { name?: unknown } }).constructor?.name;
      } catch {}
      if (Array.isArray(value)) return 'an array';
      return typeof name === 'string' && name !== '' && name.length <= 60
        ? `an object (${name})`
        : 'an object';
    }
  }
}
