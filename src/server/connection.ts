import { createHash, timingSafeEqual } from 'node:crypto';
import type { Socket } from 'node:net';
import {
  AbortedError,
  ConnectionLostError,
  errorFromCode,
  InvalidArgumentError,
  LimitExceededError,
  LockLostError,
  type LocksmithError,
  NotMasterError,
  ProtocolError,
  UnauthenticatedError,
  UnsupportedOperationError,
} from '../core/errors.js';
import { CALLS, isMethod, shapeArity } from '../wire/calls.js';
import { decode, encodeFrame } from '../wire/codec.js';
import { FrameReader } from '../wire/frame.js';
import {
  ClientKind,
  type ClientMessage,
  type HelloOptions,
  PROTOCOL_VERSION,
  parseClientMessage,
  ServerKind,
  type Welcome,
} from '../wire/messages.js';
import { checkValueCount } from '../wire/value-count.js';
import { errorFrame } from '../wire/wire-error.js';
import { CarriedSession } from './carried-session.js';
import type { CallContext, Dispatcher } from './dispatch.js';
import type { Lane, Slot } from './lane.js';
import type { OutputBudget } from './output-budget.js';
import type { Session, SessionSink } from './session.js';
import type { SessionRegistry } from './session-registry.js';

/**
 * The data side a session lives in: the standalone server's, or one mastership's (each
 * master opens its own, with the mastership token as its epoch; it ends with the mastership).
 */
export interface ServingData {
  readonly sessions: SessionRegistry;
  readonly dispatcher: Dispatcher;
  /** The mastership token (0 standalone): WELCOME's `epoch`; a resume of another epoch is refused. */
  readonly epoch: number;
  readonly role: 'standalone' | 'master';
  /** A member of a fleet: a connection carries only its own session there (see `openSession`). */
  readonly fleet: boolean;
}

/** What a connection needs of its server. */
export interface ConnectionHost {
  /**
   * The data side a HELLO opens or resumes its session in; a {@link NotMasterError} (with
   * the master's address when known) on a server that is not master now.
   */
  serving(): ServingData | NotMasterError;
  readonly lanes: { readonly handler: Lane; readonly priority: Lane };
  readonly limits: ConnectionLimits;
  /** Unsent answers of all connections together (see {@link ConnectionLimits.maxBufferedBytes}). */
  readonly output: OutputBudget;
  /** SHA-256 of the token, when the server has one. */
  readonly tokenDigest: Buffer | undefined;
  readonly lockLeaseMs: number;
  readonly rowLockWaitMs: number;
  readonly serverName: string;
  /** Counts a finished call (for status and metrics). */
  record(method: string, ok: boolean): void;
  forget(connection: Connection): void;
}

export interface ConnectionLimits {
  maxFrameBytes: number;
  maxInFlight: number;
  handshakeTimeoutMs: number;
  /**
   * Unsent answers beyond which the connection stops reading calls, and starts none of those
   * it read, until the client catches up; calls already running still answer. Over this while
   * the server's {@link ConnectionHost.output} budget is spent, the client is taken for one
   * that does not read and the connection is closed (its session lives on for its lease).
   */
  maxBufferedBytes: number;
  /** Sessions a connection may carry besides its own (`openSession`, `resumeSession`). */
  maxSessionsPerConnection: number;
}

/**
 * A call in flight, and its context for the dispatcher. Its abort signal is made only when
 * the call asks for it (a lock wait): most calls never do, and an AbortController per call
 * would be a visible share of the server's CPU. An abort before that is remembered and the signal
 * is born aborted.
 */
class InFlight implements CallContext {
  readonly session: Session;
  /** Set when the call gets a handler of its lane (before the dispatcher sees the call). */
  slot!: Slot;
  #controller: AbortController | undefined;
  #reason: unknown;
  #aborted = false;

  constructor(session: Session) {
    this.session = session;
  }

  get aborted(): boolean {
    return this.#aborted;
  }

  get reason(): unknown {
    return this.#reason;
  }

  get signal(): AbortSignal {
    this.#controller ??= new AbortController();
    if (this.#aborted && !this.#controller.signal.aborted) this.#controller.abort(this.#reason);
    return this.#controller.signal;
  }

  /** A call waiting for a row, or for its write's fsync, gives its handler back (see Lane). */
  waiting(): void {
    this.slot.yield();
  }

  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
  }
}

