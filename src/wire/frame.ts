import { ProtocolError } from '../core/errors.js';

/**
 * Frames of the locksmith protocol: a 4-byte big-endian length `n`, then `n` bytes of payload
 * (one MessagePack value). `n` is at least 1 and at most the receiver's frame limit; a length
 * outside that range is a protocol error, found from the 4 length bytes alone, before any of
 * the payload is buffered, so an oversized frame can never make the receiver allocate it.
 */
export const FRAME_HEADER_BYTES = 4;

/** The default frame limit: one cell value (10 MiB) plus room for the rest of a request. */
export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;

/** The largest limit either side accepts to configure (the header's range, kept sane). */
export const MAX_FRAME_LIMIT_BYTES = 256 * 1024 * 1024;

/** Prefixes `payload` with its length. */
export function frame(payload: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  out.writeUInt32BE(payload.length, 0);
  out.set(payload, FRAME_HEADER_BYTES);
  return out;
}

/**
 * Cuts a byte stream into frame payloads. `push()` takes chunks as they arrive and returns the
 * payloads they completed (views of the received memory, valid until the caller lets them
 * go). Once it has thrown, the stream is unusable: the connection must be closed, since the
 * receiver no longer knows where the next frame starts.
 */
export class FrameReader {
  readonly #maxFrameBytes: number;
  #chunks: Buffer[] = [];
  /** Bytes of `#chunks[0]` already taken: reading at an offset makes no view per header. */
  #offset = 0;
  #buffered = 0;
  /** Payload length of the frame being received, once its header is complete. */
  #need = -1;
  #failed = false;

  constructor(maxFrameBytes = DEFAULT_MAX_FRAME_BYTES) {
    this.#maxFrameBytes = maxFrameBytes;
  }

  /** Bytes received but not yet returned as a payload (for limits and diagnostics). */
  get buffered(): number {
    return this.#buffered;
  }

  push(chunk: Buffer): Buffer[] {
    if (this.#failed) throw new ProtocolError('The frame stream already failed');
    if (chunk.length === 0) return [];
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    const out: Buffer[] = [];
    for (;;) {
      if (this.#need < 0) {
        if (this.#buffered < FRAME_HEADER_BYTES) break;
        const n = this.#takeLength();
        if (n === 0 || n > this.#maxFrameBytes) {
          this.#failed = true;
          this.#chunks = [];
          this.#offset = 0;
          throw new ProtocolError(
            n === 0
              ? 'Received an empty frame (length 0)'
              : `Received a frame of ${n} bytes; the limit is ${this.#maxFrameBytes}`,
          );
        }
        this.#need = n;
      }
      if (this.#buffered < this.#need) break;
      out.push(this.#take(this.#need));
      this.#need = -1;
    }
    return out;
  }

  /** Removes the 4 length bytes of a header and returns the length. */
  #takeLength(): number {
    const first = this.#chunks[0] as Buffer;
    if (first.length - this.#offset >= FRAME_HEADER_BYTES) {
      const n = first.readUInt32BE(this.#offset);
      this.#skip(first, FRAME_HEADER_BYTES);
      return n;
    }
    return this.#take(FRAME_HEADER_BYTES).readUInt32BE(0);
  }

  /** Removes and returns the first `n` buffered bytes (a view when one chunk holds them). */
  #take(n: number): Buffer {
    const first = this.#chunks[0] as Buffer;
    const start = this.#offset;
    if (first.length - start >= n) {
      const out = start === 0 && first.length === n ? first : first.subarray(start, start + n);
      this.#skip(first, n);
      return out;
    }
    this.#buffered -= n;
    const out = Buffer.allocUnsafe(n);
    let at = 0;
    while (at < n) {
      const chunk = this.#chunks[0] as Buffer;
      const from = this.#offset;
      const part = Math.min(chunk.length - from, n - at);
      chunk.copy(out, at, from, from + part);
      at += part;
      if (from + part === chunk.length) {
        this.#chunks.shift();
        this.#offset = 0;
      } else {
        this.#offset = from + part;
      }
    }
    return out;
  }

  /** Drops `n` bytes of `first` (the first chunk, which holds at least that many). */
  #skip(first: Buffer, n: number): void {
    this.#buffered -= n;
    this.#offset += n;
    if (this.#offset === first.length) {
      this.#chunks.shift();
      this.#offset = 0;
    }
  }
}
