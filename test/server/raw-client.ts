import { connect, type Socket } from 'node:net';
import { decode, encode } from '../../src/wire/codec.js';
import { FrameReader, frame } from '../../src/wire/frame.js';

/**
 * A bare protocol client for tests: sends exactly the bytes it is told to and records every
 * message the server sends, so tests can speak the protocol wrong on purpose, go silent like a
 * paused process, or drop the connection without the real client's courtesy.
 */
export class RawClient {
  readonly socket: Socket;
  readonly messages: unknown[][] = [];
  closed = false;
  readonly #reader = new FrameReader(64 * 1024 * 1024);
  #waiters: (() => void)[] = [];
  #nextId = 1;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on('data', (chunk: Buffer) => {
      for (const payload of this.#reader.push(chunk))
        this.messages.push(decode(payload) as unknown[]);
      this.#wake();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.closed = true;
      this.#wake();
    });
  }

  static open(port: number): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port }, () => resolve(new RawClient(socket)));
      socket.once('error', reject);
    });
  }

  /** Opens a raw client and completes the handshake; resolves with the WELCOME's fields. */
  static async session(
    port: number,
    hello: Record<string, unknown> = {},
  ): Promise<{ raw: RawClient; welcome: Record<string, unknown> }> {
    const raw = await RawClient.open(port);
    raw.send([0, 1, hello]);
    const welcome = await raw.next((m) => m[0] === 0 || (m[0] === 2 && m[1] === 0));
    if (welcome[0] !== 0) throw new Error(`handshake refused: ${JSON.stringify(welcome)}`);
    return { raw, welcome: welcome[2] as Record<string, unknown> };
  }

  send(message: unknown[]): void {
    this.socket.write(frame(encode(message)));
  }

  sendBytes(bytes: Uint8Array): void {
    this.socket.write(bytes);
  }

  /** Sends a CALL and resolves with its answer: the RESULT value, or throws `{code, message}`. */
  async call(method: string, args: unknown[]): Promise<unknown> {
    const id = this.#nextId++;
    this.send([1, id, method, args]);
    const answer = await this.next((m) => (m[0] === 1 || m[0] === 2) && m[1] === id);
    if (answer[0] === 2) throw Object.assign(new Error(String(answer[3])), { code: answer[2] });
    return answer[2];
  }

  /** The first message (already received or coming) that matches; consumed. */
  async next(match: (m: unknown[]) => boolean, timeoutMs = 10_000): Promise<unknown[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const at = this.messages.findIndex(match);
      if (at >= 0) return this.messages.splice(at, 1)[0] as unknown[];
      if (this.closed)
        throw new Error(`connection closed; messages: ${JSON.stringify(this.messages)}`);
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(
          `no matching message within ${timeoutMs} ms; got ${JSON.stringify(this.messages)}`,
        );
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Resolves once the server closed the connection. */
  async whenClosed(timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed) {
      if (Date.now() > deadline) throw new Error('the server did not close the connection');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 100);
        this.#waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  destroy(): void {
    this.socket.destroy();
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }
}
