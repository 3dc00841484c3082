import { type AddressInfo, createServer, type Socket } from 'node:net';
import { decode, encode } from '../../src/wire/codec.js';
import { FrameReader, frame } from '../../src/wire/frame.js';

/** One client connection to a {@link ScriptedPeer}. */
export interface PeerConnection {
  /** Which connection this is (1 for the first the peer accepted). */
  readonly n: number;
  send(message: unknown[]): void;
  close(): void;
}

/** What the peer does with each message a client sends. */
export type PeerScript = (connection: PeerConnection, message: unknown[]) => void;

/**
 * A server end of the protocol that does only what its script says: frames (4-byte length +
 * MessagePack) in and out, nothing else. For the parts of the protocol a real server of this
 * version cannot be made to say yet (a slave's `NOT_MASTER` naming its master, a master of
 * another epoch, a master stepping down): it tests the client's side of the contract, it does
 * not stand in for the database. Every message received is kept.
 */
export class ScriptedPeer implements AsyncDisposable {
  readonly #server = createServer();
  readonly #sockets = new Set<Socket>();
  /** Every message received, with the number of its connection. */
  readonly received: { n: number; message: unknown[] }[] = [];
  accepted = 0;
  script: PeerScript;

  private constructor(script: PeerScript) {
    this.script = script;
    this.#server.on('connection', (socket) => {
      const n = ++this.accepted;
      this.#sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => this.#sockets.delete(socket));
      const reader = new FrameReader(16 * 1024 * 1024);
      const connection: PeerConnection = {
        n,
        send: (message) => {
          if (!socket.destroyed) socket.write(frame(encode(message)));
        },
        close: () => socket.end(),
      };
      socket.on('data', (chunk: Buffer) => {
        for (const payload of reader.push(chunk)) {
          const message = decode(payload) as unknown[];
          this.received.push({ n, message });
          this.script(connection, message);
        }
      });
    });
  }

  static async start(script: PeerScript): Promise<ScriptedPeer> {
    const peer = new ScriptedPeer(script);
    await new Promise<void>((resolve) => peer.#server.listen(0, '127.0.0.1', resolve));
    return peer;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  get url(): string {
    return `locksmith://127.0.0.1:${this.port}`;
  }

  /** The HELLOs received, in order. */
  get hellos(): Record<string, unknown>[] {
    return this.received
      .filter((r) => r.message[0] === 0)
      .map((r) => r.message[2] as Record<string, unknown>);
  }

  /** Sends `message` on every open connection. */
  broadcast(message: unknown[]): void {
    for (const socket of this.#sockets) if (!socket.destroyed) socket.write(frame(encode(message)));
  }

  /** Destroys every open connection; the peer keeps listening. */
  cut(): void {
    for (const socket of this.#sockets) socket.destroy();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/** A WELCOME as a server of `epoch` sends it (role master), for session `session`. */
export function welcome(
  session: string,
  epoch: number,
  extra: Record<string, unknown> = {},
): unknown[] {
  return [
    0,
    1,
    {
      session,
      resumed: false,
      sessionLeaseMs: 10_000,
      lockLeaseMs: 60_000,
      rowLockWaitMs: 30_000,
      maxFrameBytes: 16 * 1024 * 1024,
      maxInFlight: 1024,
      server: 'scripted peer',
      locks: [],
      epoch,
      role: 'master',
      ...extra,
    },
  ];
}

/** A slave's refusal of a HELLO: `NOT_MASTER`, naming `master` when given. */
export function notMaster(master?: unknown): unknown[] {
  return [
    2,
    0,
    'NOT_MASTER',
    'This server is a slave',
    true,
    master === undefined ? {} : { master },
  ];
}
