import { closeSync, constants, fstatSync, openSync, readSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { LockIOError } from '../core/errors.js';
import { nextFencingToken } from '../core/fencing.js';

/** Suffix of the file beside a lock that keeps its last fencing token. */
export const FENCE_SUFFIX = '.fence';
const WIDTH = 20;
/** Open fence files kept per process; the least recently used beyond this are closed. */
const MAX_OPEN = 64;

const open = new Map<string, number>();
const buf = Buffer.allocUnsafe(WIDTH + 1);

/**
 * Advances and persists the fencing token of the lock `<dir>/<name>`; call only while holding
 * that lock. The counter lives in `<name>.fence` beside the lock, because the lock file itself
 * must stay empty (Lucene checks its size). The file holds the decimal token, fixed width, so
 * an update is one in-place write. Its descriptor stays open between grants (the file is
 * reopened if it was deleted or replaced meanwhile), which halves the cost of an uncontended
 * obtain. A missing or torn file falls back to the clock floor of {@link nextFencingToken}, so
 * tokens keep increasing across processes and restarts.
 */
export function advanceFenceToken(dir: string, name: string, wallMs: number): number {
  const path = join(dir, name + FENCE_SUFFIX);
  const fd = fenceFile(path);
  try {
    const n = readSync(fd, buf, 0, WIDTH + 1, 0);
    const text = buf.toString('latin1', 0, n).trim();
    const previous = /^\d{1,20}$/.test(text) ? Number(text) : undefined;
    const token = nextFencingToken(previous, wallMs);
    buf.write(`${String(token).padStart(WIDTH, '0')}\n`, 0, 'latin1');
    writeSync(fd, buf, 0, WIDTH + 1, 0);
    return token;
  } catch (err) {
    forget(path);
    throw new LockIOError(`Cannot update the fencing-token file ${path}`, { cause: err });
  }
}

function fenceFile(path: string): number {
  const cached = open.get(path);
  if (cached !== undefined) {
    open.delete(path);
    let linked = false;
    try {
      linked = fstatSync(cached).nlink > 0;
    } catch {}
    if (linked) {
      open.set(path, cached);
      return cached;
    }
    closeQuietly(cached);
  }
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, 0o644);
  } catch (err) {
    throw new LockIOError(`Cannot open the fencing-token file ${path}`, { cause: err });
  }
  open.set(path, fd);
  if (open.size > MAX_OPEN) {
    const [oldest, oldFd] = open.entries().next().value as [string, number];
    open.delete(oldest);
    closeQuietly(oldFd);
  }
  return fd;
}

function forget(path: string): void {
  const fd = open.get(path);
  if (fd === undefined) return;
  open.delete(path);
  closeQuietly(fd);
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {}
}
