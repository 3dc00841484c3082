import { EventEmitter } from 'node:events';
import { connect as netConnect, type Socket } from 'node:net';
import { type ConnectionOptions as TlsOptions, connect as tlsConnect } from 'node:tls';
import { type Clock, systemClock } from '../core/clock.js';
import {
  AbortedError,
  ConnectionLostError,
  LockLostError,
  LocksmithError,
  NotMasterError,
  ProtocolError,
} from '../core/errors.js';
import type { Method } from '../wire/calls.js';
import { decode, encodeFrame } from '../wire/codec.js';
import { DEFAULT_MAX_FRAME_BYTES, FrameReader } from '../wire/frame.js';
import {
  ClientKind,
  type HelloOptions,
  PROTOCOL_VERSION,
  parseServerMessage,
  ServerKind,
} from '../wire/messages.js';
import { fromWireError } from '../wire/wire-error.js';
import { AddressRotation } from './address-rotation.js';
import { type CallOptions, type PendingCall, PendingCalls } from './pending-calls.js';
import { parseMasterAddress, type ServerAddress } from './server-address.js';
import { sessionContinuity, welcomeEpoch } from './session-continuity.js';
import { SessionLease, silenceLimitMs } from './session-lease.js';

export type { CallOptions };
export { silenceLimitMs };

export interface ClientConnectionOptions {
  /**
   * The servers to find the master among, tried in order (at least one). A `NOT_MASTER`
   * refusal naming the master sends the next attempt there.
   */
  addresses: readonly ServerAddress[];
  token?: string | undefined;
  /** TLS options (`ca`, `servername`, ...) for the addresses that speak TLS. */
  tls?: TlsOptions | undefined;
  /** The session's lease; 0 or absent: the server's default. */
  sessionLeaseMs?: number | undefined;
  releaseOnDisconnect?: boolean | undefined;
  client?: string | undefined;
  /** Default timeout of a call's round trip (a lock call adds its wait). Default 30 s. */
  callTimeoutMs: number;
  /**
   * How long `connect()` keeps trying before it fails. Default 10 s. Each attempt's handshake
   * is bounded by a part of it ({@link handshakeTimeoutMs}).
   */
  connectTimeoutMs: number;
  /** Reconnect backoff: first delay and cap (default 50 ms, 2 s), with jitter. */
  reconnectMinMs: number;
  reconnectMaxMs: number;
  clock?: Clock | undefined;
  /**
   * A result that arrived after its caller gave up (timed out, aborted), with the call's
   * method and arguments as sent: the owner of what it grants gives that back.
   */
  lateResult?:
    | ((
        method: Method,
        args: readonly unknown[],
        value: unknown,
        session: number | undefined,
      ) => void)
    | undefined;
}

