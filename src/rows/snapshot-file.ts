import { constants } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import * as fsp from 'node:fs/promises';
import { LockIOError } from '../core/errors.js';
import { crc32 } from './crc32.js';
import { hex16, writeFully } from './log-segment.js';
import {
  encodeFileHeader,
  encodeFrame,
  encodeSnapshotTrailer,
  FILE_HEADER_BYTES,
  FILE_HEADER_V1_BYTES,
  FRAME_HEADER_BYTES,
  fileHeaderBytes,
  parseFileHeader,
  parseSnapshotTrailer,
  SNAPSHOT_MAGIC,
  SNAPSHOT_TRAILER_BYTES,
} from './record-codec.js';

/**
 * A snapshot (checkpoint) file: `snapshot-<seq>.snap`, where `seq` is the first log segment it
 * does NOT cover. Layout: file header, record frames (`back` always 0), trailer with the record
 * count. It is written under a temporary name (`<name>.tmp`), fsynced, and only then renamed
 * into place, so a snapshot file under its final name is always complete; a leftover `.tmp`
 * is debris from a crash and is deleted on open.
 */

export const snapshotName = (seq: number): string => `snapshot-${hex16(seq)}.snap`;
export const TEMP_SUFFIX = '.tmp';
const SNAPSHOT_NAME = /^snapshot-([0-9a-f]{16})\.snap$/;

export function parseSnapshotName(name: string): number | undefined {
  const m = SNAPSHOT_NAME.exec(name);
  return m === null ? undefined : Number.parseInt(m[1] as string, 16);
}

/** Frames are encoded and written this many bytes at a time, to bound the copies in memory
 * and keep each synchronous stretch (checksumming) short. */
const CHUNK_BYTES = 4 << 20;

/**
 * Writes `records` to `<path>.tmp` (header with the writer's `epoch`) and fsyncs it (always,
 * whatever the log's durability: a snapshot replaces the segments it covers, so losing it to a
 * power cut would lose them all). Returns the temporary path, to be published with
 * {@link publishSnapshot}.
 */
