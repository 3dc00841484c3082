import { constants, writeSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import * as fsp from 'node:fs/promises';
import { isErrno, LockIOError } from '../core/errors.js';
import {
  encodeFileHeader,
  FILE_HEADER_BYTES,
  FILE_HEADER_V1_BYTES,
  type FileHeader,
  FRAME_HEADER_BYTES,
  type Frame,
  fileHeaderBytes,
  MAX_FRAME_FIELD,
  parseFileHeader,
  parseFrame,
  SEGMENT_MAGIC,
  type Seal,
} from './record-codec.js';

/**
 * A log segment: `log-<seq as 16 hex digits>.wal`, a file header then record frames, only
 * ever appended to. Segments are numbered consecutively with no gaps: every allocated number
 * gets a file (created, with its header, before anything depends on it), so a missing number
 * is always damage, never a hole the writer left.
 */

export const segmentName = (seq: number): string => `log-${hex16(seq)}.wal`;
const SEGMENT_NAME = /^log-([0-9a-f]{16})\.wal$/;

export function parseSegmentName(name: string): number | undefined {
  const m = SEGMENT_NAME.exec(name);
  return m === null ? undefined : Number.parseInt(m[1] as string, 16);
}

export function hex16(seq: number): string {
  return seq.toString(16).padStart(16, '0');
}

const CREATE_FLAGS =
  constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/**
 * Creates segment `seq` (which must not exist: `EEXIST` otherwise) with its header, carrying
 * the writer's `epoch` and, for the first segment of an open, its `seal`. With `sync` the
 * header is on disk when this resolves; the caller still has to fsync the directory.
 */
export async function createSegment(
  path: string,
  seq: number,
  sync: boolean,
  epoch = 0,
  seal: Seal | undefined = undefined,
): Promise<FileHandle> {
  const handle = await fsp.open(path, CREATE_FLAGS, 0o644);
  try {
    await writeFully(handle, encodeFileHeader(SEGMENT_MAGIC, seq, epoch, seal), 0);
    if (sync) await handle.datasync();
    return handle;
  } catch (err) {
    await handle.close().catch(() => {});
    throw err;
  }
}

/** `write(2)` until all of `buf` is written at `position` (a short write is retried). */
export async function writeFully(handle: FileHandle, buf: Uint8Array, position: number) {
  let done = 0;
  while (done < buf.length) {
    const { bytesWritten } = await handle.write(buf, done, buf.length - done, position + done);
    if (bytesWritten <= 0) throw new Error(`write returned ${bytesWritten}`);
    done += bytesWritten;
  }
}

/**
 * The header of the segment or snapshot file at `path` (`magic` says which), or undefined
 * when the file is gone or its header is not a valid one (recovery judges such a file when it
 * reads it whole). Any other read error rejects with an `IO_ERROR`: epochs and seals decide
 * what counts, so a header is never silently skipped.
 */
export async function readFileHeader(path: string, magic: string): Promise<FileHeader | undefined> {
  let handle: FileHandle | undefined;
  try {
    handle = await fsp.open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
    const buf = Buffer.alloc(FILE_HEADER_BYTES);
    const { bytesRead } = await handle.read(buf, 0, buf.length, 0);
    const header = parseFileHeader(buf.subarray(0, bytesRead), magic);
    return 'error' in header ? undefined : header;
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return undefined;
    throw new LockIOError(`Cannot read the header of ${path}: ${(err as Error).message}`, {
      cause: err,
    });
  } finally {
    await handle?.close().catch(() => {});
  }
}

/** {@link writeFully} on the event loop: `write(2)` until all of `buf` is at `position`. */
export function writeFullySync(handle: FileHandle, buf: Uint8Array, position: number): void {
  let done = 0;
  while (done < buf.length) {
    const written = writeSync(handle.fd, buf, done, buf.length - done, position + done);
    if (written <= 0) throw new Error(`write returned ${written}`);
    done += written;
  }
}

export interface ScannedSegment {
  /** The intact records, in order (views into the file's buffer). */
  records: Buffer[];
  /** Length of the intact prefix: where the file must be truncated to, or its length. */
  end: number;
  /** True when the file ended in a torn final batch (bytes after `end` to drop). */
  torn: boolean;
  /** True when the file is shorter than a header or its header is all zeros (a crash while it
   * was created): it holds no records and needs its header rewritten. Only for the last one. */
  headerless: boolean;
  /** The parsed header (undefined when `headerless`). */
  header: FileHeader | undefined;
}

/**
 * Reads segment `seq` from its whole contents `buf`, deciding what a damaged record means.
 *
 * A crash can only leave damage in the **last write batch of the last segment**: batches are
 * written one at a time, each completed (and with `fsync`, synced) before the next starts,
 * and a segment is closed before the next is created. A batch that was in flight at the crash
 * was never acknowledged, so it may end anywhere, or (power loss) have holes where some pages
 * never reached the disk. So at the first bad frame (offset X) the rest of the file is
 * searched for intact frames: every one found must belong to a batch that started at or
 * before X (its `back` field says where its batch began) — then it is part of the same torn
 * batch and the tail from X is dropped (`torn`). An intact frame of a *later* batch means an
 * earlier, completed and possibly acknowledged batch was damaged afterwards: media
 * corruption, reported as an `IO_ERROR` naming the file and offset instead of silently
 * skipping records. Any damage in a segment that is not the last is reported the same way.
 */
export function scanSegment(
  buf: Buffer,
  path: string,
  seq: number,
  isLast: boolean,
): ScannedSegment {
  // A crash while the segment was being created leaves it shorter than a header (a partial
  // header write) or, after a power loss, zero-filled. Either way it holds no records.
  if (buf.length < (fileHeaderBytes(buf) ?? FILE_HEADER_V1_BYTES) || isAllZero(buf)) {
    if (!isLast) {
      throw new LockIOError(
        `Log segment ${path} has no valid header (${buf.length} bytes) and is not the last segment`,
      );
    }
    return { records: [], end: 0, torn: buf.length > 0, headerless: true, header: undefined };
  }
  const header = parseFileHeader(buf, SEGMENT_MAGIC);
  if ('error' in header) throw new LockIOError(`Log segment ${path}: ${header.error}`);
  if (header.seq !== seq) {
    throw new LockIOError(`Log segment ${path} has sequence number ${header.seq} in its header`);
  }
  const records: Buffer[] = [];
  let offset = header.bytes;
  let batchStart = offset;
  while (offset < buf.length) {
    const frame = parseFrame(buf, offset, MAX_FRAME_FIELD);
    if (frame === undefined || !continuesBatch(frame, batchStart)) break;
    if (frame.back === 0) batchStart = offset;
    records.push(frame.payload);
    offset = frame.next;
  }
  if (offset === buf.length) {
    return { records, end: offset, torn: false, headerless: false, header };
  }
  if (!isLast) {
    throw new LockIOError(
      `Corrupt record in log segment ${path} at offset ${offset}, which is not the last ` +
        'segment: the file was damaged after it was written (records after it would be lost)',
    );
  }
  // Zeros to the end: what the writer wrote ahead of its records (see group-commit.ts), or
  // pages a power loss never wrote; no later batch can hide in them.
  if (isAllZero(buf.subarray(offset))) {
    return { records, end: offset, torn: true, headerless: false, header };
  }
  const later = findLaterBatch(buf, offset, header.bytes);
  if (later !== undefined) {
    throw new LockIOError(
      `Corrupt record in log segment ${path} at offset ${offset}, followed by an intact later ` +
        `write batch at offset ${later}: the file was damaged after it was written (a crash ` +
        'cannot do this), refusing to drop acknowledged records',
    );
  }
  return { records, end: offset, torn: true, headerless: false, header };
}

/** A frame either starts a batch (`back` 0) or continues the current one. */
function continuesBatch(frame: Frame, batchStart: number): boolean {
  return frame.back === 0 || frame.offset - frame.back === batchStart;
}

/** Offset of the first intact frame after `bad` that belongs to a batch started after `bad`. */
function findLaterBatch(buf: Buffer, bad: number, headerBytes: number): number | undefined {
  let at = bad + 1;
  while (at + FRAME_HEADER_BYTES <= buf.length) {
    const frame = parseFrame(buf, at, MAX_FRAME_FIELD);
    if (frame === undefined || frame.back > at - headerBytes) {
      at++;
      continue;
    }
    if (at - frame.back > bad) return at;
    at = frame.next; // part of the torn batch itself: skip it whole
  }
  return undefined;
}

function isAllZero(buf: Uint8Array): boolean {
  for (const b of buf) if (b !== 0) return false;
  return true;
}

/**
 * Makes the last segment end at `end` (dropping a torn batch) or, when it is headerless,
 * rewrites it as an empty segment of `epoch` (the largest epoch of the files before it);
 * synced, so later batches never sit behind stale bytes.
 */
export async function repairSegment(
  path: string,
  seq: number,
  scanned: ScannedSegment,
  epoch: number,
): Promise<void> {
  const handle = await fsp.open(path, constants.O_WRONLY | constants.O_NOFOLLOW);
  try {
    await handle.truncate(scanned.end);
    if (scanned.headerless) {
      await writeFully(handle, encodeFileHeader(SEGMENT_MAGIC, seq, epoch), 0);
    }
    await handle.sync();
  } finally {
    await handle.close();
  }
}