/**
 * One client connection: the handshake, then calls. A frame that cannot be read (bad length,
 * bad MessagePack, bad envelope) is a `PROTOCOL_ERROR` for the whole connection: it gets one
 * ERROR with call id 0 and is closed, since the stream can no longer be trusted — never a
 * crash, and never a partial call (a call is dispatched only once its frame decoded whole).
 * Bad arguments of a well-formed call fail that call only.
 *
 * Before a successful HELLO any message but HELLO (a CALL, a CANCEL) is a `PROTOCOL_ERROR` of
 * the connection, which closes; a server with a token refuses a
 * HELLO without the right one (compared in constant time) and closes. A connection that does
 * not complete its handshake within `handshakeTimeoutMs` is dropped.
 */
export class Connection implements SessionSink {
  readonly socket: Socket;
  readonly remote: string;
  readonly #host: ConnectionHost;
  readonly #reader: FrameReader;
  readonly #inFlight = new Map<number, InFlight>();
  /** The unsent bytes when the connection was dropped for not reading (0: it was not). */
  overflowed = 0;
  #session: Session | undefined;
  /** The data side of {@link #session} (set with it at HELLO). */
  #data: ServingData | undefined;
  #handshakeTimer: NodeJS.Timeout | undefined;
  #closed = false;
  #corked = false;
  #paused = false;
  /** Frames read but not handled yet: the connection paused in the middle of a chunk. */
  #pending: Buffer[] = [];
  #pendingHead = 0;
  /** What this connection has charged to the host's output budget. */
  #charged = 0;
  /**
   * Calls that got a handler while the client's unsent answers were over bound: they gave the
   * handler back and start one at a time as the client reads (a queue, not a burst: every one
   * woken at once would overshoot the bound by all their answers).
   */
  #gate: (() => void)[] = [];
  #gateHead = 0;
  #gateRunning = 0;
  /** The sessions carried besides its own, by the client's numbers; made at the first. */
  #carried: Map<number, CarriedSession> | undefined;
  /** When the last frame came (monotonic), kept while sessions are carried (see `Carrier`). */
  heardAt = 0;

