import { InvalidArgumentError } from '../core/errors.js';
import { customOption, type DefaultedRule, withDefault } from '../core/option-spec.js';
import { hasMethods } from '../core/options.js';

/**
 * Where store lockers and the supervisor report what they do. ActiveMQ logs through SLF4J;
 * here the caller injects a logger. The default is {@link silentLogger}: a library does not
 * write to the console unless asked to; pass {@link consoleLogger} (or any object with these
 * three methods, e.g. a pino or winston logger bound to its level methods) to see the lines.
 *
 * Levels follow ActiveMQ: INFO for role changes and the first "waiting" line, DEBUG for each
 * retry while waiting, WARN for keep-alive failures that do not demote.
 */
export interface StoreLogger {
  info(message: string): void;
  debug(message: string): void;
  warn(message: string): void;
}

const noop = () => {};

/** Drops everything: the default. */
export const silentLogger: StoreLogger = Object.freeze({ info: noop, debug: noop, warn: noop });

/** INFO and WARN to stderr (via `console`), DEBUG dropped. */
export const consoleLogger: StoreLogger = Object.freeze({
  info: (message: string) => console.info(message),
  debug: noop,
  warn: (message: string) => console.warn(message),
});

/** True when `logger` has callable `info`, `debug` and `warn`. */
export function isStoreLogger(logger: unknown): logger is StoreLogger {
  return hasMethods(logger, 'info', 'debug', 'warn');
}

/**
 * The `logger` option of the lockers and the supervisor: {@link silentLogger} by default,
 * else a {@link StoreLogger}.
 */
export function checkLogger(logger: StoreLogger | undefined): StoreLogger {
  if (logger === undefined) return silentLogger;
  if (!isStoreLogger(logger)) {
    throw new InvalidArgumentError('logger must have info(), debug() and warn() methods');
  }
  return logger;
}

/** The `logger` option as the option specs declare it (silent by default). */
export const LOGGER_OPTION: DefaultedRule<StoreLogger> = withDefault(
  customOption('a logger with info(), debug() and warn()', (value) =>
    checkLogger(value as StoreLogger),
  ),
  silentLogger,
  'silent',
);
