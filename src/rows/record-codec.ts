import { crc32 } from './crc32.js';

/**
 * The byte layout shared by log segments and snapshot files. All integers little-endian except
 * the magics, which are ASCII so `head -c4` shows what a file is.
 *
 * File header, format version 2 (44 bytes; every new file is written with it):
 *   magic[4] | version u32 = 2 | seq u64 | epoch u64 | sealSeq u64 | sealEnd u64 |
 *   crc32(bytes 0..40) u32
 * `epoch` is the epoch of the writer that created the file (0: standalone, no epoch). A seal
 * (`sealSeq` > 0, only in the first segment an open creates) records what that open read and
 * replayed: segment `sealSeq` counts only up to byte `sealEnd`, and segments numbered between
 * `sealSeq` and this one count not at all, whatever was written into them later (by a deposed
 * writer; see `storage-epoch.ts`). `sealSeq` 0: no seal (`sealEnd` 0 too). Snapshots never
 * carry a seal.
 *
 * File header, format version 1 (20 bytes; still read, as epoch 0 without a seal):
 *   magic[4] | version u32 = 1 | seq u64 | crc32(bytes 0..16) u32
 *
 * Record frame (12-byte header + payload):
 *   length u32 | back u32 | crc32(length, back, payload) u32 | payload[length]
 * `back` is the distance from this frame back to the first frame of the write batch it was
 * written in (0 for the first frame of a batch; always 0 in snapshots). Recovery uses it to
 * tell a torn final batch (never acknowledged, dropped) from damage to an earlier, completed
 * batch (an error): see `log-segment.ts`. The checksum covers the length, so a damaged length
 * field cannot make a frame swallow its neighbours unnoticed.
 */
export const FORMAT_VERSION = 2;
/** Size of the header this code writes (version 2). */
export const FILE_HEADER_BYTES = 44;
/** Size of a version 1 header. */
export const FILE_HEADER_V1_BYTES = 20;
/** Magic and version: enough to know a header's size. */
export const FILE_HEADER_PREFIX_BYTES = 8;
export const FRAME_HEADER_BYTES = 12;
/** Frame lengths and `back` distances are u32. */
export const MAX_FRAME_FIELD = 0xffff_ffff;

export const SEGMENT_MAGIC = 'LSWL';
export const SNAPSHOT_MAGIC = 'LSSN';
/** Snapshot trailer (16 bytes): magic[4] | record count u64 | crc32(bytes 0..12) u32. */
export const SNAPSHOT_TRAILER_MAGIC = 'LSND';
export const SNAPSHOT_TRAILER_BYTES = 16;

/** Where an open's reading stopped: segment `seq` counts up to byte `end` (see above). */
export interface Seal {
  seq: number;
  end: number;
}

/** A parsed file header, whatever its version. */
export interface FileHeader {
  version: 1 | 2;
  /** The header's size in the file (where the first frame starts). */
  bytes: number;
  seq: number;
  /** The creating writer's epoch; 0 for version 1. */
  epoch: number;
  seal: Seal | undefined;
}

/** A version 2 header (what this code always writes). */
export function encodeFileHeader(
  magic: string,
  seq: number,
  epoch = 0,
  seal: Seal | undefined = undefined,
): Buffer {
  const buf = Buffer.alloc(FILE_HEADER_BYTES);
  buf.write(magic, 0, 4, 'latin1');
  buf.writeUInt32LE(FORMAT_VERSION, 4);
  buf.writeBigUInt64LE(BigInt(seq), 8);
  buf.writeBigUInt64LE(BigInt(epoch), 16);
  buf.writeBigUInt64LE(BigInt(seal?.seq ?? 0), 24);
  buf.writeBigUInt64LE(BigInt(seal?.end ?? 0), 32);
  buf.writeUInt32LE(crc32(buf.subarray(0, 40)), 40);
  return buf;
}

/**
 * The size of the header that starts `buf`, from its version field: undefined when fewer than
 * {@link FILE_HEADER_PREFIX_BYTES} bytes are there or the version is not one this code reads.
 */
export function fileHeaderBytes(buf: Uint8Array): number | undefined {
  if (buf.length < FILE_HEADER_PREFIX_BYTES) return undefined;
  const version = Buffer.from(buf.buffer, buf.byteOffset, buf.length).readUInt32LE(4);
  return version === 2 ? FILE_HEADER_BYTES : version === 1 ? FILE_HEADER_V1_BYTES : undefined;
}