  constructor(socket: Socket, host: ConnectionHost) {
    this.socket = socket;
    this.remote = `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;
    this.#host = host;
    this.#reader = new FrameReader(host.limits.maxFrameBytes);
    socket.setNoDelay(true);
    this.#handshakeTimer = setTimeout(() => {
      this.#fail(
        new ProtocolError(
          `No HELLO within ${host.limits.handshakeTimeoutMs} ms of connecting: connection dropped`,
        ),
      );
    }, host.limits.handshakeTimeoutMs);
    this.#handshakeTimer.unref();
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('drain', () => this.#onDrain());
    socket.on('error', () => undefined);
    socket.on('close', () => this.#onClose());
  }

  get session(): Session | undefined {
    return this.#session;
  }

  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Closes the connection at once (server shutdown, session moved elsewhere). */
  close(err?: LocksmithError): void {
    if (this.#closed) return;
    if (err !== undefined) this.#send(errorFrame(0, err));
    this.#flush();
    this.socket.end();
    this.socket.destroySoon();
  }

  // ---- SessionSink ---------------------------------------------------------------------

  notify(notice: string, data: unknown): void {
    this.#send([ServerKind.NOTICE, notice, data]);
  }

  abortCalls(reason: Error): void {
    if (this.#session !== undefined) this.abortCallsOf(this.#session, reason);
  }

  // ---- Carrier (the sessions carried besides its own) ----------------------------------

  abortCallsOf(session: Session, reason: Error): void {
    for (const call of this.#inFlight.values()) if (call.session === session) call.abort(reason);
  }

  forget(carried: CarriedSession): void {
    if (this.#carried?.get(carried.number) === carried) this.#carried.delete(carried.number);
  }

  tellEnded(number: number, code: string, message: string): void {
    this.notify('sessionEnded', [number, code, message]);
  }

  sessionEnded(
    code: 'SESSION_EXPIRED' | 'ALREADY_CLOSED' | 'MASTER_CHANGED',
    message: string,
  ): void {
    this.#session = undefined;
    this.#send(errorFrame(0, errorFromCode(code, message)));
    this.#flush();
    this.socket.end();
    // A change of master leaves nothing for this connection to do: its session is gone.
    if (code === 'MASTER_CHANGED') this.socket.destroySoon();
  }

  disconnect(): void {
    this.#session = undefined;
    this.socket.destroy();
  }

  // ---- input -----------------------------------------------------------------------------

  #onData(chunk: Buffer): void {
    if (this.#closed) return;
    let payloads: Buffer[];
    try {
      payloads = this.#reader.push(chunk);
    } catch (err) {
      this.#fail(err as LocksmithError);
      return;
    }
    if (this.#pendingHead === this.#pending.length) {
      this.#pending = payloads;
      this.#pendingHead = 0;
    } else {
      for (const payload of payloads) this.#pending.push(payload);
    }
    this.#handlePending();
  }

  /** Handles the frames read so far, stopping (keeping the rest) while output is over bound. */
  #handlePending(): void {
    while (!this.#closed && !this.#paused && this.#pendingHead < this.#pending.length) {
      const payload = this.#pending[this.#pendingHead] as Buffer;
      this.#pending[this.#pendingHead++] = undefined as never;
      this.#handle(payload);
    }
    if (this.#pendingHead === this.#pending.length) {
      this.#pending = [];
      this.#pendingHead = 0;
    }
  }

  #handle(payload: Buffer): void {
    let message: ClientMessage;
    try {
      checkValueCount(payload);
      message = parseClientMessage(decode(payload));
    } catch (err) {
      this.#fail(err as LocksmithError);
      return;
    }
    if (this.#session !== undefined) this.#data?.sessions.touch(this.#session);
    if (this.#carried !== undefined && this.#data !== undefined) {
      this.heardAt = this.#data.sessions.monotonic();
    }
    if (message.kind === ClientKind.HELLO) {
      this.#hello(message.protocol, message.options);
      return;
    }
    // Every kind but HELLO needs the session: before it, the stream is not the protocol.
    if (this.#session === undefined) {
      this.#fail(
        new ProtocolError(
          `The first message must be HELLO; got ${message.kind === ClientKind.CALL ? 'CALL' : 'CANCEL'} before it`,
        ),
      );
      return;
    }
    switch (message.kind) {
      case ClientKind.CALL: {
        const { id, method, args } = message;
        if (method === 'openSession' || method === 'resumeSession') {
          this.#carry(id, method, args, message.session);
          break;
        }
        if (message.session === undefined) {
          this.#call(this.#session, id, method, args);
          break;
        }
        const carried = this.#carried?.get(message.session);
        if (carried === undefined || carried.session.ended) {
          this.#carried?.delete(message.session);
          this.#send(
            errorFrame(
              id,
              new LockLostError(
                `No session ${message.session} on this connection: never opened or resumed here, closed, expired, or resumed on another connection`,
                { code: 'SESSION_EXPIRED' },
              ),
            ),
          );
          break;
        }
        this.#call(carried.session, id, method, args);
        break;
      }
      case ClientKind.CANCEL:
        this.#inFlight
          .get(message.id)
          ?.abort(new AbortedError(`Call ${message.id} was cancelled by the client`));
        break;
    }
  }

  #hello(protocol: number, options: HelloOptions): void {
    if (this.#session !== undefined) {
      this.#fail(new ProtocolError('HELLO was already sent on this connection'));
      return;
    }
    if (protocol !== PROTOCOL_VERSION) {
      this.#fail(
        new ProtocolError(
          `This server speaks protocol ${PROTOCOL_VERSION}; the client asked for ${protocol}`,
        ),
      );
      return;
    }
    const digest = this.#host.tokenDigest;
    if (digest !== undefined) {
      const given = createHash('sha256')
        .update(options.token ?? '')
        .digest();
      if (options.token === undefined || !timingSafeEqual(given, digest)) {
        this.#fail(
          new UnauthenticatedError(
            options.token === undefined
              ? 'This server requires a token, and none was sent'
              : "The token sent is not this server's",
          ),
        );
        return;
      }
    }
    const data = this.#host.serving();
    if (data instanceof NotMasterError) {
      // A slave (or a master between two masterships): say where the master is, and close.
      this.#send(errorFrame(0, data));
      this.#flush();
      this.socket.end();
      this.socket.destroySoon();
      this.#closed = true;
      this.#cleanup();
      return;
    }
    let session: Session;
    let resumed = false;
    try {
      if (options.session !== undefined) {
        const found = data.sessions.get(options.session);
        if (found === undefined && options.epoch !== undefined && options.epoch !== data.epoch) {
          // Another master's session that this one did not put back (sessions kept in memory):
          // the client may open a new one here.
          this.#send(
            errorFrame(
              0,
              new LockLostError(
                `The session was opened by the master of epoch ${options.epoch}; this is epoch ${data.epoch} and does not have it: its session and row locks are gone`,
                { code: 'MASTER_CHANGED' },
              ),
            ),
          );
          return;
        }
        if (found === undefined) {
          // The connection stays in its handshake: the client may open a new session.
          this.#send(
            errorFrame(
              0,
              new LockLostError(
                'No such session: it expired, was closed, or the server restarted; its locks are released',
                { code: 'SESSION_EXPIRED' },
              ),
            ),
          );
          return;
        }
        session = found;
        resumed = true;
        // A connection the client gave up on (half-open, or superseded) loses the session.
        const previous = session.sink;
        if (previous instanceof Connection && previous !== this) previous.#detachFor(this);
        if (previous instanceof CarriedSession) previous.takenAway(resumedElsewhere());
      } else {
        session = data.sessions.open(
          options.sessionLeaseMs,
          options.releaseOnDisconnect ?? false,
          options.client ?? '',
        );
      }
    } catch (err) {
      this.#fail(err as LocksmithError);
      return;
    }
    clearTimeout(this.#handshakeTimer);
    this.#handshakeTimer = undefined;
    this.#session = session;
    this.#data = data;
    // The session's end aborts every call in flight here (see abortCalls).
    session.sink = this;
    data.sessions.touch(session);
    const welcome: Welcome = {
      session: session.id,
      resumed,
      sessionLeaseMs: session.leaseMs,
      lockLeaseMs: this.#host.lockLeaseMs,
      rowLockWaitMs: this.#host.rowLockWaitMs,
      maxFrameBytes: this.#host.limits.maxFrameBytes,
      maxInFlight: this.#host.limits.maxInFlight,
      server: this.#host.serverName,
      locks: [...session.locks].map(([lockId, held]): [string, string] => [lockId, held.table]),
      epoch: data.epoch,
      role: data.role,
    };
    this.#send([ServerKind.WELCOME, PROTOCOL_VERSION, welcome]);
  }

  #call(session: Session, id: number, method: string, args: unknown[]): void {
    const dispatcher = this.#data?.dispatcher;
    if (session.ended || dispatcher === undefined) {
      this.#send(
        errorFrame(
          id,
          new LockLostError(`Session ${session.label} has ended`, { code: 'SESSION_EXPIRED' }),
        ),
      );
      return;
    }
    if (this.#inFlight.has(id)) {
      this.#send(errorFrame(id, new ProtocolError(`Call id ${id} is already in flight`)));
      return;
    }
    if (!isMethod(method)) {
      const err = new UnsupportedOperationError(`Unknown method ${JSON.stringify(method)}`);
      this.#send(errorFrame(id, err));
      this.#host.record('unknown', false);
      return;
    }
    if (this.#inFlight.size >= this.#host.limits.maxInFlight) {
      const err = new LimitExceededError(
        `This connection has ${this.#inFlight.size} calls in flight; the limit is ${this.#host.limits.maxInFlight}`,
      );
      this.#send(errorFrame(id, err));
      this.#host.record(method, false);
      return;
    }
    const call = new InFlight(session);
    this.#inFlight.set(id, call);
    let gated = false;
    const lane =
      CALLS[method].lane === 'priority' ? this.#host.lanes.priority : this.#host.lanes.handler;
    lane
      .run((slot) => {
        call.slot = slot;
        // A call queued for a handler whose connection closed, or whose session or server
        // ended, meanwhile is not started: nobody is there for its answer, and a shutdown
        // must not wait behind work queued for clients that are gone.
        if (call.aborted) return Promise.reject(call.reason);
        if (this.#gateHead === this.#gate.length && !this.#overBound()) {
          return dispatcher.call(method, args, call);
        }
        gated = true;
        slot.yield();
        return new Promise<void>((resolve) => this.#gate.push(resolve)).then(() => {
          if (call.aborted) throw call.reason;
          return dispatcher.call(method, args, call);
        });
      })
      .then(
        (value) => {
          this.#inFlight.delete(id);
          this.#host.record(method, true);
          this.#send([ServerKind.RESULT, id, value]);
          if (gated) this.#gateDone();
        },
        (err: unknown) => {
          this.#inFlight.delete(id);
          this.#host.record(method, false);
          this.#send(errorFrame(id, err));
          if (gated) this.#gateDone();
        },
      );
  }

  /** A gated call answered (its answer now counts in the socket's unsent bytes). */
  #gateDone(): void {
    this.#gateRunning--;
    this.#pumpGate();
  }

  /** Starts the next gated call if the client has read enough (one gated call at a time). */
  #pumpGate(): void {
    if (this.#gateRunning > 0 || this.#gateHead === this.#gate.length) return;
    if (!this.#closed && this.#overBound()) return;
    const next = this.#gate[this.#gateHead] as () => void;
    this.#gate[this.#gateHead++] = undefined as never;
    if (this.#gateHead === this.#gate.length) {
      this.#gate = [];
      this.#gateHead = 0;
    }
    this.#gateRunning++;
    next();
  }

  #overBound(): boolean {
    return this.socket.writableLength > this.#host.limits.maxBufferedBytes;
  }

  // ---- output ----------------------------------------------------------------------------

  #send(message: unknown[]): void {
    if (this.#closed || this.socket.destroyed || !this.socket.writable) return;
    if (!this.#corked) {
      // Answers finished in one turn of the event loop leave in one write.
      this.#corked = true;
      this.socket.cork();
      setImmediate(() => this.#flush());
    }
    this.socket.write(encodeFrame(message));
    const unsent = this.socket.writableLength;
    const { output, limits } = this.#host;
    output.update(this.#charged, unsent);
    this.#charged = unsent;
    if (unsent > limits.maxBufferedBytes && !this.#paused) {
      // The client is not reading its answers: stop reading its calls until it does.
      this.#paused = true;
      this.socket.pause();
    }
  }

  /**
   * The client does not read its answers and what is held for it is over its bound (or the
   * server's): the connection is dropped at once, its memory with it. An ERROR would wait
   * behind everything the client does not read, so none is sent; its session lives on for its
   * lease, and a client that reads again can resume it on a new connection.
   */
  #overflow(unsent: number): void {
    if (this.#closed) return;
    this.#closed = true;
    this.overflowed = unsent;
    this.socket.destroy();
    this.#cleanup();
  }

  #flush(): void {
    if (!this.#corked) return;
    this.#corked = false;
    this.socket.uncork();
    // What the kernel did not take now waits for the client. Over the connection's bound
    // while the server's budget is spent, the client is one that does not read: it goes.
    const unsent = this.socket.writableLength;
    this.#host.output.update(this.#charged, unsent);
    this.#charged = unsent;
    if (unsent > this.#host.limits.maxBufferedBytes && this.#host.output.exceeded) {
      this.#overflow(unsent);
    }
  }

  #onDrain(): void {
    this.#host.output.update(this.#charged, this.socket.writableLength);
    this.#charged = this.socket.writableLength;
    this.#pumpGate();
    if (this.#paused && !this.#closed) {
      this.#paused = false;
      this.#handlePending();
      if (!this.#paused) this.socket.resume();
    }
  }

  // ---- endings ---------------------------------------------------------------------------

  /** A protocol failure: one ERROR for the connection, then close. */
  #fail(err: LocksmithError): void {
    if (this.#closed) return;
    this.#send(errorFrame(0, err));
    this.#flush();
    this.socket.end();
    this.socket.destroySoon();
    // Stop reading: nothing more from this stream is trusted.
    this.#closed = true;
    this.#cleanup();
  }

  /** The session was resumed on another connection: this one closes without ending it. */
  /**
   * `openSession` and `resumeSession`: answered here, in the order of the frames, so that a
   * call naming the session may follow at once. The number is the client's (unique among the
   * sessions this connection carries), and stays the session's across the client's reconnects.
   */
  #carry(
    id: number,
    method: 'openSession' | 'resumeSession',
    args: unknown[],
    number: number | undefined,
  ): void {
    const data = this.#data;
    const own = this.#session;
    try {
      if (this.#inFlight.has(id)) throw new ProtocolError(`Call id ${id} is already in flight`);
      if (data === undefined || own === undefined) throw new ProtocolError('No HELLO yet');
      if (number !== undefined) {
        throw new InvalidArgumentError(
          `${method} is a call of the connection: it is sent without a session number`,
        );
      }
      if (data.fleet) {
        throw new UnsupportedOperationError(
          `${method}: a fleet server carries one session per connection (open a connection for each session)`,
        );
      }
      const [min, max] = shapeArity(CALLS[method].shape);
      if (args.length < min || args.length > max) {
        throw new InvalidArgumentError(
          `${method} takes ${CALLS[method].shape}, got ${args.length} arguments`,
        );
      }
      const carried = this.#carried ?? new Map<number, CarriedSession>();
      const limit = this.#host.limits.maxSessionsPerConnection;
      let session: Session;
      let n: number;
      if (method === 'openSession') {
        const [num, leaseMs, releaseOnDisconnect] = CALLS.openSession.decodeArgs(args, NO_SCOPE);
        n = num;
        checkNumberFree(carried, n);
        checkRoom(carried, limit);
        session = data.sessions.open(leaseMs, releaseOnDisconnect, own.client);
      } else {
        const [num, sessionId] = CALLS.resumeSession.decodeArgs(args, NO_SCOPE);
        n = num;
        checkNumberFree(carried, n);
        const found = data.sessions.get(sessionId);
        if (found === undefined) {
          throw new LockLostError(
            'No such session: it expired, was closed, or the server restarted; its locks are released',
            { code: 'SESSION_EXPIRED' },
          );
        }
        if (found === own) {
          throw new InvalidArgumentError("resumeSession: that is this connection's own session");
        }
        session = found;
        const previous = session.sink;
        if (previous instanceof CarriedSession && previous.carrier === this) {
          // Carried here already under another number: the new number replaces it.
          previous.takenAway(resumedElsewhere());
        } else {
          checkRoom(carried, limit);
          if (previous instanceof Connection) previous.#detachFor(this);
          if (previous instanceof CarriedSession) previous.takenAway(resumedElsewhere());
        }
      }
      const next = new CarriedSession(this, n, session);
      carried.set(n, next);
      this.#carried = carried;
      this.heardAt = data.sessions.monotonic();
      session.sink = next;
      data.sessions.touch(session);
      const value =
        method === 'openSession'
          ? CALLS.openSession.encodeResult({ id: session.id, leaseMs: session.leaseMs })
          : CALLS.resumeSession.encodeResult({
              leaseMs: session.leaseMs,
              locks: [...session.locks].map(([lockId, held]): [string, string] => [
                lockId,
                held.table,
              ]),
            });
      this.#host.record(method, true);
      this.#send([ServerKind.RESULT, id, value]);
    } catch (err) {
      this.#host.record(method, false);
      this.#send(errorFrame(id, err));
    }
  }

  #detachFor(_other: Connection): void {
    this.#session = undefined;
    this.close(new ConnectionLostError('The session was resumed on another connection'));
  }

  #onClose(): void {
    this.#closed = true;
    this.#cleanup();
  }

  #cleanup(): void {
    clearTimeout(this.#handshakeTimer);
    this.#host.output.update(this.#charged, 0);
    this.#charged = 0;
    this.#pending = [];
    this.#pendingHead = 0;
    // Gated calls were aborted above: woken, each fails at once (nobody gets its answer).
    const gate = this.#gate.slice(this.#gateHead);
    this.#gate = [];
    this.#gateHead = 0;
    this.#gateRunning += gate.length;
    for (const wake of gate) wake();
    const lost = new ConnectionLostError('The connection closed');
    for (const call of this.#inFlight.values()) call.abort(lost);
    const session = this.#session;
    const data = this.#data;
    this.#session = undefined;
    const carried = this.#carried;
    this.#carried = undefined;
    for (const c of carried?.values() ?? []) {
      if (c.session.sink !== c) continue;
      c.release();
      if (c.session.releaseOnDisconnect)
        data?.sessions.end(c.session, endedWithConnection(c.session));
    }
    if (session !== undefined && session.sink === this) {
      session.sink = undefined;
      if (session.releaseOnDisconnect) data?.sessions.end(session, endedWithConnection(session));
    }
    this.#host.forget(this);
  }
}

/** The decoders of `openSession` and `resumeSession` name no table: they need no scope. */
const NO_SCOPE = undefined as never;

function checkNumberFree(carried: ReadonlyMap<number, CarriedSession>, n: number): void {
  const other = carried.get(n);
  if (other !== undefined && !other.session.ended) {
    throw new InvalidArgumentError(`Session number ${n} is in use on this connection`);
  }
}

function checkRoom(carried: ReadonlyMap<number, CarriedSession>, limit: number): void {
  if (carried.size >= limit) {
    throw new LimitExceededError(
      `This connection carries ${carried.size} sessions besides its own; the limit is ${limit}`,
    );
  }
}

function resumedElsewhere(): ConnectionLostError {
  return new ConnectionLostError('The session was resumed on another connection');
}

function endedWithConnection(session: Session): LockLostError {
  return new LockLostError(
    `Session ${session.label} ended with its connection (releaseOnDisconnect)`,
    { code: 'SESSION_EXPIRED' },
  );
}
