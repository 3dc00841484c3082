import { constants, writeSync } from 'node:fs';
import { LockIOError } from '../core/errors.js';
import { type FileStatus, fileCalls } from '../os/file-calls.js';
import { wallMicros } from '../os/wall-clock.js';
import { lockPath } from './lock-file.js';

/** Suffix of the file beside a lock that keeps its fencing counter. */
export const FENCE_SUFFIX = '.fence';
const WIDTH = 20;
/**
 * LEAD, in µs of wall clock: every token is below, and every stored counter at most, the wall
 * clock at the moment it was issued or written plus this (while the clock does not go back).
 * It is also the reservation window: a process that wrote the counter may issue tokens for
 * up to this long without writing again.
 */
export const FENCE_LEAD_MICROS = 10_000;
/** Open fence files kept per process; the least recently used beyond this are closed. */
const MAX_OPEN = 64;
/** `O_NONBLOCK` so that a FIFO planted at the fence's name cannot block the open. */
const OPEN_FLAGS =
  constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK;

interface FenceFile {
  readonly path: string;
  readonly fd: number;
  readonly dev: number;
  readonly ino: number;
  /** The file's ctime right after this process last wrote it. */
  ctimeSec: number;
  ctimeNsec: number;
  /** The counter value this process last wrote (undefined until it writes). */
  reserved: number | undefined;
  /** The last token this process issued for this lock, kept across reopens. */
  last: number | undefined;
}

/** Keyed by the lock file's path (the very string the caller hashed already), oldest first. */
const open = new Map<string, FenceFile>();
/** The key last moved to the end of {@link open}, so a repeat grant skips the reorder. */
let newest: string | undefined;
const buf = Buffer.alloc(WIDTH + 1);
/**
 * The last token issued for locks whose fence file was closed (evicted, or dropped after an
 * error), so a later grant in this process never issues below it even if the wall clock went
 * back meanwhile. Bounded like {@link open}: the oldest entries go first.
 */
const lastOfClosed = new Map<string, number>();

/**
 * Issues the next fencing token of the lock `<dir>/<name>`; call only while holding that lock.
 *
 * The counter lives in `<name>.fence` beside the lock (the lock file itself must stay empty:
 * Lucene checks its size), as fixed-width decimal. It holds a **reservation**: every token
 * issued so far is below the stored value, and the process that wrote it may keep issuing
 * tokens below it without writing, for as long as the file is provably untouched since.
 *
 * The guarantee: tokens strictly increase across every grant of the lock on the machine,
 * whatever happens to the fence file (deleted, truncated, garbled, replaced by another file,
 * even by an old copy of itself), provided the wall clock does not go back. It rests on one
 * invariant: **every token is below the wall clock (µs) read when it was issued plus
 * {@link FENCE_LEAD_MICROS}**. So a grant that cannot trust its own reservation issues
 * `max(clock + LEAD − 1, stored, own last + 1)`: the clock term beats every earlier token
 * (each read an earlier clock), the stored term covers a clock set back while the file
 * survives. The reservation written is `max(token + 1, clock + LEAD)`, never "token + window",
 * so hand-overs between processes do not push the counter further and further ahead.
 *
 * A grant may issue from its reservation (one `lstat` + one `pread`, no write) only when the
 * path still names the very file it wrote (device, inode, and the ctime it had after that
 * write: a rename away and back changes ctime) and the file still holds exactly the value it
 * wrote (any other process writing it writes a larger one). Otherwise it re-opens the path
 * and takes the slow way above. A symbolic link, directory or any other non-regular file at
 * the fence's name refuses the grant with a {@link LockIOError}; so does any I/O failure.
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
  const file = cached(lockFile);
  let st: FileStatus | undefined;
  try {
    if (file !== undefined && file.reserved !== undefined) {
      st = lstatIfExists(file.path);
      if (
        st !== undefined &&
        st.ino === file.ino &&
        st.dev === file.dev &&
        st.ctimeNsec === file.ctimeNsec &&
        st.ctimeSec === file.ctimeSec &&
        readCounter(file.fd) === file.reserved
      ) {
        // Untouched since our write: nobody else issued a token since, count on from ours.
        const token = Math.max((file.last as number) + 1, Math.floor(wallMs * 1000));
        if (token < file.reserved) {
          file.last = token;
          return token;
        }
        return write(file, token, wallMs);
      }
    }
    return takeOver(lockFile, file, st, wallMs);
  } catch (err) {
    forget(lockFile);
    if (err instanceof LockIOError) throw err;
    throw new LockIOError(`Cannot update the fencing-token file ${lockFile + FENCE_SUFFIX}`, {
      cause: err,
    });
  }
}

/**
 * The stored fencing counter of the lock file at `lockFile`: every token issued so far for
 * that lock is below it (unless the file was tampered with). `undefined` when the fence file is
 * missing, unreadable, not a regular file or garbled. Reads only; never creates the file.
 */
export function readFenceCounter(lockFile: string): number | undefined {
  const path = lockFile + FENCE_SUFFIX;
  let fd: number;
  try {
    const st = fileCalls().lstat(path);
    if (!st.isFile) return undefined;
    fd = fileCalls().open(
      path,
      constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK,
      0,
    );
  } catch {
    return undefined;
  }
  try {
    return readCounter(fd);
  } catch {
    return undefined;
  } finally {
    try {
      fileCalls().close(fd);
    } catch {}
  }
}

