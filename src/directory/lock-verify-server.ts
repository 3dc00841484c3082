import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import {
  InvalidArgumentError,
  LockIOError,
  type LocksmithError,
  LockViolationError,
  ProtocolError,
} from '../core/errors.js';
import { ByteChannel, EndOfStreamError } from './byte-channel.js';
import { VerifyingLockFactory } from './verifying-lock-factory.js';

export interface LockVerifyServerOptions {
  /** The number of clients that take part; the run starts when all of them said who they are. */
  clients: number;
  /** The address to listen on (default `127.0.0.1`: the protocol has no authentication). */
  host?: string | undefined;
  /** Default 0: a free port, reported by {@link LockVerifyServer.port}. */
  port?: number | undefined;
  /** Give up when no client connected or registered for this long before the start (30 s). */
  acceptTimeoutMs?: number | undefined;
  /** Aborting stops the server as {@link LockVerifyServer.close} does. */
  signal?: AbortSignal | undefined;
  /** Called once, when the start signal goes out, with the clients' ids. */
  onStart?: ((ids: readonly number[]) => void) | undefined;
  /** Called for each failure as it is detected (violations first of all). */
  onFailure?: ((failure: LocksmithError) => void) | undefined;
}

export interface LockVerifyResult {
  /** No violation, no protocol error, no timeout: every client ran and left cleanly. */
  ok: boolean;
  /** The registered client ids, in the order they registered. */
  clients: number[];
  /** Acquisitions and releases the server accepted. */
  acquisitions: number;
  releases: number;
  /**
   * What went wrong, in order: {@link LockViolationError} for two holders or a release by a
   * non-holder, {@link ProtocolError} for a broken client, {@link LockIOError} otherwise.
   */
  failures: LocksmithError[];
}

/** Free (Lucene's `lockedID == -1`). */
const FREE = -1;
/** Sent to every client once all of them registered. */
export const START_GUN_SIGNAL = 43;
const DEFAULT_ACCEPT_TIMEOUT_MS = 30_000;
const MAX_ID = 255;

/**
 * Lucene's `LockVerifyServer`, byte for byte, so Lucene's `LockStressTest` and ours can be
 * verified by either server.
 *
 * Each client connects and sends its id (one byte). Once `clients` ids arrived, the server
 * sends {@link START_GUN_SIGNAL} to all of them and stops listening. Then each command byte
 * is checked against the single holder the server knows of:
 * - {@link VerifyingLockFactory.MSG_LOCK_ACQUIRED} while someone holds the lock: violation
 *   "id X got lock, but Y already holds the lock";
 * - {@link VerifyingLockFactory.MSG_LOCK_RELEASED} from a client that does not hold it:
 *   violation "id X released the lock, but Y is the one holding the lock" (Y is -1 when free);
 * - any other byte: "Unrecognized command: N";
 * - otherwise the state is updated and the byte echoed.
 *
 * After the first failure the server is failed for good (Lucene's `lockedID = -2`): the
 * offending client's connection is closed at once, every other client is hung up on at its
 * next command, so each of them sees EOF and stops. {@link done} resolves when every client
 * has gone, with the verdict; it never rejects.
 *
 * Differences from Lucene, all on the safe side: an unrecognized command or a client that
 * leaves while holding the lock or breaks its connection also fails the run (in Lucene it
 * only ends that client's thread, and its server exits 0 even after a violation); a duplicate
 * id fails the run (it would make the report ambiguous); a connection that closes before
 * sending its id does not count as a client (a port probe cannot ruin a run); the start
 * signal waits for all ids, not just all connections.
 */
export class LockVerifyServer {
  readonly host: string;
  readonly port: number;
  /** The verdict, once every client has disconnected (or the server was closed). */
  readonly done: Promise<LockVerifyResult>;

  readonly #server: Server;
  readonly #expected: number;
  readonly #acceptTimeoutMs: number;
  readonly #onStart: ((ids: readonly number[]) => void) | undefined;
  readonly #onFailure: ((failure: LocksmithError) => void) | undefined;
  readonly #pending = new Set<Socket>();
  readonly #registered = new Map<number, Socket>();
  readonly #active = new Set<Socket>();
  readonly #failures: LocksmithError[] = [];
  #resolveDone: (result: LockVerifyResult) => void = () => {};
  #acceptTimer: NodeJS.Timeout | undefined;
  #started = false;
  #failed = false;
  #finished = false;
  #lockedId = FREE;
  #acquisitions = 0;
  #releases = 0;

