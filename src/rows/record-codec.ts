import { crc32 } from './crc32.js';

/**
 * The byte layout shared by log segments and snapshot files. All integers little-endian except
 * the magics, which are ASCII so `head -c4` shows what a file is.
 *
 * File header (20 bytes): magic[4] | version u32 | seq u64 | crc32(bytes 0..16) u32.
 *
 * Record frame (12-byte header + payload):
 *   length u32 | back u32 | crc32(length, back, payload) u32 | payload[length]
 * `back` is the distance from this frame back to the first frame of the write batch it was
 * written in (0 for the first frame of a batch; always 0 in snapshots). Recovery uses it to
 * tell a torn final batch (never acknowledged, dropped) from damage to an earlier, completed
 * batch (an error): see `log-segment.ts`. The checksum covers the length, so a damaged length
 * field cannot make a frame swallow its neighbours unnoticed.
 */
export const FORMAT_VERSION = 1;
export const FILE_HEADER_BYTES = 20;
export const FRAME_HEADER_BYTES = 12;
/** Frame lengths and `back` distances are u32. */
export const MAX_FRAME_FIELD = 0xffff_ffff;

export const SEGMENT_MAGIC = 'LSWL';
export const SNAPSHOT_MAGIC = 'LSSN';
/** Snapshot trailer (16 bytes): magic[4] | record count u64 | crc32(bytes 0..12) u32. */
export const SNAPSHOT_TRAILER_MAGIC = 'LSND';
export const SNAPSHOT_TRAILER_BYTES = 16;

export function encodeFileHeader(magic: string, seq: number): Buffer {
  const buf = Buffer.alloc(FILE_HEADER_BYTES);
  buf.write(magic, 0, 4, 'latin1');
  buf.writeUInt32LE(FORMAT_VERSION, 4);
  buf.writeBigUInt64LE(BigInt(seq), 8);
  buf.writeUInt32LE(crc32(buf.subarray(0, 16)), 16);
  return buf;
}

/** The header's sequence number, or a reason it is not a valid header of this kind. */
export function parseFileHeader(
  buf: Uint8Array,
  magic: string,
): { seq: number } | { error: string } {
  if (buf.length < FILE_HEADER_BYTES) return { error: 'file header is incomplete' };
  const b = Buffer.from(buf.buffer, buf.byteOffset, FILE_HEADER_BYTES);
  if (b.toString('latin1', 0, 4) !== magic) return { error: `bad magic (expected ${magic})` };
  if (b.readUInt32LE(16) !== crc32(b.subarray(0, 16))) {
    return { error: 'file header checksum mismatch' };
  }
  const version = b.readUInt32LE(4);
  if (version !== FORMAT_VERSION) return { error: `unsupported format version ${version}` };
  const seq = b.readBigUInt64LE(8);
  if (seq > BigInt(Number.MAX_SAFE_INTEGER)) return { error: `sequence number ${seq} too large` };
  return { seq: Number(seq) };
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
