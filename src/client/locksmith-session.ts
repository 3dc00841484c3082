import { EventEmitter } from 'node:events';
import type { Clock } from '../core/clock.js';
import { LockLostError } from '../core/errors.js';
import type { CallArgs, Method } from '../wire/calls.js';
import { HeldLocks } from './held-locks.js';
import { RemoteTable, type TableClient, tableNamed } from './remote-table.js';
import type { CallLimits, TypedCall } from './typed-call.js';

export interface LocksmithSessionEvents {
  /** The session ended (its lease ran out, the server lost it, or it could not be resumed); every lock it held is lost. */
  lost: [reason: LockLostError];
}

/** What a {@link LocksmithSession} needs of the client whose connection carries it. */
export interface SessionCarrier {
  readonly clock: Clock;
  /** Calls in the connection's own session (`openSession`, `resumeSession`). */
  readonly call: TypedCall;
  readonly callTimeoutMs: number;
  /** The connection is up. */
  readonly connected: boolean;
  /** Until when the connection's own session is known alive (monotonic; 0: not known). */
  readonly validUntil: number;
  /** The connection's own session lease (what `validUntil` counts). */
  readonly leaseMs: number | undefined;
  readonly rowLockWaitMs: number;
  /** The session was closed or lost: the client stops carrying it. */
  forget(session: LocksmithSession): void;
}

/**
 * A session of its own over the connection of a {@link LocksmithClient} (`client.openSession()`):
 * as etcd multiplexes leases over one gRPC connection, a process with many independent owners
 * of locks (workers, tenants, jobs) opens one connection and a session for each, where each
 * session would otherwise cost a connection. Its locks are its own: another session, the
 * client's own included, can neither use nor release them, and waits for them like anyone.
 *
 * It lives as long as its lease, renewed by every frame of the connection; after a reconnect,
 * or on the new master after a failover with durable sessions, the client resumes it (same id,
 * same locks) before anything else is sent. A session that cannot be resumed, or that the server
 * ends, is `lost` with its locks. `close()` ends it on the server, releasing its locks.
 */
