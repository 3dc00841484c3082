import { closeSync, constants, fstatSync, openSync, readSync, writeSync } from 'node:fs';
import { LockIOError } from '../core/errors.js';
import { nextFencingToken } from '../core/fencing.js';
import { lockPath } from './lock-file.js';

/** Suffix of the file beside a lock that keeps its fencing counter. */
export const FENCE_SUFFIX = '.fence';
const WIDTH = 20;
/** How far ahead of the token it issues a process reserves the counter (µs of clock). */
const RESERVE = 10_000;
/** Open fence files kept per process; the least recently used beyond this are closed. */
const MAX_OPEN = 64;

interface FenceFile {
  fd: number;
  dev: number;
  ino: number;
  /** The counter value this process last wrote, if nobody wrote since. */
  reserved: number | undefined;
  /** The last token this process issued for this lock. */
  last: number | undefined;
}

const open = new Map<string, FenceFile>();
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
  const path = lockPath(dir, name + FENCE_SUFFIX);
  let file = cachedOrOpen(path, undefined);
  try {
    let stored = readCounter(file.fd);
    const floor = Math.floor(wallMs * 1000);
    const mine = stored !== undefined && stored === file.reserved && file.last !== undefined;
    let token = mine
      ? Math.max((file.last as number) + 1, floor)
      : nextFencingToken(stored, wallMs);
    if (!mine || token > (file.reserved as number)) {
      if (!isStillLinked(file, path)) {
        file = reopen(path, file);
        stored = readCounter(file.fd);
        token = Math.max(nextFencingToken(stored, wallMs), (file.last ?? 0) + 1);
      }
      const reserved = token + RESERVE;
      buf.write(`${String(reserved).padStart(WIDTH, '0')}\n`, 0, 'latin1');
      writeSync(file.fd, buf, 0, WIDTH + 1, 0);
      file.reserved = reserved;
    }
    file.last = token;
    return token;
  } catch (err) {
    forget(path);
    if (err instanceof LockIOError) throw err;
    throw new LockIOError(`Cannot update the fencing-token file ${path}`, { cause: err });
  }
}

/** Parses the fixed-width decimal counter; `undefined` when missing or torn. */
function readCounter(fd: number): number | undefined {
  const n = readSync(fd, buf, 0, WIDTH + 1, 0);
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

function cachedOrOpen(path: string, previous: FenceFile | undefined): FenceFile {
  const cached = open.get(path);
  if (cached !== undefined) {
    open.delete(path);
    open.set(path, cached);
    return cached;
  }
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, 0o644);
  } catch (err) {
    throw new LockIOError(`Cannot open the fencing-token file ${path}`, { cause: err });
  }
  const st = fstatSync(fd);
  const file: FenceFile = {
    fd,
    dev: st.dev,
    ino: st.ino,
    reserved: undefined,
    last: previous?.last,
  };
  open.set(path, file);
  if (open.size > MAX_OPEN) {
    const [oldest] = open.keys();
    if (oldest !== undefined) forget(oldest);
  }
  return file;
}

function isStillLinked(file: FenceFile, path: string): boolean {
  try {
    const st = fstatSync(file.fd);
    return st.dev === file.dev && st.ino === file.ino && st.nlink > 0;
  } catch {
    // Closed behind our back: drop it without closing (the number may belong to someone else).
    open.delete(path);
    file.fd = -1;
    return false;
  }
}

function reopen(path: string, stale: FenceFile): FenceFile {
  forget(path);
  return cachedOrOpen(path, stale);
}

function forget(path: string): void {
  const file = open.get(path);
  if (file === undefined) return;
  open.delete(path);
  if (file.fd < 0) return;
  try {
    // Only close a descriptor that is still the fence file; never someone else's.
    const st = fstatSync(file.fd);
    if (st.dev === file.dev && st.ino === file.ino) closeSync(file.fd);
  } catch {}
}