/** The header at the start of `buf` (version 1 or 2), or a reason it is not a valid one. */
export function parseFileHeader(buf: Uint8Array, magic: string): FileHeader | { error: string } {
  if (buf.length < FILE_HEADER_PREFIX_BYTES) return { error: 'file header is incomplete' };
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.length);
  if (b.toString('latin1', 0, 4) !== magic) return { error: `bad magic (expected ${magic})` };
  const version = b.readUInt32LE(4);
  const bytes = fileHeaderBytes(b);
  if (bytes === undefined) return { error: `unsupported format version ${version}` };
  if (b.length < bytes) return { error: 'file header is incomplete' };
  if (b.readUInt32LE(bytes - 4) !== crc32(b.subarray(0, bytes - 4))) {
    return { error: 'file header checksum mismatch' };
  }
  const u64 = (at: number, what: string): number | string => {
    const v = b.readBigUInt64LE(at);
    return v > BigInt(Number.MAX_SAFE_INTEGER) ? `${what} ${v} too large` : Number(v);
  };
  const seq = u64(8, 'sequence number');
  if (typeof seq === 'string') return { error: seq };
  if (version === 1) return { version: 1, bytes, seq, epoch: 0, seal: undefined };
  const epoch = u64(16, 'epoch');
  const sealSeq = u64(24, 'seal segment');
  const sealEnd = u64(32, 'seal end');
  for (const v of [epoch, sealSeq, sealEnd]) if (typeof v === 'string') return { error: v };
  const seal =
    (sealSeq as number) > 0 ? { seq: sealSeq as number, end: sealEnd as number } : undefined;
  if (seal !== undefined && seal.seq >= seq) {
    return { error: `seal names segment ${seal.seq}, not before ${seq}` };
  }
  return { version: 2, bytes, seq, epoch: epoch as number, seal };
}

/** A new buffer holding `payload` framed; the payload is copied, so the caller may reuse it. */
export function encodeFrame(payload: Uint8Array, back: number): Buffer {
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  frame.writeUInt32LE(payload.length, 0);
  frame.writeUInt32LE(back, 4);
  frame.set(payload, FRAME_HEADER_BYTES);
  const crc = crc32(frame.subarray(FRAME_HEADER_BYTES), crc32(frame.subarray(0, 8)));
  frame.writeUInt32LE(crc, 8);
  return frame;
}

export interface Frame {
  /** Offset of the frame (its header) in the buffer. */
  offset: number;
  /** Offset just past the frame: where the next one starts. */
  next: number;
  back: number;
  payload: Buffer;
}

/**
 * The intact frame at `offset` of `buf`, or undefined when there is none: fewer bytes than a
 * header left, a length beyond `maxPayload` or past the end, or a checksum mismatch. The
 * payload is a view into `buf`, not a copy.
 */
export function parseFrame(buf: Buffer, offset: number, maxPayload: number): Frame | undefined {
  if (buf.length - offset < FRAME_HEADER_BYTES) return undefined;
  const length = buf.readUInt32LE(offset);
  const start = offset + FRAME_HEADER_BYTES;
  if (length > maxPayload || length > buf.length - start) return undefined;
  const crc = crc32(buf.subarray(start, start + length), crc32(buf.subarray(offset, offset + 8)));
  if (crc !== buf.readUInt32LE(offset + 8)) return undefined;
  return {
    offset,
    next: start + length,
    back: buf.readUInt32LE(offset + 4),
    payload: buf.subarray(start, start + length),
  };
}

export function encodeSnapshotTrailer(count: number): Buffer {
  const buf = Buffer.alloc(SNAPSHOT_TRAILER_BYTES);
  buf.write(SNAPSHOT_TRAILER_MAGIC, 0, 4, 'latin1');
  buf.writeBigUInt64LE(BigInt(count), 4);
  buf.writeUInt32LE(crc32(buf.subarray(0, 12)), 12);
  return buf;
}

/** The record count of a snapshot trailer, or undefined if `buf` is not one. */
export function parseSnapshotTrailer(buf: Buffer): number | undefined {
  if (buf.length !== SNAPSHOT_TRAILER_BYTES) return undefined;
  if (buf.toString('latin1', 0, 4) !== SNAPSHOT_TRAILER_MAGIC) return undefined;
  if (buf.readUInt32LE(12) !== crc32(buf.subarray(0, 12))) return undefined;
  return Number(buf.readBigUInt64LE(4));
}
