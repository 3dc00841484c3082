import { constants, writeSync } from 'node:fs';
import { LockIOError } from '../core/errors.js';
import { nextFencingToken } from '../core/fencing.js';
import { type FileStatus, fileCalls } from '../os/file-calls.js';
import { lockPath } from './lock-file.js';

/** Suffix of the file beside a lock that keeps its fencing counter. */
export const FENCE_SUFFIX = '.fence';
const WIDTH = 20;
/** How far ahead of the token it issues a process reserves the counter (µs of clock). */
const RESERVE = 10_000;
/** Open fence files kept per process; the least recently used beyond this are closed. */
const MAX_OPEN = 64;

interface FenceFile {
  readonly fd: number;
  readonly dev: number;
  readonly ino: number;
  /** The counter value this process last wrote, if nobody wrote since. */
  reserved: number | undefined;
  /** The last token this process issued for this lock. */
  last: number | undefined;
}

/** Keyed by the lock file's path (the very string the caller hashed already), oldest first. */
const open = new Map<string, FenceFile>();
/** The key last moved to the end of {@link open}, so a repeat grant skips the reorder. */
let newest: string | undefined;
const buf = Buffer.alloc(WIDTH + 1);

/**
 * Issues the next fencing token of the lock `<dir>/<name>`; call only while holding that lock.
 *
 * The counter lives in `<name>.fence` beside the lock (the lock file itself must stay empty:
 * Lucene checks its size), as fixed-width decimal. It holds a **reservation**, not the last
 * token: a process that writes R may issue tokens up to R without writing again for as long
 * as the file still holds R (nobody else wrote since). Every issued token is below the stored
 * value, so the next grant in any process, after any restart, reads a larger starting point.
 * Tokens are `max(previous + 1, wall clock in µs)` and the reservation runs 10 ms of clock
 * ahead, so the uncontended case costs one `pread` per grant and one write per 10 ms.
 *
 * The file's descriptor stays open between grants. It is only trusted for writing after an
 * `fstat` shows it is still the linked file it was (so a descriptor closed and reused by
 * someone else is never written to); a deleted or replaced fence file is reopened then.
 * A missing or torn counter falls back to the clock floor of {@link nextFencingToken}.
 */
export function advanceFenceToken(dir: string, name: string, wallMs: number): number {
  return advanceFenceTokenOf(lockPath(dir, name), wallMs);
}

/**
 * {@link advanceFenceToken} for the lock file at `lockFile` (`lockPath(dir, name)`). Taking
 * the lock's own path string lets the per-grant cache lookup reuse its hash instead of
 * building and hashing the fence file's path every time.
 */
export function advanceFenceTokenOf(lockFile: string, wallMs: number): number {
  let file = cachedOrOpen(lockFile, undefined);
  try {
    const stored = readCounter(file.fd);
    // While the file still holds our reservation, count on from our own last token.
    const mine = stored !== undefined && stored === file.reserved && file.last !== undefined;
    let token = nextFencingToken(mine ? file.last : stored, wallMs);
    if (!mine || token > (file.reserved as number)) {
      if (!isStillLinked(file)) {
        file = reopen(lockFile, file);
        token = Math.max(nextFencingToken(readCounter(file.fd), wallMs), (file.last ?? 0) + 1);
      }
      const reserved = token + RESERVE;
      buf.write(`${String(reserved).padStart(WIDTH, '0')}\n`, 0, 'latin1');
      writeSync(file.fd, buf, 0, WIDTH + 1, 0);
      file.reserved = reserved;
    }
    file.last = token;
    return token;
  } catch (err) {
    forget(lockFile);
    if (err instanceof LockIOError) throw err;
    throw new LockIOError(`Cannot update the fencing-token file ${lockFile + FENCE_SUFFIX}`, {
      cause: err,
    });
  }
}

/** Parses the fixed-width decimal counter; `undefined` when missing or torn. */
function readCounter(fd: number): number | undefined {
  const n = fileCalls().pread(fd, buf, WIDTH + 1, 0);
  if (n < 1) return undefined;
  let value = 0;
  let digits = 0;
  for (let i = 0; i < n; i++) {
    const c = buf[i] as number;
    if (c >= 48 && c <= 57) {
      value = value * 10 + (c - 48);
      digits++;
    } else if (c !== 10 || i !== n - 1) {
      return undefined;
    }
  }
  return digits > 0 && Number.isSafeInteger(value) ? value : undefined;
}

function cachedOrOpen(lockFile: string, previous: FenceFile | undefined): FenceFile {
  const cached = open.get(lockFile);
  if (cached !== undefined) {
    if (newest !== lockFile) {
      open.delete(lockFile);
      open.set(lockFile, cached);
      newest = lockFile;
    }
    return cached;
  }
  const path = lockFile + FENCE_SUFFIX;
  let fd: number;
  try {
    fd = fileCalls().open(path, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, 0o644);
  } catch (err) {
    throw new LockIOError(`Cannot open the fencing-token file ${path}`, { cause: err });
  }
  const st = fileCalls().fstat(fd);
  const file: FenceFile = {
    fd,
    dev: st.dev,
    ino: st.ino,
    reserved: undefined,
    last: previous?.last,
  };
  open.set(lockFile, file);
  newest = lockFile;
  if (open.size > MAX_OPEN) {
    const [oldest] = open.keys();
    if (oldest !== undefined) forget(oldest);
  }
  return file;
}

function isStillLinked(file: FenceFile): boolean {
  return (statIfOurs(file)?.nlink ?? 0) > 0;
}

/**
 * The fence file's status while `file.fd` is still the descriptor opened for it, else
 * `undefined` (closed behind our back, or its number reused for another file).
 */
function statIfOurs(file: FenceFile): FileStatus | undefined {
  try {
    const st = fileCalls().fstat(file.fd);
    return st.dev === file.dev && st.ino === file.ino ? st : undefined;
  } catch {
    return undefined;
  }
}

function reopen(lockFile: string, stale: FenceFile): FenceFile {
  forget(lockFile);
  return cachedOrOpen(lockFile, stale);
}

function forget(lockFile: string): void {
  const file = open.get(lockFile);
  if (file === undefined) return;
  open.delete(lockFile);
  // Only close a descriptor that is still the fence file; never someone else's.
  if (statIfOurs(file) === undefined) return;
  try {
    fileCalls().close(file.fd);
  } catch {}
}
