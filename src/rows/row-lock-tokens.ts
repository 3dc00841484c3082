import { closeSync, fdatasyncSync, fsyncSync, openSync, writeSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import { isErrno, LockIOError } from '../core/errors.js';

/** The file, in a region's directory, that holds the highest row-lock token reserved so far. */
export const TOKENS_FILE = 'row-lock.tokens';
/**
 * Tokens reserved per write: 2^32. Tokens also follow the wall clock in microseconds, so a
 * busy region crosses a ceiling about every 71 minutes (one small synchronous write and
 * `fdatasync`), and 2^53 leaves room for well over a million restarts.
 */
export const TOKEN_BLOCK = 2 ** 32;
const WIDTH = 16; // digits of Number.MAX_SAFE_INTEGER

/**
 * Where a region keeps the ceiling of its row-lock tokens: `firstToken` is above every token
 * handed out before (by any earlier owner of the region), `ceiling` the highest reserved now.
 * `reserve(from)` reserves the block from `from` on and returns its ceiling; it is called
 * inside a grant, so it is synchronous and never throws (a storage that records it
 * asynchronously warns on failure, and tokens then rely on the wall-clock floor).
 */
export interface RowLockTokenStore {
  readonly firstToken: number;
  readonly ceiling: number;
  reserve(from: number): number;
  close(): void;
}

/** The first token a new owner may hand out: above the stored ceiling and the wall clock (µs). */
export function firstTokenAbove(stored: number, wallMs: number): number {
  return Math.max(Number.isSafeInteger(stored) ? stored + 1 : 0, Math.floor(wallMs * 1000));
}

/**
 * Makes a region's fencing tokens increase across restarts. Before a token above the reserved
 * ceiling is handed out, a new ceiling (a block higher) is written to `row-lock.tokens` and
 * synced; a new process starts above the stored ceiling. Tokens also never fall below the wall
 * clock in microseconds (as core's `nextFencingToken`), so a lost or unreadable file only
 * weakens the guarantee to "as long as the wall clock did not go back".
 *
 * The file is one line, the ceiling in 16 decimal digits, rewritten in place: a 17-byte write
 * at offset 0 stays within one disk sector.
 */
export class TokenReservation implements RowLockTokenStore {
  readonly #path: string;
  #fd: number | undefined;
  readonly firstToken: number;
  readonly ceiling: number;

  private constructor(path: string, fd: number, firstToken: number, ceiling: number) {
    this.#path = path;
    this.#fd = fd;
    this.firstToken = firstToken;
    this.ceiling = ceiling;
  }

  /** Reads the stored ceiling and reserves the first block (written and synced). */
  static async open(dir: string, wallMs: number): Promise<TokenReservation> {
    const path = join(dir, TOKENS_FILE);
    let stored = 0;
    try {
      const text = await fsp.readFile(path, 'latin1');
      const match = /^(\d{1,16})\n?$/.exec(text);
      if (match !== null) stored = Number(match[1]);
    } catch (err) {
      if (!isErrno(err, 'ENOENT')) {
        throw new LockIOError(`Cannot read ${path}: ${(err as Error).message}`, { cause: err });
      }
    }
    const first = firstTokenAbove(stored, wallMs);
    let fd: number | undefined;
    try {
      fd = openSync(path, 'a+');
      closeSync(fd);
      fd = openSync(path, 'r+');
      const ceiling = first + TOKEN_BLOCK - 1;
      writeCeiling(fd, ceiling);
      fsyncSync(fd);
      // The file may be new: make its directory entry durable too.
      const dirFd = openSync(dir, 'r');
      try {
        fsyncSync(dirFd);
      } finally {
        closeSync(dirFd);
      }
      return new TokenReservation(path, fd, first, ceiling);
    } catch (err) {
      if (fd !== undefined) closeSync(fd);
      throw new LockIOError(
        `Cannot reserve row-lock tokens in ${path}: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
  }

  /**
   * Reserves the block starting at `from` and returns its ceiling. Synchronous (it runs inside
   * a grant). Never throws: a failure is reported as a process warning, and tokens then rely
   * on the wall-clock floor alone until the next reservation succeeds.
   */
  reserve(from: number): number {
    const ceiling = from + TOKEN_BLOCK - 1;
    try {
      if (this.#fd === undefined) throw new Error('closed');
      writeCeiling(this.#fd, ceiling);
      fdatasyncSync(this.#fd);
    } catch (err) {
      process.emitWarning(
        `Cannot reserve row-lock tokens in ${this.#path}: ${(err as Error).message}; tokens rely on the wall clock until the next reservation`,
      );
    }
    return ceiling;
  }

  close(): void {
    if (this.#fd === undefined) return;
    const fd = this.#fd;
    this.#fd = undefined;
    closeSync(fd);
  }
}

function writeCeiling(fd: number, ceiling: number): void {
  const line = Buffer.from(`${String(ceiling).padStart(WIDTH, '0')}\n`, 'latin1');
  writeSync(fd, line, 0, line.length, 0);
}
