import type { Duplex } from 'node:stream';
import { LockIOError, ProtocolError } from '../core/errors.js';

/** The peer closed the stream (Java's `read()` returning -1). */
export class EndOfStreamError extends ProtocolError {}

/** Above this many unread bytes the stream is paused, so a flooding peer cannot grow memory. */
const HIGH_WATER_MARK = 64 * 1024;
const NO_BYTES = Buffer.alloc(0);

/**
 * One byte at a time over a stream (a `net.Socket`, usually), as promises: the verify
 * protocol's `InputStream.read()` and `OutputStream.write(int)`.
 *
 * - `readByte()` resolves with the next byte (0..255). After the peer's end it rejects with
 *   {@link EndOfStreamError}; after a stream error with a {@link LockIOError} whose cause is
 *   the error. Either outcome is sticky. One read at a time.
 * - `writeByte()` resolves once the byte is queued without exceeding the stream's buffer (it
 *   waits for `drain` otherwise); write failures surface on the next read.
 *
 * The channel listens for `error` on the stream, so an unread or closed peer can never crash
 * the process. Use {@link ByteChannel.of}: a stream has exactly one channel, and everyone
 * reading from it shares that channel's buffer.
 */
export class ByteChannel {
  static readonly #channels = new WeakMap<Duplex, ByteChannel>();

  /** The channel of `stream`, created (and attached) on first use. */
  static of(stream: Duplex): ByteChannel {
    let channel = ByteChannel.#channels.get(stream);
    if (channel === undefined) {
      channel = new ByteChannel(stream);
      ByteChannel.#channels.set(stream, channel);
    }
    return channel;
  }

  readonly #stream: Duplex;
  #buffer: Buffer = NO_BYTES;
  #offset = 0;
  #reader: { resolve(byte: number): void; reject(err: Error): void } | undefined;
  #failure: Error | undefined;

  private constructor(stream: Duplex) {
    this.#stream = stream;
    stream.on('data', (chunk: Buffer | string) =>
      this.#onData(typeof chunk === 'string' ? Buffer.from(chunk) : chunk),
    );
    stream.on('end', () =>
      this.#finish(
        new EndOfStreamError('Unexpected end of stream: the peer closed the connection'),
      ),
    );
    stream.on('error', (err: Error) =>
      this.#finish(new LockIOError(`Connection failed: ${err.message}`, { cause: err })),
    );
    stream.on('close', () =>
      this.#finish(new EndOfStreamError('Unexpected end of stream: the connection was closed')),
    );
  }

  /** True once the peer ended or the stream failed (buffered bytes may remain). */
  get finished(): boolean {
    return this.#failure !== undefined;
  }

  readByte(): Promise<number> {
    if (this.#offset < this.#buffer.length) return Promise.resolve(this.#take());
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    if (this.#reader !== undefined)
      return Promise.reject(new ProtocolError('Concurrent reads on one byte channel'));
    return new Promise((resolve, reject) => {
      this.#reader = { resolve, reject };
    });
  }

  writeByte(byte: number): Promise<void> {
    const stream = this.#stream;
    if (stream.destroyed || stream.writableEnded) {
      return Promise.reject(
        this.#failure ?? new EndOfStreamError('Cannot write: the connection is closed'),
      );
    }
    if (stream.write(Uint8Array.of(byte))) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        stream.off('drain', done);
        stream.off('close', done);
        resolve();
      };
      stream.on('drain', done);
      stream.on('close', done);
    });
  }

  /** Half-closes: the peer reads EOF once everything written so far has been sent. */
  end(): void {
    if (!this.#stream.writableEnded) this.#stream.end();
  }

  /** Closes both directions at once; pending and later reads reject. */
  destroy(): void {
    this.#stream.destroy();
  }

  #take(): number {
    const byte = this.#buffer.readUInt8(this.#offset++);
    if (this.#offset === this.#buffer.length) {
      this.#buffer = NO_BYTES;
      this.#offset = 0;
    }
    if (
      this.#stream.isPaused() &&
      this.#buffer.length - this.#offset < HIGH_WATER_MARK &&
      !this.#stream.destroyed
    ) {
      this.#stream.resume();
    }
    return byte;
  }

  #onData(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.#buffer =
      this.#offset === this.#buffer.length
        ? chunk
        : Buffer.concat([this.#buffer.subarray(this.#offset), chunk]);
    this.#offset = 0;
    const reader = this.#reader;
    if (reader !== undefined) {
      this.#reader = undefined;
      reader.resolve(this.#take());
    }
    if (this.#buffer.length - this.#offset >= HIGH_WATER_MARK) this.#stream.pause();
  }

  #finish(failure: Error): void {
    this.#failure ??= failure;
    const reader = this.#reader;
    // A pending read means the buffer is empty, so the failure is what it gets.
    if (reader !== undefined) {
      this.#reader = undefined;
      reader.reject(this.#failure);
    }
  }
}
