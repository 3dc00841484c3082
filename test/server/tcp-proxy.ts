import { type AddressInfo, createServer, connect as netConnect, type Socket } from 'node:net';

/**
 * A TCP proxy to `127.0.0.1:targetPort` for tests that cut a client's connection without
 * killing the client: {@link cut} destroys every proxied connection (both sides), while the
 * proxy keeps listening, so the client's reconnect goes through again.
 */
export class TcpProxy implements AsyncDisposable {
  readonly #server = createServer();
  readonly #sockets = new Set<Socket>();
  /** Connections proxied so far. */
  accepted = 0;

  private constructor(targetPort: number) {
    this.#server.on('connection', (inbound) => {
      this.accepted++;
      const outbound = netConnect({ host: '127.0.0.1', port: targetPort });
      for (const [a, b] of [
        [inbound, outbound],
        [outbound, inbound],
      ] as const) {
        this.#sockets.add(a);
        a.on('error', () => undefined);
        a.on('close', () => {
          this.#sockets.delete(a);
          b.destroy();
        });
        a.pipe(b);
      }
    });
  }

  static async start(targetPort: number): Promise<TcpProxy> {
    const proxy = new TcpProxy(targetPort);
    await new Promise<void>((resolve) => proxy.#server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  /** Destroys every proxied connection now. */
  cut(): void {
    for (const socket of [...this.#sockets]) socket.destroy();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