/** The session as the server granted it. */
export interface SessionInfo {
  id: string;
  leaseMs: number;
  lockLeaseMs: number;
  rowLockWaitMs: number;
  maxInFlight: number;
  server: string;
  /** `host:port` of the server that holds the session (the master). */
  address: string;
  /** The master's epoch (its mastership token); 0 for a standalone server. */
  epoch: number;
  role: 'standalone' | 'master';
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
  /**
   * The session now lives on another master than the last one that welcomed this client
   * (another address or another epoch). Emitted after the old session's loss, before
   * `connected`.
   */
  failover: [from: string, to: string, epoch: number];
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
 *
 * It follows the master among several servers: each attempt goes to the next address of the
 * list (after a dropped connection, first to the server it was on, unless that server had gone
 * silent), a `NOT_MASTER` refusal that names the master sends the next attempt there, and a
 * round of the list that found no master waits the backoff before the next. An attempt whose
 * handshake (TCP, TLS, HELLO → WELCOME) is not over within {@link handshakeTimeoutMs} is
 * abandoned for the next address: a server that accepts connections and never answers (paused,
 * wedged, a half-dead host) costs one bound, not the whole `connectTimeoutMs`. A connection
 * that hears nothing for {@link silenceLimitMs} of the session lease is dropped the same way,
 * without waiting for TCP to give up. The session belongs to one master: resuming it
 * sends the epoch of the WELCOME that opened it, and a server of another epoch, or one that
 * answers `MASTER_CHANGED`, means it is gone (`sessionLost` with code `MASTER_CHANGED`, every
 * lock with it); a fresh session is opened on the new master (`failover`, then `connected`).
 */
export class ClientConnection extends EventEmitter<ClientConnectionEvents> {
  readonly #options: ClientConnectionOptions;
  readonly #clock: Clock;
  readonly #calls: PendingCalls;
  #socket: Socket | undefined;
  #ready = false;
  #closed = false;
  #session: SessionInfo | undefined;
  /** Until when the session is known alive (see the class comment). */
  readonly #lease: SessionLease;
  #keepAliveTimer: NodeJS.Timeout | undefined;
  #lastSent = 0;
  #lastHeard = 0;
  #reconnectTimer: NodeJS.Timeout | undefined;
  #firstConnect: { resolve: () => void; reject: (err: LocksmithError) => void } | undefined;
  /** The last socket error, for the message of the close that follows. */
  #lastError: Error | undefined;
  /** A refusal no retry can cure (bad token, protocol mismatch). */
  #fatal: LocksmithError | undefined;
  #helloSentAt = 0;
  /** Why the last attempt to connect failed, for the message of a `connect()` that gives up. */
  #lastFailure: ConnectionLostError | undefined;
  /** Which server next, with what handshake bound and backoff; why each one failed. */
  readonly #rotation: AddressRotation;
  /** The server of the last WELCOME, and its epoch: a change of either is a failover. */
  #master: { address: string; epoch: number } | undefined;
  /** Bounds the current attempt's handshake (see {@link handshakeTimeoutMs}). */
  #handshakeTimer: NodeJS.Timeout | undefined;
  /** Where the current attempt's handshake is, and since when: what a timeout reports. */
  #stage: 'tcp' | 'tls' | 'hello' = 'tcp';
  #attemptStartedAt = 0;
  /** The connection being dropped went silent: the next attempt goes round the list first. */
  #silent = false;
  /** A keep-alive ping is in flight: no second one until it is answered or gives up. */
  #pinging = false;

  constructor(options: ClientConnectionOptions) {
    super();
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    if (options.addresses.length === 0) {
      throw new TypeError('ClientConnection: no server address');
    }
    this.#rotation = new AddressRotation(options);
    this.#lease = new SessionLease(this.#clock, () => this.#leaseExpired());
    this.#calls = new PendingCalls({
      dispatch: (id, call) => {
        if (this.#ready) this.#send(id, call);
        else this.#calls.queue(id);
      },
      cancelSent: (id) => {
        if (!this.#ready || this.#socket === undefined) return false;
        this.#socket.write(encodeFrame([ClientKind.CANCEL, id]));
        return true;
      },
    });
  }

  /** `host:port` of the master this client last connected to (undefined before the first). */
  get master(): string | undefined {
    return this.#master?.address;
  }

  /** The epoch of that master (0: a standalone server). */
  get epoch(): number | undefined {
    return this.#master?.epoch;
  }

  get session(): SessionInfo | undefined {
    return this.#session;
  }

  get connected(): boolean {
    return this.#ready;
  }

  /** Monotonic time (`clock.monotonic()`) until which the session is known to be alive. */
  get sessionValidUntil(): number {
    return this.#lease.validUntil;
  }