export class LocksmithSession
  extends EventEmitter<LocksmithSessionEvents>
  implements AsyncDisposable
{
  /** The number the connection knows it by (the client's, kept across reconnects). */
  readonly number: number;
  readonly #carrier: SessionCarrier;
  readonly #id: string;
  readonly #leaseMs: number;
  readonly #call: TypedCall;
  readonly #locks: HeldLocks;
  readonly #tableClient: TableClient;
  readonly #tables = new Map<string, RemoteTable>();
  /** Carried by the connection now (opened or resumed on it). */
  #attached = true;
  /** Monotonic time of the latest send known to have renewed it (see {@link #validUntil}). */
  #provenAt: number;
  #lostReason: LockLostError | undefined;
  #closing: Promise<void> | undefined;

  /** @internal Use `client.openSession()`. */
  constructor(
    carrier: SessionCarrier,
    number: number,
    opened: { id: string; leaseMs: number; sentAt: number },
    call: TypedCall,
  ) {
    super();
    this.#carrier = carrier;
    this.number = number;
    this.#id = opened.id;
    this.#leaseMs = opened.leaseMs;
    this.#provenAt = opened.sentAt;
    // A server that no longer knows the session (resumed on another connection, ended) says
    // so to its next call: the session is lost here at once, whatever its lease says.
    const unguarded = call;
    const guarded = (<M extends Method>(method: M, args: CallArgs<M>, options?: CallLimits) =>
      unguarded(method, args, options).catch((err: unknown) => {
        if ((err as { code?: unknown }).code === 'SESSION_EXPIRED') {
          this.lose(
            new LockLostError(`Session ${number}: ${(err as Error).message}`, {
              code: 'SESSION_EXPIRED',
            }),
          );
        }
        throw err;
      })) as TypedCall;
    call = guarded;
    this.#call = call;
    this.#locks = new HeldLocks({
      clock: carrier.clock,
      sessionValidUntil: () => this.#validUntil(),
      giveBack: (table, lockId) => call('unlockRow', [table, lockId]),
      sessionId: () => this.#id,
    });
    const session = { id: this.#id, leaseMs: this.#leaseMs };
    const self = this;
    this.#tableClient = {
      call,
      locks: this.#locks,
      now: () => carrier.clock.monotonic(),
      get rowLockWaitMs() {
        return carrier.rowLockWaitMs;
      },
      callTimeoutMs: carrier.callTimeoutMs,
      scanBatch: 100,
      get connected() {
        return carrier.connected && self.#attached;
      },
      get session() {
        return self.#lostReason === undefined ? session : undefined;
      },
    };
  }

  /** The session's secret id (it resumes the session; never log it). */
  get id(): string {
    return this.#id;
  }

  get leaseMs(): number {
    return this.#leaseMs;
  }

  /** Row locks this session holds now. */
  get heldLocks(): number {
    return this.#locks.size;
  }

  /** Why the session ended, once it did (undefined while it lives). */
  get lostReason(): LockLostError | undefined {
    return this.#lostReason;
  }

  /** A table by name, through this session (no round trip). */
  table(name: string): RemoteTable {
    return tableNamed(this.#tables, name, () => new RemoteTable(name, this.#tableClient));
  }

  /** Ends the session on the server (its locks are released). Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#locks.clientClosed();
      this.#carrier.forget(this);
      if (this.#lostReason !== undefined || !this.#carrier.connected) return;
      await this.#call('closeSession', [], { timeoutMs: 5_000 }).catch(() => undefined);
    })();
    return this.#closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /**
   * Until when the session is known alive, conservatively (as the client's own session, see
   * `SessionLease`): from its opening or resumption, and, while the connection carries it, from
   * any later send of the connection that was answered, since each frame renewed it.
   */
  #validUntil(): number {
    if (this.#lostReason !== undefined) return 0;
    let proven = this.#provenAt;
    const { validUntil, leaseMs } = this.#carrier;
    if (this.#attached && validUntil > 0 && leaseMs !== undefined) {
      proven = Math.max(proven, validUntil - leaseMs);
    }
    return proven + this.#leaseMs;
  }

  /** @internal The connection dropped: the session's lease runs from what was last proven. */
  disconnected(): void {
    if (!this.#attached) return;
    this.#provenAt = this.#validUntil() - this.#leaseMs;
    this.#attached = false;
  }

  /**
   * @internal A connection is up again: resumes the session on it, first of all its calls
   * (the client calls this before the calls queued meanwhile go out).
   */
  reconnected(): void {
    if (this.#lostReason !== undefined || this.#closing !== undefined) return;
    const sentAt = this.#carrier.clock.monotonic();
    this.#carrier.call('resumeSession', [this.number, this.#id]).then(
      (resumed) => {
        this.#provenAt = Math.max(this.#provenAt, sentAt);
        this.#attached = true;
        this.#locks.reconnected(true, resumed.locks);
      },
      (err: unknown) => {
        const code = (err as { code?: unknown }).code;
        // A connection lost again meanwhile: the next reconnect tries again.
        if (code === 'CONNECTION_LOST' || code === 'TIMEOUT') return;
        this.lose(
          new LockLostError(
            `Session ${this.number} could not be resumed: ${(err as Error).message}`,
            { code: code === 'MASTER_CHANGED' ? 'MASTER_CHANGED' : 'SESSION_EXPIRED' },
          ),
        );
      },
    );
  }

  /** @internal The session is gone: every lock with it. */
  lose(reason: LockLostError): void {
    if (this.#lostReason !== undefined) return;
    this.#lostReason = reason;
    this.#attached = false;
    this.#carrier.forget(this);
    this.#locks.loseAll(reason);
    if (this.listenerCount('lost') > 0) this.emit('lost', reason);
  }

  /** @internal The server's `lockLost` notice, if the lock is this session's. */
  lockLost(lockId: unknown, data: unknown): boolean {
    if (typeof lockId !== 'string' || this.#locks.get(lockId) === undefined) return false;
    this.#locks.lockLost(data);
    return true;
  }

  /** @internal A result its caller gave up on: a lock it grants is given back. */
  lateResult(method: Method, args: readonly unknown[], value: unknown): void {
    this.#locks.lateResult(method, args, value);
  }
}
