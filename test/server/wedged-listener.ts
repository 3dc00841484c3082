import { type AddressInfo, createServer, type Socket } from 'node:net';

/**
 * A server that accepts TCP connections and never writes a byte, as a paused or wedged process
 * does (the kernel completes the connection; nobody reads it). It reads and drops what it is
 * sent, so the client's writes never block. It keeps count of the connections it accepted and
 * of those the client has since closed.
 */
export class WedgedListener implements AsyncDisposable {
  readonly #server = createServer();
  readonly #sockets = new Set<Socket>();
  accepted = 0;
  /** Connections the client closed (this end never closes one). */
  closedByClient = 0;

  private constructor() {
    this.#server.on('connection', (socket) => {
      this.accepted++;
      this.#sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('data', () => undefined);
      socket.on('close', () => {
        if (this.#sockets.delete(socket)) this.closedByClient++;
      });
    });
  }

  static async start(): Promise<WedgedListener> {
    const listener = new WedgedListener();
    await new Promise<void>((resolve) => listener.#server.listen(0, '127.0.0.1', resolve));
    return listener;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  get label(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** `locksmith://` by default; `locksmiths://` for a client that expects TLS. */
  url(scheme: 'locksmith' | 'locksmiths' = 'locksmith'): string {
    return `${scheme}://${this.label}`;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    for (const socket of this.#sockets) {
      this.#sockets.delete(socket);
      socket.destroy();
    }
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