  /** Connects and opens a session; rejects after `connectTimeoutMs` or on a refusal. */
  open(signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        fail(new ConnectionLostError(this.#gaveUpMessage(), { cause: this.#lastFailure }));
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
    return this.#calls.start(method, args, options, this.#options.callTimeoutMs);
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

  /** Why `connect()` gave up (see {@link AddressRotation.gaveUpMessage}). */
  #gaveUpMessage(): string {
    const underway =
      this.#socket !== undefined && !this.#ready
        ? this.#stageTimeout(Math.round(this.#clock.monotonic() - this.#attemptStartedAt))
        : undefined;
    return this.#rotation.gaveUpMessage(underway);
  }

  /** The bound on the next attempt's handshake (see {@link AddressRotation}). */
  get handshakeTimeoutMs(): number {
    return this.#rotation.handshakeTimeoutMs;
  }

  /** What an attempt that has not finished its handshake after `ms` was waiting for. */
  #stageTimeout(ms: number): string {
    switch (this.#stage) {
      case 'tcp':
        return `timed out: no TCP connection after ${ms} ms`;
      case 'tls':
        return `timed out: connected, but the TLS handshake was not over after ${ms} ms`;
      case 'hello':
        return `timed out in the handshake: connected, but no answer to HELLO after ${ms} ms (a paused or wedged server?)`;
    }
  }

  #dial(): void {
    if (this.#closed) return;
    const address = this.#rotation.next();
    const { host, port, label } = address;
    const tls = address.tls ? (this.#options.tls ?? {}) : undefined;
    const socket =
      tls === undefined ? netConnect({ host, port }) : tlsConnect({ host, port, ...tls });
    this.#socket = socket;
    this.#silent = false;
    this.#stage = 'tcp';
    this.#attemptStartedAt = this.#clock.monotonic();
    const bound = this.handshakeTimeoutMs;
    let timedOut = false;
    clearTimeout(this.#handshakeTimer);
    this.#handshakeTimer = setTimeout(() => {
      if (this.#socket !== socket || this.#ready) return;
      timedOut = true;
      this.#lastError = new ConnectionLostError(this.#stageTimeout(bound));
      socket.destroy();
    }, bound);
    this.#handshakeTimer.unref();
    socket.setNoDelay(true);
    const reader = new FrameReader(DEFAULT_MAX_FRAME_BYTES * 2);
    let helloSent = false;
    const sendHello = () => {
      helloSent = true;
      this.#stage = 'hello';
      this.#sendHello(socket);
    };
    if (tls !== undefined) socket.once('connect', () => (this.#stage = 'tls'));
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
      // A certificate the client does not trust will not become trusted by retrying: the
      // address is given up, and `connect()` with it once every address of the list is.
      if (tls !== undefined && this.#firstConnect !== undefined && isCertificateError(err)) {
        const untrusted = new ConnectionLostError(
          `TLS: the certificate of ${label} is not trusted: ${err.message} (for a private certificate, pass tls: { ca })`,
          { cause: err },
        );
        this.#lastError = untrusted;
        if (this.#rotation.untrusted(label)) this.#fatal = untrusted;
      }
    });
    socket.on('close', () => {
      if (this.#socket !== socket) return;
      this.#socket = undefined;
      clearTimeout(this.#handshakeTimer);
      this.#handshakeTimer = undefined;
      const wasReady = this.#ready;
      this.#ready = false;
      this.#stopKeepAlive();
      // Closed before any WELCOME for no reason given (not a refusal, not a timeout): most
      // often the two ends disagree about TLS.
      const sslFailed = /^ERR_SSL_/.test(String((this.#lastError as { code?: unknown })?.code));
      const explained = timedOut || this.#lastError instanceof LocksmithError;
      const hint =
        wasReady || explained || (!helloSent && !sslFailed)
          ? ''
          : tls === undefined
            ? ' (before the handshake: if the server speaks TLS, use locksmiths://)'
            : ' (before the handshake: if the server does not speak TLS, use locksmith://)';
      const reason = new ConnectionLostError(
        helloSent
          ? `The connection to ${label} closed${this.#lastError ? `: ${this.#lastError.message}` : ''}${hint}`
          : `Could not connect to ${label}${this.#lastError ? `: ${this.#lastError.message.trim()}` : ''}${hint}`,
        { cause: this.#lastError },
      );
      if (!wasReady) {
        this.#lastFailure = reason;
        const why = this.#lastError?.message.trim();
        this.#rotation.failed(
          label,
          `${why ?? (helloSent ? 'the connection closed before the handshake' : 'no connection')}${hint}`,
        );
      } else if (!this.#silent) {
        this.#rotation.retryCurrent();
      }
      this.#lastError = undefined;
      this.#calls.connectionLost(reason);
      if (this.#closed) return;
      if (this.#fatal !== undefined && this.#firstConnect !== undefined) {
        this.#firstConnect.reject(this.#fatal);
        return;
      }
      if (wasReady) this.emit('disconnected', reason);
      this.#scheduleReconnect(timedOut);
    });
  }

  /**
   * The next attempt: at once while a round of the list is not over (a `NOT_MASTER` naming the
   * master may lengthen it to two rounds, no more, so two servers naming each other cannot
   * spin), after the backoff otherwise.
   */
  #scheduleReconnect(timedOut: boolean): void {
    if (this.#closed) return;
    this.#reconnectTimer = setTimeout(() => this.#dial(), this.#rotation.afterAttempt(timedOut));
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
          this.#connectionError(socket, message.code, message.message, message.details);
          return;
        }
        const call = this.#calls.get(message.id);
        if (call === undefined) return;
        if (message.kind === ServerKind.ERROR && message.code === 'NOT_MASTER' && !call.settled) {
          // Refused before it ran (the server is no longer master): safe to send again, to the
          // master, which this connection's end goes to find.
          this.#calls.queue(message.id);
          this.#notMaster(socket, message.message, message.details);
          return;
        }
        this.#calls.answered(message.id);
        // Any answer proves the session alive at the time the call was sent.
        this.#sessionAliveAt(call.sentAt);
        if (call.settled) {
          if (message.kind === ServerKind.RESULT) {
            this.#options.lateResult?.(call.method, call.args, message.value, call.options.session);
          }
          return;
        }
        this.#calls.settle(call);
        if (message.kind === ServerKind.RESULT) call.resolve(message.value);
        else call.reject(fromWireError(message.code, message.message));
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
    const epoch = welcomeEpoch(w.epoch);
    const address = this.#rotation.current.label;
    const info: SessionInfo = {
      id: w.session,
      leaseMs: Number(w.sessionLeaseMs),
      lockLeaseMs: Number(w.lockLeaseMs),
      rowLockWaitMs: Number(w.rowLockWaitMs),
      maxInFlight: Number(w.maxInFlight),
      server: String(w.server),
      address,
      epoch,
      role: w.role === 'master' ? 'master' : 'standalone',
    };
    const continuity = sessionContinuity(this.#session, { resumed: w.resumed === true, epoch });
    if (continuity === 'masterChanged') {
      const had = this.#session as SessionInfo;
      this.#loseSession(
        new LockLostError(
          `Session lost: the master changed (${had.address} epoch ${had.epoch} → ${address} epoch ${epoch}); row locks and sessions do not survive a change of master`,
          { code: 'MASTER_CHANGED' },
        ),
      );
    } else if (continuity === 'sessionExpired') {
      this.#loseSession(
        new LockLostError(`Session lost: ${address} opened a new session instead of resuming it`, {
          code: 'SESSION_EXPIRED',
        }),
      );
    }
    const resumed = continuity === 'resumed';
    const held = (Array.isArray(w.locks) ? w.locks : []).filter(
      (l): l is [string, string] =>
        Array.isArray(l) && typeof l[0] === 'string' && typeof l[1] === 'string',
    );
    const previous = this.#master;
    this.#master = { address, epoch };
    this.#session = info;
    this.#ready = true;
    clearTimeout(this.#handshakeTimer);
    this.#handshakeTimer = undefined;
    // The next round starts after this server: if it is lost, the others are tried next.
    this.#rotation.welcomed(address);
    this.#sessionAliveAt(this.#helloSentAt);
    this.#startKeepAlive();
    if (previous !== undefined && (previous.address !== address || previous.epoch !== epoch)) {
      this.emit('failover', previous.address, address, epoch);
    }
    this.emit('connected', info, resumed, held);
    this.#firstConnect?.resolve();
    for (const [id, call] of this.#calls.takeQueued()) this.#send(id, call);
  }

  /** An ERROR for the whole connection (call id 0). */
  #connectionError(
    socket: Socket,
    code: unknown,
    message: unknown,
    details: Record<string, unknown> | undefined,
  ): void {
    const err = fromWireError(code, message);
    if (code === 'SESSION_EXPIRED' || code === 'MASTER_CHANGED') {
      // Refused resume (handshake still open), expiry while connected, or a master that
      // stepped down (it ends every session, then closes): a new session next.
      if (!this.#ready && this.#session === undefined) {
        // A HELLO that resumed nothing cannot be refused this way: a confused server.
        this.#lastError = err;
        socket.destroy();
        return;
      }
      this.#loseSession(new LockLostError(err.message, { code }));
      if (!this.#ready) {
        this.#session = undefined;
        // The server keeps the handshake open for a fresh HELLO.
        this.#sendHello(socket);
      } else if (code === 'MASTER_CHANGED') {
        // This server no longer serves: find the master (it names it when asked again).
        this.#session = undefined;
        this.#lastError = err;
        socket.destroy();
      }
      return;
    }
    if (code === 'NOT_MASTER') {
      this.#notMaster(socket, message, details);
      return;
    }
    if (code === 'UNAUTHENTICATED' || (code === 'PROTOCOL_ERROR' && !this.#ready)) {
      // Retrying cannot help: fail the first connect, or stop for good.
      this.#fatal = err;
      if (this.#firstConnect === undefined) this.#shutdown(err);
    }
    this.#lastError = err;
  }

  /**
   * The server is not the master: the next attempt goes to the master it names, if that is a
   * well-formed `host:port` other than this server (else to the next address of the list).
   */
  #notMaster(socket: Socket, message: unknown, details: Record<string, unknown> | undefined): void {
    const from = this.#rotation.current;
    const master = parseMasterAddress(details?.master, from.tls);
    const named = master !== undefined && master.label !== from.label ? master : undefined;
    this.#rotation.redirectTo(named);
    const text = typeof message === 'string' ? message : 'not the master';
    this.#lastError = new NotMasterError(
      `${text} (NOT_MASTER; ${named === undefined ? 'it named no usable master address' : `it names the master ${named.label}`})`,
      { master: named?.label },
    );
    socket.destroy();
  }

  /** HELLO: resumes the session this client has (on its master's epoch), or asks for a new one. */
  #sendHello(socket: Socket): void {
    const hello: HelloOptions = {};
    if (this.#options.token !== undefined) hello.token = this.#options.token;
    if (this.#session !== undefined) {
      hello.session = this.#session.id;
      hello.epoch = this.#session.epoch;
    } else {
      if (this.#options.sessionLeaseMs !== undefined) {
        hello.sessionLeaseMs = this.#options.sessionLeaseMs;
      }
      if (this.#options.releaseOnDisconnect) hello.releaseOnDisconnect = true;
    }
    if (this.#options.client !== undefined) hello.client = this.#options.client;
    this.#helloSentAt = this.#clock.monotonic();
    socket.write(encodeFrame([ClientKind.HELLO, PROTOCOL_VERSION, hello]));
  }

  // ---- session lease ---------------------------------------------------------------------

  #sessionAliveAt(sentAt: number): void {
    if (this.#session !== undefined) this.#lease.aliveAt(sentAt, this.#session.leaseMs);
  }

  /** No answer for a whole lease: the session is lost here before the server can reuse it. */
  #leaseExpired(): void {
    if (this.#session === undefined || this.#closed) return;
    const lease = this.#session.leaseMs;
    this.#loseSession(
      new LockLostError(
        `Session lost: no answer from the server for a whole session lease (${lease} ms); the server may have released its locks`,
        { code: 'SESSION_EXPIRED' },
      ),
    );
    this.#session = undefined;
    // A connection that heard nothing for a lease is dead: start afresh, elsewhere first. An
    // attempt under way (the session lapsed while reconnecting) runs to its own bound.
    if (this.#ready) this.#dropSilent();
  }

  #loseSession(reason: LockLostError): void {
    if (this.#session === undefined && this.#lease.validUntil === 0) return;
    this.#lease.end();
    this.emit('sessionLost', reason);
  }

  /**
   * Keep-alive and silence detection. After a quarter lease with nothing sent (the server must
   * hear from the session) or nothing heard (the client must hear from the server, even while
   * its calls wait in the server's queues), a ping goes out on the server's priority lane. A
   * live server answers it at once, so a connection that heard nothing for
   * {@link silenceLimitMs} (5/8 of the lease: a quarter for the ping to leave, an eighth for
   * this timer's tick, a quarter for the answer) is dead — a paused or wedged server, a
   * half-open connection — and dropped: the client looks for the master, with the rest of the
   * lease left to resume the session if the server comes back.
   */
  #startKeepAlive(): void {
    this.#stopKeepAlive();
    const lease = this.#session?.leaseMs ?? 10_000;
    const quiet = Math.max(20, Math.floor(lease / 4));
    const silence = silenceLimitMs(lease);
    this.#pinging = false;
    this.#keepAliveTimer = setInterval(
      () => {
        const now = this.#clock.monotonic();
        if (now - this.#lastHeard > silence) {
          this.#dropSilent();
          return;
        }
        if (!this.#pinging && (now - this.#lastSent >= quiet || now - this.#lastHeard >= quiet)) {
          this.#pinging = true;
          this.call('ping', [], { timeoutMs: lease })
            .catch(() => undefined)
            .finally(() => {
              this.#pinging = false;
            });
        }
      },
      Math.max(10, Math.floor(lease / 8)),
    );
    this.#keepAliveTimer.unref();
  }

  /** Drops a connection whose server went silent; the next attempt goes round the list. */
  #dropSilent(): void {
    const socket = this.#socket;
    if (socket === undefined) return;
    this.#silent = true;
    const heard = Math.round(this.#clock.monotonic() - this.#lastHeard);
    this.#lastError = new ConnectionLostError(
      `nothing heard from ${this.#rotation.current.label} for ${heard} ms (a paused or wedged server?)`,
    );
    socket.destroy();
  }

  #stopKeepAlive(): void {
    clearInterval(this.#keepAliveTimer);
    this.#keepAliveTimer = undefined;
  }

  // ---- calls -----------------------------------------------------------------------------

  #send(id: number, call: PendingCall): void {
    const socket = this.#socket;
    if (socket === undefined) {
      this.#calls.queue(id);
      return;
    }
    call.sentAt = this.#clock.monotonic();
    this.#lastSent = call.sentAt;
    if (!socket.writableCorked) {
      // Calls made in one run of the job queues (an unlock and the next lock, a pipelined
      // burst) leave in one write: one system call, one packet.
      socket.cork();
      process.nextTick(() => socket.uncork());
    }
    const args = this.#calls.argsToSend(call);
    const session = call.options.session;
    socket.write(
      encodeFrame(
        session === undefined
          ? [ClientKind.CALL, id, call.method, args]
          : [ClientKind.CALL, id, call.method, args, session],
      ),
    );
  }

  #shutdown(reason: LocksmithError): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#ready = false;
    clearTimeout(this.#reconnectTimer);
    clearTimeout(this.#handshakeTimer);
    this.#stopKeepAlive();
    this.#calls.close(reason);
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

export { handshakeTimeoutMs } from './address-rotation.js';
