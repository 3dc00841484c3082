import {
  AbortedError,
  ConnectionLostError,
  type LocksmithError,
  LockTimeoutError,
} from '../core/errors.js';
import type { Method } from '../wire/calls.js';
import { MAX_CALL_ID } from '../wire/messages.js';

export interface CallOptions {
  signal?: AbortSignal | undefined;
  /** Overrides the connection's `callTimeoutMs` for this call (milliseconds; 0: none). */
  timeoutMs?: number | undefined;
  /** The call can be sent again after a lost connection (a read, a ping). */
  idempotent?: boolean | undefined;
  /**
   * The call waits on the server (for a row lock) until `until` (a `performance.now()` time),
   * and `args[arg]` is that wait in milliseconds. Each send carries what is left of it, so a
   * call sent again after a lost connection never waits past its bound; and a call still
   * waiting for a connection at `until` fails with `LOCK_TIMEOUT`, as the server would have
   * answered (it was not sent, or is sent again: nothing of it was applied).
   */
  wait?: { until: number; arg: number } | undefined;
  /**
   * The number of a session the connection carries besides its own (`openSession`): the call
   * is made in that session. Absent: in the connection's own session.
   */
  session?: number | undefined;
}

/** A call the client made and the server has not answered (or answered after the caller left). */
export interface PendingCall {
  readonly method: Method;
  readonly args: unknown[];
  readonly options: CallOptions;
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: LocksmithError) => void;
  /** Monotonic time the call was last sent (0: not sent on this connection yet). */
  sentAt: number;
  /** `performance.now()` past which the call gives up (Infinity: never). */
  deadline: number;
  /** Its round-trip timeout, for the message. */
  timeoutMs: number;
  /** The caller has its answer, or gave up: a later answer goes to the late-result hook. */
  settled: boolean;
  onAbort: (() => void) | undefined;
}

/** What the calls need of their connection. */
export interface PendingCallsHost {
  /** Sends the call now if a connection is ready, or {@link PendingCalls.queue}s it. */
  dispatch(id: number, call: PendingCall): void;
  /** Asks the server to cancel a sent call; false if there is no connection to ask on. */
  cancelSent(id: number): boolean;
}

/**
 * The calls of one client in flight: their ids (unique among the calls in flight, 1..2^32-1),
 * their deadlines and signals, the queue of calls waiting for a connection, and what becomes
 * of each when the connection drops.
 *
 * One timer serves every call's deadline, armed for the earliest it knows of (a timer per
 * call would be a visible share of a fast call's cost). It keeps the process alive only while
 * some call with a deadline is unsettled.
 *
 * A call whose caller gave up (timeout, abort) stays listed until its answer, if it was sent
 * and the server was asked to cancel it: that answer may grant a lock, which the connection's
 * late-result hook gives back.
 */
export class PendingCalls {
  readonly #host: PendingCallsHost;
  readonly #calls = new Map<number, PendingCall>();
  #queued: number[] = [];
  #nextId = 1;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #deadlineAt = Number.POSITIVE_INFINITY;
  #timedCalls = 0;
  #closed = false;

  constructor(host: PendingCallsHost) {
    this.#host = host;
  }

  /** Calls listed (in flight, queued, or given up and awaiting their answer). */
  get size(): number {
    return this.#calls.size;
  }

