import type { Clock } from './clock.js';
import { checkDuration, checkWaitDuration, MAX_DURATION_MS } from './duration.js';
import { InvalidArgumentError } from './errors.js';
import { checkBoolean, checkCallback, checkClock, checkSignal, describeValue } from './options.js';

/**
 * Options declared once. An entry point lists its options in an {@link OptionSpec}: for each
 * name, how a value is checked, its domain in words, its default and any alias (ActiveMQ's
 * names, kept at the edge). {@link readOptions} then checks a caller's object against it:
 * unknown names are refused (a misspelt `leaseMS` would otherwise run with the default), and
 * every value is checked before the entry point changes any state. The same declaration
 * words the messages and the option tables of the docs ({@link describeOptions}).
 */

/** How one option is checked. `check` never sees `undefined`: absent means the default. */
export interface OptionRule<T> {
  /** The domain in words, e.g. "a duration in ms, >= 1000". */
  readonly domain: string;
  /** Other names accepted for the same option; giving two of them at once is refused. */
  readonly aliases?: readonly string[];
  /** The value when the option is absent; a rule without one reads as `undefined`. */
  readonly default?: T;
  /** The default in words where it is not a constant ("lease / 4"). */
  readonly defaultText?: string;
  check(value: unknown, label: string): T;
}

/** A rule whose option always has a value. */
export type DefaultedRule<T> = OptionRule<T> & { readonly default: T };

// biome-ignore lint/suspicious/noExplicitAny: a spec holds rules of any value type.
export type OptionSpec = Readonly<Record<string, OptionRule<any>>>;

/**
 * The spec of an options interface `O`: the compiler insists on a rule for every option `O`
 * declares (`satisfies SpecOf<O>`), so no option is accepted by the type and refused at run
 * time, or the other way round.
 */
export type SpecOf<O> = { readonly [K in keyof Required<O>]: OptionRule<unknown> };

/** What {@link readOptions} returns: each option checked, or its default, or `undefined`. */
export type OptionValues<S extends OptionSpec> = {
  -readonly [K in keyof S]: S[K] extends { readonly default: infer D }
    ? D
    : S[K] extends OptionRule<infer T>
      ? T | undefined
      : never;
};

/**
 * Checks `options` against `spec`. `what` names the options in messages
 * (`"LeaseDatabaseLocker options"`), and `labelPrefix` goes before each option's name in the
 * message about its value (`"get option "` gives "get option waitMs must be ..."). Refuses,
 * with an {@link InvalidArgumentError}: a value that is not a plain object, an unknown name
 * (the message lists the known ones), an option given under two of its names, and a value
 * outside its rule's domain. Reads each option once, so a getter cannot answer differently
 * later. Symbol keys are not options: they are left for the caller.
 */
export function readOptions<S extends OptionSpec>(
  options: unknown,
  what: string,
  spec: S,
  labelPrefix = '',
): OptionValues<S> {
  if (options === undefined) options = {};
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidArgumentError(`${what} must be an object, got ${describeValue(options)}`);
  }
  const given = options as Record<string, unknown>;
  const names = namesOf(spec);
  for (const key of Object.keys(given)) {
    if (!names.has(key)) {
      throw new InvalidArgumentError(
        `${what}: unknown option ${JSON.stringify(key)} (known: ${[...names.keys()].join(', ')})`,
      );
    }
  }
  const out: Record<string, unknown> = {};
  for (const [name, rule] of Object.entries(spec)) {
    let label = name;
    let value = given[name];
    for (const alias of rule.aliases ?? []) {
      const aliased = given[alias];
      if (aliased === undefined) continue;
      if (value !== undefined) {
        throw new InvalidArgumentError(
          `${what}: ${label} and ${alias} name the same option; give one of them`,
        );
      }
      value = aliased;
      label = alias;
    }
    out[name] = value === undefined ? rule.default : rule.check(value, `${labelPrefix}${label}`);
  }
  return out as OptionValues<S>;
}

const namesCache = new WeakMap<OptionSpec, Map<string, string>>();

/** Every accepted name (aliases included) mapped to the option it names. */
function namesOf(spec: OptionSpec): Map<string, string> {
  let names = namesCache.get(spec);
  if (names === undefined) {
    names = new Map();
    for (const [name, rule] of Object.entries(spec)) {
      names.set(name, name);
      for (const alias of rule.aliases ?? []) names.set(alias, name);
    }
    namesCache.set(spec, names);
  }
  return names;
}

