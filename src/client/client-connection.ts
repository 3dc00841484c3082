import { EventEmitter } from 'node:events';
import { connect as netConnect, type Socket } from 'node:net';
import { type ConnectionOptions as TlsOptions, connect as tlsConnect } from 'node:tls';
import { type Clock, systemClock } from '../core/clock.js';
import {
  AbortedError,
  ConnectionLostError,
  LockLostError,
  type LocksmithError,
  ProtocolError,
} from '../core/errors.js';
import { decode, encode } from '../wire/codec.js';
import { DEFAULT_MAX_FRAME_BYTES, FrameReader, frame } from '../wire/frame.js';
import {
  ClientKind,
  type HelloOptions,
  type Method,
  PROTOCOL_VERSION,
  parseServerMessage,
  ServerKind,
} from '../wire/messages.js';
import { fromWireError } from '../wire/wire-error.js';

export interface ClientConnectionOptions {
  host: string;
  port: number;
  token?: string | undefined;
  /** TLS options (`ca`, `servername`, ...): the connection then speaks TLS. */
  tls?: TlsOptions | undefined;
  /** The session's lease; 0 or absent: the server's default. */
  sessionLeaseMs?: number | undefined;
  releaseOnDisconnect?: boolean | undefined;
  client?: string | undefined;
  /** Default timeout of a call's round trip (a lock call adds its wait). Default 30 s. */
  callTimeoutMs: number;
  /** How long `connect()` keeps trying before it fails. Default 10 s. */
  connectTimeoutMs: number;
  /** Reconnect backoff: first delay and cap (default 50 ms, 2 s), with jitter. */
  reconnectMinMs: number;
  reconnectMaxMs: number;
  clock?: Clock | undefined;
}

/** The session as the server granted it. */
export interface SessionInfo {
  id: string;
  leaseMs: number;
  lockLeaseMs: number;
  rowLockWaitMs: number;
  maxInFlight: number;
  server: string;
}

export interface CallOptions {
  signal?: AbortSignal | undefined;
  /** Overrides the connection's `callTimeoutMs` for this call (milliseconds). */
  timeoutMs?: number | undefined;
  /** The call can be sent again after a lost connection (a read, a ping). */
  idempotent?: boolean | undefined;
}

interface Pending {
  readonly method: Method;
  readonly args: unknown[];
  readonly options: CallOptions;
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: LocksmithError) => void;
  /** Monotonic time the call was last sent; a reply proves the session was alive then. */
  sentAt: number;
  timer: NodeJS.Timeout | undefined;
  settled: boolean;
  onAbort: (() => void) | undefined;
}

export interface ClientConnectionEvents {
  /** The server pushed a notice (`lockLost`: [lockId, code, message]). */
  notice: [name: string, data: unknown];
  /** The session and everything it held is gone (expired, closed, server restarted). */
  sessionLost: [reason: LockLostError];
  /** A new connection carries the session again; `resumed` false: a new session. */
  connected: [info: SessionInfo, resumed: boolean, heldLocks: [string, string][]];
  /** The connection dropped; the client is reconnecting. */
  disconnected: [reason: LocksmithError];
}

/**
 * The client's side of the protocol: one TCP (or TLS) connection at a time carrying one
 * session, with pipelining (many calls in flight, answered in any order), per-call timeouts
 * and `AbortSignal`s, keep-alives, and reconnection with backoff that resumes the session.
 *
 * The session lease is tracked on this side too, conservatively: a reply to a call sent at
 * time `t` proves the session alive until `t + lease` and no later, so when no reply came for
 * a lease the client gives the session up (`sessionLost`) before the server can have
 * released its locks to anyone else. A call in flight when the connection drops fails with
 * `CONNECTION_LOST` (it may or may not have been applied), unless it is idempotent, in which
 * case it is sent again on the next connection. Calls made while reconnecting wait for it.
 */