/**
 * A grant that cannot issue from its own reservation: first use in this process, the file
 * deleted, replaced, renamed, truncated or written by someone else. Re-opens the path when it
 * no longer names our descriptor's file, then issues at least clock + LEAD − 1.
 */
function takeOver(
  lockFile: string,
  cachedFile: FenceFile | undefined,
  seen: FileStatus | undefined,
  wallMs: number,
): number {
  const path = lockFile + FENCE_SUFFIX;
  const st = seen ?? lstatIfExists(path);
  if (st !== undefined && !st.isFile) throw notRegular(path, st);
  let file = cachedFile;
  if (
    file === undefined ||
    st === undefined ||
    st.ino !== file.ino ||
    st.dev !== file.dev ||
    statIfOurs(file) === undefined
  ) {
    forget(lockFile);
    file = openFence(lockFile, path);
  }
  const stored = readCounter(file.fd);
  const now = clockMicros(wallMs);
  // Every earlier token is below an earlier clock + LEAD, and below any genuine stored value.
  let token = now + FENCE_LEAD_MICROS - 1;
  if (stored !== undefined && stored > token) token = stored;
  if (file.last !== undefined && file.last >= token) token = file.last + 1;
  return write(file, token, wallMs, now);
}

/**
 * Stores the reservation `max(token + 1, clock + LEAD)` and issues `token`. The descriptor is
 * written only after an `fstat` shows it is still the fence file it was opened for (a
 * descriptor closed and reused behind our back is never written to).
 */
function write(file: FenceFile, token: number, wallMs: number, now = clockMicros(wallMs)): number {
  if (!Number.isSafeInteger(token + FENCE_LEAD_MICROS)) {
    throw new LockIOError(
      `The fencing-token file ${file.path} holds a counter too large to continue from; remove it only after checking the wall clock`,
    );
  }
  if (statIfOurs(file) === undefined) {
    throw new LockIOError(`The descriptor of the fencing-token file ${file.path} was closed`);
  }
  const reserved = Math.max(token + 1, now + FENCE_LEAD_MICROS);
  buf.write(`${String(reserved).padStart(WIDTH, '0')}\n`, 0, 'latin1');
  writeSync(file.fd, buf, 0, WIDTH + 1, 0);
  const st = fileCalls().fstat(file.fd);
  file.ctimeSec = st.ctimeSec;
  file.ctimeNsec = st.ctimeNsec;
  file.reserved = reserved;
  file.last = token;
  return token;
}

/** The wall clock in µs, never below the caller's `wallMs` (the clock it was given). */
function clockMicros(wallMs: number): number {
  return Math.max(Math.floor(wallMs * 1000), wallMicros());
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

function lstatIfExists(path: string): FileStatus | undefined {
  try {
    return fileCalls().lstat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new LockIOError(`Cannot examine the fencing-token file ${path}`, { cause: err });
  }
}

function notRegular(path: string, st: FileStatus, cause?: unknown): LockIOError {
  const what = st.isSymbolicLink ? 'a symbolic link' : 'not a regular file';
  return new LockIOError(
    `The fencing-token file ${path} is ${what}; no token is issued until it is removed`,
    cause === undefined ? undefined : { cause },
  );
}

function cached(lockFile: string): FenceFile | undefined {
  const file = open.get(lockFile);
  if (file !== undefined && newest !== lockFile) {
    open.delete(lockFile);
    open.set(lockFile, file);
    newest = lockFile;
  }
  return file;
}

function openFence(lockFile: string, path: string): FenceFile {
  let fd: number;
  try {
    fd = fileCalls().open(path, OPEN_FLAGS, 0o644);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // Planted between our lstat and our open: O_NOFOLLOW gives ELOOP, a directory EISDIR.
    if (code === 'ELOOP' || code === 'EISDIR') {
      const st = lstatIfExists(path);
      if (st !== undefined && !st.isFile) throw notRegular(path, st, err);
    }
    throw new LockIOError(`Cannot open the fencing-token file ${path}`, { cause: err });
  }
  let st: FileStatus;
  try {
    st = fileCalls().fstat(fd);
    if (!st.isFile) throw notRegular(path, st);
  } catch (err) {
    fileCalls().close(fd);
    throw err;
  }
  const file: FenceFile = {
    path,
    fd,
    dev: st.dev,
    ino: st.ino,
    ctimeSec: st.ctimeSec,
    ctimeNsec: st.ctimeNsec,
    reserved: undefined,
    last: lastOfClosed.get(lockFile),
  };
  lastOfClosed.delete(lockFile);
  open.set(lockFile, file);
  newest = lockFile;
  if (open.size > MAX_OPEN) {
    const [oldest] = open.keys();
    if (oldest !== undefined) forget(oldest);
  }
  return file;
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

function forget(lockFile: string): void {
  const file = open.get(lockFile);
  if (file === undefined) return;
  open.delete(lockFile);
  if (newest === lockFile) newest = undefined;
  if (file.last !== undefined) {
    lastOfClosed.set(lockFile, file.last);
    if (lastOfClosed.size > MAX_OPEN) {
      const [oldest] = lastOfClosed.keys();
      if (oldest !== undefined) lastOfClosed.delete(oldest);
    }
  }
  // Only close a descriptor that is still the fence file; never someone else's.
  if (statIfOurs(file) === undefined) return;
  try {
    fileCalls().close(file.fd);
  } catch {}
}