/** One row per option, for a docs table: name (aliases), domain, default. */
export function describeOptions(
  spec: OptionSpec,
): { name: string; aliases: readonly string[]; domain: string; default: string }[] {
  return Object.entries(spec).map(([name, rule]) => ({
    name,
    aliases: rule.aliases ?? [],
    domain: rule.domain,
    default:
      rule.defaultText ??
      (rule.default === undefined ? '(none)' : describeValue(rule.default as unknown)),
  }));
}

/** The same rule with a default (and, where it is not a constant, the default in words). */
export function withDefault<T>(
  rule: OptionRule<T>,
  value: T,
  defaultText?: string,
): DefaultedRule<T> {
  return defaultText === undefined
    ? { ...rule, default: value }
    : { ...rule, default: value, defaultText };
}

/** The same rule, also accepted under `aliases`. */
export function withAliases<T, R extends OptionRule<T>>(rule: R, ...aliases: string[]): R {
  return { ...rule, aliases };
}

/** A duration in ms within core's bounds (so no timer overflows), at least `min`. */
export function durationOption(min = 0): OptionRule<number> {
  return {
    domain: min === 0 ? 'a duration in ms' : `a duration in ms, >= ${min}`,
    check(value, label) {
      const ms = checkDuration(value as number, label);
      if (ms < min) {
        throw new InvalidArgumentError(`Invalid ${label} ${ms}: must be >= ${min} ms`);
      }
      return ms;
    },
  };
}

/** A duration in ms > 0. */
export function positiveDurationOption(): OptionRule<number> {
  return {
    domain: 'a duration in ms, > 0',
    check(value, label) {
      if (checkDuration(value as number, label) === 0) {
        throw new InvalidArgumentError(`Invalid ${label} 0: must be > 0`);
      }
      return value as number;
    },
  };
}

/** A duration in ms, or `Infinity` for "no limit". */
export function durationOrInfinityOption(): OptionRule<number> {
  return {
    domain: `a duration in ms (at most ${MAX_DURATION_MS}) or Infinity`,
    check: (value, label) => checkWaitDuration(value, label),
  };
}

export function booleanOption(): OptionRule<boolean> {
  return { domain: 'a boolean', check: (value, label) => checkBoolean(value, label) };
}

/** A non-empty string of at most `maxLength` characters, without NUL. */
export function stringOption(maxLength = 1000): OptionRule<string> {
  return {
    domain: `a non-empty string of at most ${maxLength} characters`,
    check(value, label) {
      if (
        typeof value !== 'string' ||
        value.length === 0 ||
        value.length > maxLength ||
        value.includes('\0')
      ) {
        throw new InvalidArgumentError(
          `${label} must be a non-empty string of at most ${maxLength} characters, got ${describeValue(value)}`,
        );
      }
      return value;
    },
  };
}

/** One of a fixed set of strings. */
export function oneOfOption<const V extends string>(values: readonly V[]): OptionRule<V> {
  return {
    domain: `one of ${values.join(', ')}`,
    check(value, label) {
      if (!values.includes(value as V)) {
        throw new InvalidArgumentError(
          `${label} must be one of ${values.join(', ')}, got ${describeValue(value)}`,
        );
      }
      return value as V;
    },
  };
}

export function clockOption(): DefaultedRule<Clock> {
  return {
    domain: 'a clock with monotonic(), wall() and sleep()',
    default: checkClock(undefined),
    defaultText: 'the system clock',
    check: (value, label) => checkClock(value as Clock, label),
  };
}

export function signalOption(): OptionRule<AbortSignal> {
  return {
    domain: 'an AbortSignal',
    check: (value, label) => checkSignal(value, label) as AbortSignal,
  };
}

export function callbackOption<F extends (...args: never[]) => unknown>(): OptionRule<F> {
  return {
    domain: 'a function',
    check: (value, label) => checkCallback(value as F, label) as F,
  };
}

/**
 * An option checked by the entry point's own function (a database source, a logger): the
 * spec still names it, so it is known, and the function still refuses what it cannot use.
 */
export function customOption<T>(
  domain: string,
  check: (value: unknown, label: string) => T,
): OptionRule<T> {
  return { domain, check };
}