export class ClientConnection extends EventEmitter<ClientConnectionEvents> {
  readonly #options: ClientConnectionOptions;
  readonly #clock: Clock;
  readonly #pending = new Map<number, Pending>();
  /** Calls waiting for a connection (made while reconnecting, or resent after a drop). */
  #queued: number[] = [];
  #nextId = 1;
  #socket: Socket | undefined;
  #ready = false;
  #closed = false;
  #session: SessionInfo | undefined;
  /** Monotonic time until which the session is known alive (see the class comment). */
  #sessionValidUntil = 0;
  #sessionTimer: NodeJS.Timeout | undefined;
  #keepAliveTimer: NodeJS.Timeout | undefined;
  #lastSent = 0;
  #lastHeard = 0;
  #attempt = 0;
  #reconnectTimer: NodeJS.Timeout | undefined;
  #firstConnect: { resolve: () => void; reject: (err: LocksmithError) => void } | undefined;
  /** The last socket error, for the message of the close that follows. */
  #lastError: Error | undefined;
  /** A refusal no retry can cure (bad token, protocol mismatch). */
  #fatal: LocksmithError | undefined;
  #helloSentAt = 0;
  /** Why the last attempt to connect failed, for the message of a `connect()` that gives up. */
  #lastFailure: ConnectionLostError | undefined;

  constructor(options: ClientConnectionOptions) {
    super();
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
  }

  get session(): SessionInfo | undefined {
    return this.#session;
  }

  get connected(): boolean {
    return this.#ready;
  }

  /** Monotonic time (`clock.monotonic()`) until which the session is known to be alive. */
  get sessionValidUntil(): number {
    return this.#sessionValidUntil;
  }