export async function writeSnapshotTemp(
  path: string,
  seq: number,
  epoch: number,
  records: readonly Uint8Array[],
): Promise<string> {
  const temp = path + TEMP_SUFFIX;
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;
  let handle: FileHandle | undefined;
  try {
    handle = await fsp.open(temp, flags, 0o644);
    let position = 0;
    let chunk: Buffer[] = [encodeFileHeader(SNAPSHOT_MAGIC, seq, epoch)];
    let chunkBytes = FILE_HEADER_BYTES;
    const flush = async () => {
      const data = Buffer.concat(chunk, chunkBytes);
      chunk = [];
      chunkBytes = 0;
      await writeFully(handle as FileHandle, data, position);
      position += data.length;
    };
    for (const record of records) {
      const frame = encodeFrame(record, 0);
      chunk.push(frame);
      chunkBytes += frame.length;
      if (chunkBytes >= CHUNK_BYTES) await flush();
    }
    chunk.push(encodeSnapshotTrailer(records.length));
    chunkBytes += SNAPSHOT_TRAILER_BYTES;
    await flush();
    await handle.sync();
    await handle.close();
    handle = undefined;
    return temp;
  } catch (err) {
    await handle?.close().catch(() => {});
    await fsp.rm(temp, { force: true }).catch(() => {});
    throw new LockIOError(`Cannot write snapshot ${temp}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/** Renames the temporary file into place and fsyncs the directory. */
export async function publishSnapshot(
  temp: string,
  path: string,
  dirHandle: FileHandle,
): Promise<void> {
  try {
    await fsp.rename(temp, path);
    await dirHandle.sync();
  } catch (err) {
    throw new LockIOError(`Cannot publish snapshot ${path}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/**
 * Reads and verifies snapshot `seq` (format version 1 or 2): header, every frame's checksum,
 * the trailer and its count. Any mismatch rejects with an `IO_ERROR` naming the file and
 * offset (a published snapshot is complete by construction, so damage means the media changed
 * it). Records are views into the read buffers, not copies. `epoch`: its writer's (0 for v1).
 */
export async function readSnapshot(
  path: string,
  seq: number,
): Promise<{ records: Buffer[]; epoch: number }> {
  let handle: FileHandle;
  try {
    handle = await fsp.open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    throw new LockIOError(`Cannot open snapshot ${path}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  try {
    const size = (await handle.stat()).size;
    const reader = new SequentialReader(handle, size);
    const bad = (what: string, at: number) =>
      new LockIOError(`Corrupt snapshot ${path} at offset ${at}: ${what}`);
    if (size < FILE_HEADER_V1_BYTES + SNAPSHOT_TRAILER_BYTES) throw bad('file too short', 0);
    let head = await reader.take(FILE_HEADER_V1_BYTES);
    const headerBytes = fileHeaderBytes(head) ?? FILE_HEADER_V1_BYTES;
    if (headerBytes > FILE_HEADER_V1_BYTES) {
      if (size < headerBytes + SNAPSHOT_TRAILER_BYTES) throw bad('file too short', 0);
      head = Buffer.concat([head, await reader.take(headerBytes - FILE_HEADER_V1_BYTES)]);
    }
    const header = parseFileHeader(head, SNAPSHOT_MAGIC);
    if ('error' in header) throw bad(header.error, 0);
    if (header.seq !== seq) throw bad(`header names sequence number ${header.seq}`, 0);
    const framesEnd = size - SNAPSHOT_TRAILER_BYTES;
    const records: Buffer[] = [];
    while (reader.position < framesEnd) {
      const at = reader.position;
      if (framesEnd - at < FRAME_HEADER_BYTES) throw bad('truncated record header', at);
      const head = await reader.take(FRAME_HEADER_BYTES);
      const length = head.readUInt32LE(0);
      if (length > framesEnd - reader.position) throw bad(`record length ${length}`, at);
      const payload = await reader.take(length);
      if (crc32(payload, crc32(head.subarray(0, 8))) !== head.readUInt32LE(8)) {
        throw bad('record checksum mismatch', at);
      }
      records.push(payload);
    }
    if (reader.position !== framesEnd) throw bad('missing trailer', reader.position);
    const count = parseSnapshotTrailer(await reader.take(SNAPSHOT_TRAILER_BYTES));
    if (count === undefined) throw bad('bad trailer', framesEnd);
    if (count !== records.length) {
      throw bad(`trailer counts ${count} records, found ${records.length}`, framesEnd);
    }
    return { records, epoch: header.epoch };
  } catch (err) {
    if (err instanceof LockIOError) throw err;
    throw new LockIOError(`Cannot read snapshot ${path}: ${(err as Error).message}`, {
      cause: err,
    });
  } finally {
    await handle.close();
  }
}

/** Reads a file front to back in large chunks; `take(n)` returns the next n bytes (a view). */
class SequentialReader {
  readonly #handle: FileHandle;
  readonly #size: number;
  #buf = Buffer.alloc(0);
  #at = 0;
  /** File offset of `#buf[0]`. */
  #base = 0;

  constructor(handle: FileHandle, size: number) {
    this.#handle = handle;
    this.#size = size;
  }

  get position(): number {
    return this.#base + this.#at;
  }

  async take(n: number): Promise<Buffer> {
    if (this.#buf.length - this.#at < n) await this.#fill(n);
    const out = this.#buf.subarray(this.#at, this.#at + n);
    this.#at += n;
    return out;
  }

  async #fill(n: number): Promise<void> {
    const rest = this.#buf.subarray(this.#at);
    const fileOffset = this.#base + this.#buf.length;
    const want = Math.min(Math.max(n, CHUNK_BYTES), rest.length + (this.#size - fileOffset));
    if (want < n) throw new Error(`unexpected end of file at offset ${this.position}`);
    const next = Buffer.allocUnsafe(want);
    rest.copy(next);
    let filled = rest.length;
    while (filled < want) {
      const { bytesRead } = await this.#handle.read(
        next,
        filled,
        want - filled,
        fileOffset + filled - rest.length,
      );
      if (bytesRead === 0) throw new Error(`unexpected end of file at offset ${this.position}`);
      filled += bytesRead;
    }
    this.#base += this.#at;
    this.#buf = next;
    this.#at = 0;
  }
}
