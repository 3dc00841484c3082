import { createRequire } from 'node:module';
import type * as Koffi from 'koffi';
import { UnsupportedOperationError } from '../core/errors.js';

/**
 * The C library, loaded once through koffi. Every declaration here is a non-blocking call:
 * locksmith never makes a blocking lock call, on the event loop or on libuv's thread pool.
 */
export interface Libc {
  koffi: typeof Koffi;
  lib: Koffi.LibraryHandle;
  errno(): number;
}

let cached: Libc | undefined;

const CANDIDATES: Record<string, string[]> = {
  linux: ['libc.so.6', 'libc.musl-x86_64.so.1', 'libc.musl-aarch64.so.1', 'libc.so'],
  darwin: ['libSystem.B.dylib'],
  freebsd: ['libc.so.7'],
};

export function libc(): Libc {
  if (cached !== undefined) return cached;
  const names = CANDIDATES[process.platform];
  if (names === undefined) {
    throw new UnsupportedOperationError(
      `Kernel file locks are not implemented on ${process.platform}`,
    );
  }
  // koffi is CommonJS; loading it lazily keeps `import 'locksmith-locks'` free of native code.
  const koffi = createRequire(import.meta.url)('koffi') as typeof Koffi;
  let lastError: unknown;
  for (const name of names) {
    try {
      const lib = koffi.load(name);
      cached = { koffi, lib, errno: () => koffi.errno() };
      return cached;
    } catch (err) {
      lastError = err;
    }
  }
  throw new UnsupportedOperationError(`Cannot load the C library (${names.join(', ')})`, {
    cause: lastError,
  });
}

/** errno name for a number, as Node spells it (`EAGAIN`, …), for messages and `code`s. */
export function errnoName(errno: number): string {
  const names = (libc().koffi.os as { errno: Record<string, number> }).errno;
  for (const [name, value] of Object.entries(names)) if (value === errno) return name;
  return `E${errno}`;
}

/** A Node-style system error for a failed libc call, so callers can test `code` as with `fs`. */
export function systemError(syscall: string, errno: number, path?: string): NodeJS.ErrnoException {
  const code = errnoName(errno);
  const err: NodeJS.ErrnoException = new Error(
    `${code}: ${syscall} failed${path === undefined ? '' : ` on ${path}`} (errno ${errno})`,
  );
  err.code = code;
  err.errno = -errno;
  err.syscall = syscall;
  if (path !== undefined) err.path = path;
  return err;
}