  /** Connects and opens a session; rejects after `connectTimeoutMs` or on a refusal. */
  open(signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        const last = this.#lastFailure;
        fail(
          new ConnectionLostError(
            `Could not connect to ${this.#options.host}:${this.#options.port} within ${this.#options.connectTimeoutMs} ms${last === undefined ? '' : `; last attempt: ${last.message}`}`,
            { cause: last },
          ),
        );
      }, this.#options.connectTimeoutMs);
      const onAbort = () =>
        fail(new AbortedError('connect() was aborted', { cause: signal?.reason }));
      const fail = (err: LocksmithError) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.#firstConnect = undefined;
        this.#shutdown(err);
        reject(err);
      };
      if (signal?.aborted) {
        onAbort();
        return;
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#firstConnect = {
        resolve: () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          this.#firstConnect = undefined;
          resolve();
        },
        reject: fail,
      };
      this.#dial();
    });
  }

  /** Sends a call; resolves with the server's result or rejects with its error. */
  call(method: Method, args: unknown[], options: CallOptions = {}): Promise<unknown> {
    if (this.#closed) {
      return Promise.reject(new ConnectionLostError('The client is closed'));
    }
    const { signal } = options;
    if (signal?.aborted) {
      return Promise.reject(new AbortedError(`${method} was aborted`, { cause: signal.reason }));
    }
    return new Promise<unknown>((resolve, reject) => {
      const id = this.#takeId();
      const pending: Pending = {
        method,
        args,
        options,
        resolve,
        reject,
        sentAt: 0,
        timer: undefined,
        settled: false,
        onAbort: undefined,
      };
      this.#pending.set(id, pending);
      const timeoutMs = options.timeoutMs ?? this.#options.callTimeoutMs;
      if (timeoutMs > 0 && Number.isFinite(timeoutMs)) {
        pending.timer = setTimeout(() => {
          this.#cancel(
            id,
            new ConnectionLostError(`${method} got no answer within ${timeoutMs} ms`),
          );
        }, timeoutMs);
      }
      if (signal !== undefined) {
        pending.onAbort = () =>
          this.#cancel(id, new AbortedError(`${method} was aborted`, { cause: signal.reason }));
        signal.addEventListener('abort', pending.onAbort, { once: true });
      }
      if (this.#ready) this.#send(id, pending);
      else this.#queued.push(id);
    });
  }

  /** Ends the session (releasing everything it holds) and the connection. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    if (this.#ready) {
      await this.call('closeSession', [], { timeoutMs: 5_000 }).catch(() => undefined);
    }
    this.#shutdown(new ConnectionLostError('The client is closed'));
  }

  // ---- connecting ------------------------------------------------------------------------

  #dial(): void {
    if (this.#closed) return;
    const { host, port, tls } = this.#options;
    const socket =
      tls === undefined ? netConnect({ host, port }) : tlsConnect({ host, port, ...tls });
    this.#socket = socket;
    socket.setNoDelay(true);
    const reader = new FrameReader(DEFAULT_MAX_FRAME_BYTES * 2);
    let helloSent = false;
    const sendHello = () => {
      helloSent = true;
      this.#sendHello(socket);
    };
    socket.once(tls === undefined ? 'connect' : 'secureConnect', sendHello);
    socket.on('data', (chunk: Buffer) => {
      if (this.#socket !== socket) return;
      this.#lastHeard = this.#clock.monotonic();
      let payloads: Buffer[];
      try {
        payloads = reader.push(chunk);
        for (const payload of payloads) this.#onMessage(socket, decode(payload));
      } catch (err) {
        socket.destroy(err as Error);
      }
    });
    socket.on('error', (err) => {
      this.#lastError = err;
      // A certificate the client does not trust will not become trusted by retrying.
      if (tls !== undefined && this.#firstConnect !== undefined && isCertificateError(err)) {
        this.#fatal = new ConnectionLostError(
          `TLS: the certificate of ${host}:${port} is not trusted: ${err.message} (for a private certificate, pass tls: { ca })`,
          { cause: err },
        );
      }
    });
    socket.on('close', () => {
      if (this.#socket !== socket) return;
      this.#socket = undefined;
      const wasReady = this.#ready;
      this.#ready = false;
      this.#stopKeepAlive();
      // Closed before any WELCOME: most often the two ends disagree about TLS.
      const sslFailed = /^ERR_SSL_/.test(String((this.#lastError as { code?: unknown })?.code));
      const hint =
        wasReady || (!helloSent && !sslFailed)
          ? ''
          : tls === undefined
            ? ' (before the handshake: if the server speaks TLS, use locksmiths://)'
            : ' (before the handshake: if the server does not speak TLS, use locksmith://)';
      const reason = new ConnectionLostError(
        helloSent
          ? `The connection to ${host}:${port} closed${this.#lastError ? `: ${this.#lastError.message}` : ''}${hint}`
          : `Could not connect to ${host}:${port}${this.#lastError ? `: ${this.#lastError.message.trim()}` : ''}${hint}`,
        { cause: this.#lastError },
      );
      if (!wasReady) this.#lastFailure = reason;
      this.#lastError = undefined;
      this.#failInFlight(reason);
      if (this.#closed) return;
      if (this.#fatal !== undefined && this.#firstConnect !== undefined) {
        this.#firstConnect.reject(this.#fatal);
        return;
      }
      if (wasReady) this.emit('disconnected', reason);
      this.#scheduleReconnect();
    });
  }

  #scheduleReconnect(): void {
    if (this.#closed) return;
    const { reconnectMinMs, reconnectMaxMs } = this.#options;
    const base = Math.min(reconnectMaxMs, reconnectMinMs * 2 ** Math.min(this.#attempt, 20));
    this.#attempt++;
    const delay = base / 2 + Math.random() * (base / 2);
    this.#reconnectTimer = setTimeout(() => this.#dial(), delay);
    // Reconnecting alone does not keep the process alive (a call waiting for it has its own timer).
    this.#reconnectTimer.unref();
  }

  #onMessage(socket: Socket, raw: unknown): void {
    const message = parseServerMessage(raw);
    switch (message.kind) {
      case ServerKind.WELCOME:
        this.#welcome(message.protocol, message.welcome);
        return;
      case ServerKind.RESULT:
      case ServerKind.ERROR: {
        if (message.id === 0 && message.kind === ServerKind.ERROR) {
          this.#connectionError(socket, message.code, message.message);
          return;
        }
        const pending = this.#pending.get(message.id);
        if (pending === undefined) return;
        this.#pending.delete(message.id);
        // Any answer proves the session alive at the time the call was sent.
        this.#sessionAliveAt(pending.sentAt);
        if (pending.settled) {
          // Answered after the caller gave up: a lock granted meanwhile is given back.
          if (message.kind === ServerKind.RESULT && isGrant(pending.method, message.value)) {
            const table = pending.args[0];
            const lockId = (message.value as unknown[])[0];
            this.call('unlockRow', [table, lockId]).catch(() => undefined);
          }
          return;
        }
        this.#settle(pending);
        if (message.kind === ServerKind.RESULT) pending.resolve(message.value);
        else pending.reject(fromWireError(message.code, message.message));
        return;
      }
      case ServerKind.NOTICE:
        this.emit('notice', message.notice, message.data);
        return;
    }
  }

  #welcome(protocol: number, w: Record<string, unknown>): void {
    if (protocol !== PROTOCOL_VERSION || typeof w.session !== 'string') {
      throw new ProtocolError(`Unexpected WELCOME (protocol ${protocol})`);
    }
    const info: SessionInfo = {
      id: w.session,
      leaseMs: Number(w.sessionLeaseMs),
      lockLeaseMs: Number(w.lockLeaseMs),
      rowLockWaitMs: Number(w.rowLockWaitMs),
      maxInFlight: Number(w.maxInFlight),
      server: String(w.server),
    };
    const resumed = w.resumed === true;
    const held = (Array.isArray(w.locks) ? w.locks : []).filter(
      (l): l is [string, string] =>
        Array.isArray(l) && typeof l[0] === 'string' && typeof l[1] === 'string',
    );
    this.#session = info;
    this.#ready = true;
    this.#attempt = 0;
    this.#sessionAliveAt(this.#helloSentAt);
    this.#startKeepAlive();
    this.emit('connected', info, resumed, held);
    this.#firstConnect?.resolve();
    const queued = this.#queued;
    this.#queued = [];
    for (const id of queued) {
      const pending = this.#pending.get(id);
      if (pending !== undefined && !pending.settled) this.#send(id, pending);
    }
  }

  /** An ERROR for the whole connection (call id 0). */
  #connectionError(socket: Socket, code: unknown, message: unknown): void {
    const err = fromWireError(code, message);
    if (code === 'SESSION_EXPIRED') {
      // Refused resume (handshake still open) or expiry while connected: a new session next.
      this.#loseSession(new LockLostError(err.message, { code: 'SESSION_EXPIRED' }));
      if (!this.#ready) {
        this.#session = undefined;
        // The server keeps the handshake open for a fresh HELLO.
        this.#sendHello(socket);
      }
      return;
    }
    if (code === 'UNAUTHENTICATED' || (code === 'PROTOCOL_ERROR' && !this.#ready)) {
      // Retrying cannot help: fail the first connect, or stop for good.
      this.#fatal = err;
      if (this.#firstConnect === undefined) this.#shutdown(err);
    }
    this.#lastError = err;
  }

  /** HELLO: resumes the session this client has, or asks for a new one. */
  #sendHello(socket: Socket): void {
    const hello: HelloOptions = {};
    if (this.#options.token !== undefined) hello.token = this.#options.token;
    if (this.#session !== undefined) hello.session = this.#session.id;
    else {
      if (this.#options.sessionLeaseMs !== undefined) {
        hello.sessionLeaseMs = this.#options.sessionLeaseMs;
      }
      if (this.#options.releaseOnDisconnect) hello.releaseOnDisconnect = true;
    }
    if (this.#options.client !== undefined) hello.client = this.#options.client;
    this.#helloSentAt = this.#clock.monotonic();
    socket.write(frame(encode([ClientKind.HELLO, PROTOCOL_VERSION, hello])));
  }

  // ---- session lease ---------------------------------------------------------------------

  #sessionAliveAt(sentAt: number): void {
    const session = this.#session;
    if (session === undefined) return;
    const until = sentAt + session.leaseMs;
    if (until <= this.#sessionValidUntil) return;
    this.#sessionValidUntil = until;
    if (this.#sessionTimer === undefined) this.#armSessionTimer();
  }

  #armSessionTimer(): void {
    const delay = Math.max(0, this.#sessionValidUntil - this.#clock.monotonic());
    this.#sessionTimer = setTimeout(() => {
      this.#sessionTimer = undefined;
      if (this.#session === undefined || this.#closed) return;
      if (this.#clock.monotonic() < this.#sessionValidUntil) {
        this.#armSessionTimer();
        return;
      }
      const lease = this.#session.leaseMs;
      this.#loseSession(
        new LockLostError(
          `Session lost: no answer from the server for a whole session lease (${lease} ms); the server may have released its locks`,
          { code: 'SESSION_EXPIRED' },
        ),
      );
      this.#session = undefined;
      // A connection that heard nothing for a lease is dead: start afresh.
      this.#socket?.destroy();
    }, delay);
    this.#sessionTimer.unref();
  }

  #loseSession(reason: LockLostError): void {
    if (this.#session === undefined && this.#sessionValidUntil === 0) return;
    this.#sessionValidUntil = 0;
    clearTimeout(this.#sessionTimer);
    this.#sessionTimer = undefined;
    this.emit('sessionLost', reason);
  }

  #startKeepAlive(): void {
    this.#stopKeepAlive();
    const lease = this.#session?.leaseMs ?? 10_000;
    const every = Math.max(20, Math.floor(lease / 4));
    this.#keepAliveTimer = setInterval(() => {
      const now = this.#clock.monotonic();
      if (now - this.#lastSent >= every) {
        this.call('ping', [], { timeoutMs: lease }).catch(() => undefined);
      }
      // Nothing heard for half a lease while pinging: the connection is dead (half-open).
      if (now - this.#lastHeard > lease / 2 + every) this.#socket?.destroy();
    }, every);
    this.#keepAliveTimer.unref();
  }

  #stopKeepAlive(): void {
    clearInterval(this.#keepAliveTimer);
    this.#keepAliveTimer = undefined;
  }

  // ---- calls -----------------------------------------------------------------------------

  #takeId(): number {
    for (;;) {
      const id = this.#nextId;
      this.#nextId = id >= 0xffff_ffff ? 1 : id + 1;
      if (!this.#pending.has(id)) return id;
    }
  }

  #send(id: number, pending: Pending): void {
    const socket = this.#socket;
    if (socket === undefined) {
      this.#queued.push(id);
      return;
    }
    pending.sentAt = this.#clock.monotonic();
    this.#lastSent = pending.sentAt;
    if (!socket.writableCorked) {
      // Calls made in one run of the job queues (an unlock and the next lock, a pipelined
      // burst) leave in one write: one system call, one packet.
      socket.cork();
      process.nextTick(() => socket.uncork());
    }
    socket.write(frame(encode([ClientKind.CALL, id, pending.method, pending.args])));
  }

  /** The caller gives up on a call (timeout, abort): the server is asked to cancel it. */
  #cancel(id: number, err: LocksmithError): void {
    const pending = this.#pending.get(id);
    if (pending === undefined || pending.settled) return;
    this.#settle(pending);
    pending.reject(err);
    if (pending.sentAt > 0 && this.#ready && this.#socket !== undefined) {
      // The entry stays until the answer, so a lock granted meanwhile is given back.
      this.#socket.write(frame(encode([ClientKind.CANCEL, id])));
    } else {
      this.#pending.delete(id);
    }
  }

  #settle(pending: Pending): void {
    pending.settled = true;
    clearTimeout(pending.timer);
    if (pending.onAbort !== undefined) {
      pending.options.signal?.removeEventListener('abort', pending.onAbort);
    }
  }

  #failInFlight(reason: ConnectionLostError): void {
    for (const [id, pending] of [...this.#pending]) {
      if (pending.settled) {
        this.#pending.delete(id);
        continue;
      }
      if (pending.sentAt === 0 || pending.options.idempotent === true) {
        // Never sent, or safe to send again: it goes out on the next connection.
        pending.sentAt = 0;
        if (!this.#queued.includes(id)) this.#queued.push(id);
        continue;
      }
      this.#pending.delete(id);
      this.#settle(pending);
      pending.reject(
        new ConnectionLostError(
          `${pending.method}: ${reason.message}; the server may or may not have applied it`,
          { cause: reason },
        ),
      );
    }
  }

  #shutdown(reason: LocksmithError): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#ready = false;
    clearTimeout(this.#reconnectTimer);
    clearTimeout(this.#sessionTimer);
    this.#stopKeepAlive();
    for (const pending of this.#pending.values()) {
      if (!pending.settled) {
        this.#settle(pending);
        pending.reject(reason);
      }
    }
    this.#pending.clear();
    this.#queued = [];
    this.#socket?.destroy();
    this.#socket = undefined;
    if (this.#session !== undefined) {
      this.#session = undefined;
      this.#loseSession(
        new LockLostError(`Session ended: ${reason.message}`, { code: 'LOCK_LOST' }),
      );
    }
  }
}

/** OpenSSL's verdicts on a peer certificate (node's `err.code`). */
function isCertificateError(err: Error): boolean {
  const code = (err as { code?: unknown }).code;
  return (
    typeof code === 'string' &&
    (code.includes('CERT') ||
      code.includes('SELF_SIGNED') ||
      code === 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' ||
      code === 'ERR_TLS_CERT_ALTNAME_INVALID')
  );
}

function isGrant(method: Method, value: unknown): boolean {
  return (method === 'lockRow' || method === 'tryLockRow') && Array.isArray(value);
}
