import { InvalidArgumentError } from './errors.js';

const MAX_NAME_BYTES = 255;

/**
 * A lock name is one path component: not empty, not `.` or `..`, no `/`, `\` or NUL, at most
 * 255 bytes of UTF-8. Anything else could escape the lock directory or fail obscurely later.
 */
export function validateLockName(name: unknown, what = 'lock name'): string {
  if (typeof name !== 'string') {
    throw new InvalidArgumentError(`Invalid ${what}: expected a string, got ${typeof name}`);
  }
  if (name.length === 0) throw new InvalidArgumentError(`Invalid ${what}: it is empty`);
  if (name === '.' || name === '..') {
    throw new InvalidArgumentError(
      `Invalid ${what} ${shown(name)}: "." and ".." are not file names`,
    );
  }
  if (/[/\\\0]/.test(name)) {
    throw new InvalidArgumentError(
      `Invalid ${what} ${shown(name)}: it contains a path separator or NUL`,
    );
  }
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes > MAX_NAME_BYTES) {
    throw new InvalidArgumentError(
      `Invalid ${what} ${shown(name)}: ${bytes} bytes, the limit is ${MAX_NAME_BYTES}`,
    );
  }
  return name;
}

/** The name as error messages quote it; built only when an error is thrown (obtain is hot). */
function shown(name: string): string {
  return JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}…` : name);
}
