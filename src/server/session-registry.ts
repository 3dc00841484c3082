import type { Clock } from '../core/clock.js';
import { InvalidArgumentError, LimitExceededError, LockLostError } from '../core/errors.js';
import { LeaseQueue } from '../rows/lease-queue.js';
import { Session } from './session.js';
import { sessionKey } from './session-journal.js';

export interface SessionLimits {
  /** Lease of a session whose client asks for none. */
  defaultLeaseMs: number;
  minLeaseMs: number;
  maxLeaseMs: number;
  /** Sessions at once (connected or within their lease); a new one beyond is refused. */
  maxSessions: number;
}

/**
 * Every session of a server, with all their leases on one timer. A session's deadline moves
 * forward on every frame from its connection ({@link touch}); when it passes, the session
 * ends: `onEnd` releases what it held (locks, scanners) and its connection, if any, is told
 * and closed. Ending is idempotent and synchronous up to `onEnd`, so a session never ends
 * twice and nothing it held survives it.
 */
export class SessionRegistry {
  readonly #sessions = new Map<string, Session>();
  readonly #clock: Clock;
  readonly #limits: SessionLimits;
  readonly #leases: LeaseQueue<Session>;
  readonly #onEnd: (session: Session, reason: LockLostError) => void;
  readonly #onOpen: ((session: Session) => void) | undefined;
  #expired = 0;

  /** `onOpen` is told of every new session (not of one put back by {@link restore}). */
  constructor(
    clock: Clock,
    limits: SessionLimits,
    onEnd: (session: Session, reason: LockLostError) => void,
    onOpen?: (session: Session) => void,
  ) {
    this.#clock = clock;
    this.#limits = limits;
    this.#onEnd = onEnd;
    this.#onOpen = onOpen;
    this.#leases = new LeaseQueue<Session>(
      clock,
      (s) => !s.ended,
      (s) => this.#expire(s, true),
      false,
    );
  }

  get size(): number {
    return this.#sessions.size;
  }

  /** Sessions ended by their lease running out, since the server started. */
  get expired(): number {
    return this.#expired;
  }

  all(): IterableIterator<Session> {
    return this.#sessions.values();
  }

  /** A new session; its lease is the client's ask, bounded by the server's limits. */
  open(leaseMs: number | undefined, releaseOnDisconnect: boolean, client: string): Session {
    const { defaultLeaseMs, minLeaseMs, maxLeaseMs } = this.#limits;
    const lease = leaseMs === undefined || leaseMs === 0 ? defaultLeaseMs : leaseMs;
    if (lease < minLeaseMs || lease > maxLeaseMs) {
      throw new InvalidArgumentError(
        `A session lease must be between ${minLeaseMs} ms and ${maxLeaseMs} ms, got ${lease} ms`,
      );
    }
    this.#checkRoom();
    const session = new Session(lease, releaseOnDisconnect, client, this.#clock.monotonic());
    this.#add(session);
    this.#onOpen?.(session);
    return session;
  }

  /**
   * Puts back a session recorded before a restart or a failover, with a full lease from now
   * (as etcd renews every lease to its full TTL when a new leader takes over): no session
   * ends because the server changed. Its limits are not checked again.
   */
  restore(recorded: {
    key: string;
    leaseMs: number;
    releaseOnDisconnect: boolean;
    client: string;
  }): Session {
    const { key, leaseMs, releaseOnDisconnect, client } = recorded;
    const session = new Session(leaseMs, releaseOnDisconnect, client, this.#clock.monotonic(), {
      key,
    });
    this.#add(session);
    return session;
  }

  #add(session: Session): void {
    this.#sessions.set(session.key, session);
    this.#leases.add(session);
  }

  /**
   * The live session with this id, or undefined (expired, closed, or never existed). A
   * session put back from the journal learns its id here.
   */
  get(id: string): Session | undefined {
    const session = this.#sessions.get(sessionKey(id));
    if (session === undefined) return undefined;
    // A lease that ran out while the timer had not fired yet is over all the same.
    if (this.#clock.monotonic() >= session.deadline) {
      this.#expire(session, false);
      return undefined;
    }
    if (session.id === '') session.id = id;
    return session;
  }

  #checkRoom(): void {
    if (this.#sessions.size >= this.#limits.maxSessions) {
      throw new LimitExceededError(
        `The server has ${this.#sessions.size} sessions; the limit is ${this.#limits.maxSessions} (a session lasts until it is closed or its lease runs out)`,
      );
    }
  }

  /** The registry's clock, now (what leases are counted on). */
  monotonic(): number {
    return this.#clock.monotonic();
  }

  /** Renews the session's lease from now. */
  touch(session: Session): void {
    if (!session.ended) session.deadline = this.#clock.monotonic() + session.leaseMs;
  }

  /** What is left of the session's lease, in ms (0 once it ran out). */
  leaseRemainingMs(session: Session): number {
    return Math.max(0, session.deadline - this.#clock.monotonic());
  }

  /** Ends the session now, releasing everything it holds; idempotent. */
  end(session: Session, reason: LockLostError): void {
    this.#end(session, reason, false);
  }

  #end(session: Session, reason: LockLostError, dequeued: boolean): void {
    if (session.ended) return;
    session.ended = true;
    this.#sessions.delete(session.key);
    // The lease queue already counted an item it hands to onDue as removed.
    if (!dequeued) this.#leases.remove();
    session.abortWaits(reason);
    this.#onEnd(session, reason);
  }

  /** Ends every session (server shutdown). */
  close(reason: LockLostError): void {
    for (const session of [...this.#sessions.values()]) this.end(session, reason);
    this.#leases.close();
  }

  #expire(session: Session, dequeued: boolean): void {
    if (session.ended) return;
    this.#expired++;
    this.#end(
      session,
      new LockLostError(
        `Session ${session.label} expired: nothing was heard from its client for ${session.leaseMs} ms`,
        { code: 'SESSION_EXPIRED' },
      ),
      dequeued,
    );
  }
}