  private constructor(server: Server, options: LockVerifyServerOptions, address: AddressInfo) {
    this.#server = server;
    this.#expected = options.clients;
    this.#acceptTimeoutMs = options.acceptTimeoutMs ?? DEFAULT_ACCEPT_TIMEOUT_MS;
    this.#onStart = options.onStart;
    this.#onFailure = options.onFailure;
    this.host = address.address;
    this.port = address.port;
    this.done = new Promise((resolve) => {
      this.#resolveDone = resolve;
    });
  }

  /** Starts listening; resolves once the port is bound. */
  static async listen(options: LockVerifyServerOptions): Promise<LockVerifyServer> {
    const {
      clients,
      host = '127.0.0.1',
      port = 0,
      acceptTimeoutMs = DEFAULT_ACCEPT_TIMEOUT_MS,
      signal,
    } = options ?? {};
    if (!Number.isInteger(clients) || clients < 1 || clients > MAX_ID + 1) {
      throw new InvalidArgumentError(
        `clients must be an integer from 1 to ${MAX_ID + 1} (one byte of id each), got ${String(clients)}`,
      );
    }
    if (typeof host !== 'string' || host.length === 0) {
      throw new InvalidArgumentError(`host must be a non-empty string, got ${String(host)}`);
    }
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      throw new InvalidArgumentError(
        `port must be an integer from 0 to 65535, got ${String(port)}`,
      );
    }
    if (typeof acceptTimeoutMs !== 'number' || !(acceptTimeoutMs > 0)) {
      throw new InvalidArgumentError(
        `acceptTimeoutMs must be a positive number, got ${String(acceptTimeoutMs)}`,
      );
    }
    if (signal?.aborted) {
      throw new InvalidArgumentError('The signal is already aborted');
    }
    const server = createServer({ noDelay: true });
    // Room for every client plus a few strays (probes, broken clients) before the start.
    server.maxConnections = clients * 2 + 16;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host, port, exclusive: true }, () => {
        server.off('error', reject);
        resolve();
      });
    }).catch((err: unknown) => {
      throw new LockIOError(`Cannot listen on ${host}:${port}: ${(err as Error).message}`, {
        cause: err,
      });
    });
    const verifier = new LockVerifyServer(server, options, server.address() as AddressInfo);
    verifier.#attach(signal);
    return verifier;
  }

  /** `host:port`, with IPv6 hosts in brackets. */
  get address(): string {
    return this.host.includes(':') ? `[${this.host}]:${this.port}` : `${this.host}:${this.port}`;
  }

  /**
   * Stops the run now: closes the listener and every connection. If the run had not ended,
   * the verdict records that it was cut short.
   */
  async close(): Promise<LockVerifyResult> {
    if (!this.#finished) {
      this.#fail(
        new LockIOError(
          `Lock verify server on ${this.address} was closed before its clients finished`,
        ),
      );
      for (const socket of [...this.#pending, ...this.#active]) socket.destroy();
      this.#maybeFinish();
    }
    return this.done;
  }

  #attach(signal: AbortSignal | undefined): void {
    const server = this.#server;
    server.on('connection', (socket) => this.#onConnection(socket));
    server.on('error', (err) => {
      // Accept failures (EMFILE, …) after listening: the run cannot be trusted any more.
      this.#fail(new LockIOError(`Lock verify server failed: ${err.message}`, { cause: err }));
      this.#maybeFinish();
    });
    this.#armAcceptTimer();
    if (signal !== undefined) {
      const onAbort = () => {
        void this.close();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      void this.done.then(() => signal.removeEventListener('abort', onAbort));
    }
  }

  #armAcceptTimer(): void {
    clearTimeout(this.#acceptTimer);
    this.#acceptTimer = setTimeout(() => {
      this.#fail(
        new LockIOError(
          `Accept timed out after ${this.#acceptTimeoutMs} ms: ${this.#registered.size} of ${this.#expected} clients registered`,
        ),
      );
      for (const socket of this.#pending) socket.destroy();
      this.#maybeFinish();
    }, this.#acceptTimeoutMs);
    this.#acceptTimer.unref();
  }

  #onConnection(socket: Socket): void {
    const channel = ByteChannel.of(socket); // handles 'error' from here on
    if (this.#started || this.#failed) {
      socket.destroy();
      return;
    }
    this.#pending.add(socket);
    this.#armAcceptTimer();
    channel.readByte().then(
      (id) => this.#register(socket, id),
      () => {
        // Left before saying who it is: not a client.
        this.#pending.delete(socket);
        socket.destroy();
        this.#maybeFinish();
      },
    );
  }

  #register(socket: Socket, id: number): void {
    this.#pending.delete(socket);
    if (this.#started || this.#failed) {
      socket.destroy();
      this.#maybeFinish();
      return;
    }
    if (this.#registered.has(id)) {
      this.#fail(new ProtocolError(`Duplicate client id ${id}: every client needs its own id`));
      socket.destroy();
      for (const other of [...this.#pending, ...this.#registered.values()]) other.destroy();
      this.#maybeFinish();
      return;
    }
    this.#registered.set(id, socket);
    this.#armAcceptTimer();
    if (this.#registered.size === this.#expected) this.#fireStartingGun();
  }

  #fireStartingGun(): void {
    this.#started = true;
    clearTimeout(this.#acceptTimer);
    this.#server.close();
    for (const socket of this.#pending) socket.destroy();
    this.#pending.clear();
    try {
      this.#onStart?.([...this.#registered.keys()]);
    } catch {
      // A reporting callback must not stop the run.
    }
    for (const [id, socket] of this.#registered) {
      this.#active.add(socket);
      void this.#serve(id, socket);
    }
  }

  /** One client's command loop (one of Lucene's per-client threads). */
  async #serve(id: number, socket: Socket): Promise<void> {
    const channel = ByteChannel.of(socket);
    try {
      await channel.writeByte(START_GUN_SIGNAL);
      for (;;) {
        const command = await channel.readByte();
        if (this.#failed) return;
        const failure = this.#apply(id, command);
        if (failure !== undefined) {
          this.#fail(failure);
          return;
        }
        await channel.writeByte(command);
      }
    } catch (err) {
      this.#disconnected(id, err);
    } finally {
      socket.destroy();
      this.#active.delete(socket);
      this.#maybeFinish();
    }
  }

  /** A client's connection ended: cleanly when it hung up without holding the lock. */
  #disconnected(id: number, err: unknown): void {
    if (this.#failed) return;
    if (this.#lockedId === id) {
      this.#fail(new ProtocolError(`id ${id} disconnected while holding the lock`, { cause: err }));
    } else if (!(err instanceof EndOfStreamError)) {
      this.#fail(
        new LockIOError(`Connection to id ${id} failed: ${(err as Error).message}`, { cause: err }),
      );
    }
  }

  /** Checks one command against the state and applies it; returns the failure, if any. */
  #apply(id: number, command: number): LocksmithError | undefined {
    switch (command) {
      case VerifyingLockFactory.MSG_LOCK_ACQUIRED:
        if (this.#lockedId !== FREE) {
          return new LockViolationError(
            `id ${id} got lock, but ${this.#lockedId} already holds the lock`,
          );
        }
        this.#lockedId = id;
        this.#acquisitions++;
        return undefined;
      case VerifyingLockFactory.MSG_LOCK_RELEASED:
        if (this.#lockedId !== id) {
          return new LockViolationError(
            `id ${id} released the lock, but ${this.#lockedId} is the one holding the lock`,
          );
        }
        this.#lockedId = FREE;
        this.#releases++;
        return undefined;
      default:
        return new ProtocolError(`Unrecognized command: ${command}`);
    }
  }

  #fail(failure: LocksmithError): void {
    this.#failures.push(failure);
    this.#failed = true;
    try {
      this.#onFailure?.(failure);
    } catch {
      // A reporting callback must not stop the verdict.
    }
  }

  #maybeFinish(): void {
    if (this.#finished) return;
    const waitingForClients = !this.#started && !this.#failed;
    if (waitingForClients || this.#active.size > 0 || (!this.#started && this.#pending.size > 0))
      return;
    this.#finished = true;
    clearTimeout(this.#acceptTimer);
    this.#server.close();
    for (const socket of this.#registered.values()) socket.destroy();
    this.#resolveDone({
      ok: this.#failures.length === 0,
      clients: [...this.#registered.keys()],
      acquisitions: this.#acquisitions,
      releases: this.#releases,
      failures: [...this.#failures],
    });
  }
}