  /** Starts a call: resolves with its result, rejects with its error, timeout or abort. */
  start(
    method: Method,
    args: unknown[],
    options: CallOptions,
    defaultTimeoutMs: number,
  ): Promise<unknown> {
    if (this.#closed) return Promise.reject(new ConnectionLostError('The client is closed'));
    const { signal } = options;
    if (signal?.aborted) {
      return Promise.reject(new AbortedError(`${method} was aborted`, { cause: signal.reason }));
    }
    return new Promise<unknown>((resolve, reject) => {
      const id = this.#takeId();
      const call: PendingCall = {
        method,
        args,
        options,
        resolve,
        reject,
        sentAt: 0,
        deadline: Number.POSITIVE_INFINITY,
        timeoutMs: options.timeoutMs ?? defaultTimeoutMs,
        settled: false,
        onAbort: undefined,
      };
      this.#calls.set(id, call);
      const { timeoutMs } = call;
      if (timeoutMs > 0 && Number.isFinite(timeoutMs)) {
        call.deadline = performance.now() + timeoutMs;
        if (++this.#timedCalls === 1) this.#deadlineTimer?.ref();
        if (call.deadline < this.#deadlineAt) this.#armDeadline(call.deadline);
      }
      if (signal !== undefined) {
        call.onAbort = () =>
          this.cancel(id, new AbortedError(`${method} was aborted`, { cause: signal.reason }));
        signal.addEventListener('abort', call.onAbort, { once: true });
      }
      this.#host.dispatch(id, call);
    });
  }

  get(id: number): PendingCall | undefined {
    return this.#calls.get(id);
  }

  /** The server answered call `id`: it is no longer listed. */
  answered(id: number): PendingCall | undefined {
    const call = this.#calls.get(id);
    if (call !== undefined) this.#calls.delete(id);
    return call;
  }

  /** Call `id` waits for the next connection (not sent, or refused before it ran). */
  queue(id: number): void {
    const call = this.#calls.get(id);
    if (call === undefined) return;
    call.sentAt = 0;
    if (!this.#queued.includes(id)) this.#queued.push(id);
    const until = call.options.wait?.until;
    if (until !== undefined && !call.settled && until < this.#deadlineAt) this.#armDeadline(until);
  }

  /** The call's arguments for a send now: a server-side wait shortened to what is left. */
  argsToSend(call: PendingCall): unknown[] {
    const wait = call.options.wait;
    if (wait === undefined) return call.args;
    call.args[wait.arg] = Math.max(0, Math.ceil(wait.until - performance.now()));
    return call.args;
  }

  /** The calls waiting for a connection, taken off the queue (a new connection sends them). */
  takeQueued(): [number, PendingCall][] {
    const ids = this.#queued;
    this.#queued = [];
    const out: [number, PendingCall][] = [];
    for (const id of ids) {
      const call = this.#calls.get(id);
      if (call !== undefined && !call.settled) out.push([id, call]);
    }
    return out;
  }

  /** The call's answer reached its caller, or the caller gave up: no timer, no listener. */
  settle(call: PendingCall): void {
    call.settled = true;
    if (call.deadline !== Number.POSITIVE_INFINITY) {
      call.deadline = Number.POSITIVE_INFINITY;
      if (--this.#timedCalls === 0) this.#deadlineTimer?.unref();
    }
    if (call.onAbort !== undefined) {
      call.options.signal?.removeEventListener('abort', call.onAbort);
    }
  }

  /** The caller gives up on a call (timeout, abort): the server is asked to cancel it. */
  cancel(id: number, err: LocksmithError): void {
    const call = this.#calls.get(id);
    if (call === undefined || call.settled) return;
    this.settle(call);
    call.reject(err);
    // Kept until the answer when the server was asked, so a lock granted meanwhile is given back.
    if (call.sentAt === 0 || !this.#host.cancelSent(id)) this.#calls.delete(id);
  }

  /**
   * The connection dropped. A call never sent, or safe to send again (`idempotent`), waits for
   * the next connection; any other fails with `CONNECTION_LOST`: the server may or may not
   * have applied it. Calls whose callers gave up are forgotten (no answer will come).
   */
  connectionLost(reason: ConnectionLostError): void {
    for (const [id, call] of [...this.#calls]) {
      if (call.settled) {
        this.#calls.delete(id);
        continue;
      }
      if (call.sentAt === 0 || call.options.idempotent === true) {
        this.queue(id);
        continue;
      }
      this.#calls.delete(id);
      this.settle(call);
      call.reject(
        new ConnectionLostError(
          `${call.method}: ${reason.message}; the server may or may not have applied it`,
          { cause: reason },
        ),
      );
    }
  }

  /** Every call fails with `reason`; no call starts from now on. */
  close(reason: LocksmithError): void {
    this.#closed = true;
    clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = undefined;
    for (const call of this.#calls.values()) {
      if (!call.settled) {
        this.settle(call);
        call.reject(reason);
      }
    }
    this.#calls.clear();
    this.#queued = [];
  }

  #takeId(): number {
    for (;;) {
      const id = this.#nextId;
      this.#nextId = id >= MAX_CALL_ID ? 1 : id + 1;
      if (!this.#calls.has(id)) return id;
    }
  }

  /** (Re)arms the one timeout timer for `at` (a `performance.now()` time). */
  #armDeadline(at: number): void {
    clearTimeout(this.#deadlineTimer);
    this.#deadlineAt = at;
    this.#deadlineTimer = setTimeout(() => this.#onDeadline(), Math.max(0, at - performance.now()));
    if (this.#timedCalls === 0) this.#deadlineTimer.unref();
  }

  /** Gives up on every call past its deadline, and re-arms for the earliest one left. */
  #onDeadline(): void {
    this.#deadlineTimer = undefined;
    this.#deadlineAt = Number.POSITIVE_INFINITY;
    const now = performance.now();
    let next = Number.POSITIVE_INFINITY;
    for (const [id, call] of [...this.#calls]) {
      if (call.settled) continue;
      const waitUntil = call.sentAt === 0 ? call.options.wait?.until : undefined;
      if (waitUntil !== undefined && waitUntil <= now) {
        this.cancel(
          id,
          new LockTimeoutError(
            `${call.method}: its wait for a row lock ran out while no server could be reached`,
          ),
        );
      } else if (call.deadline <= now) {
        this.cancel(
          id,
          new ConnectionLostError(`${call.method} got no answer within ${call.timeoutMs} ms`),
        );
      } else {
        next = Math.min(next, call.deadline, waitUntil ?? Number.POSITIVE_INFINITY);
      }
    }
    if (next !== Number.POSITIVE_INFINITY && !this.#closed) this.#armDeadline(next);
  }
}
