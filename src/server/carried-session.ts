import type { Session, SessionSink } from './session.js';

/** What a connection does for the sessions it carries besides its own. */
export interface Carrier {
  /** When the connection last sent a frame (monotonic): every frame renews every session it carries. */
  readonly heardAt: number;
  notify(notice: string, data: unknown): void;
  /** Aborts the calls in flight of `session` on this connection. */
  abortCallsOf(session: Session, reason: Error): void;
  /** `carried` is no longer carried here. */
  forget(carried: CarriedSession): void;
  /** Tells the client that its session `number` ended (NOTICE `sessionEnded`). */
  tellEnded(number: number, code: string, message: string): void;
  /** Drops the connection without a word (the server closes or steps down). */
  disconnect(): void;
}

/**
 * A session that a connection carries besides its own, under the number its client gave it
 * (`openSession`, `resumeSession`): as etcd multiplexes many leases over one connection, a
 * client with many owners of locks needs one connection, not one each. The session is a whole
 * session (its own locks, scanners, lease and record in the session journal); only its
 * transport is shared. Its lease runs from the connection's last frame while carried, and from
 * the moment it stops being carried after that.
 */
export class CarriedSession implements SessionSink {
  readonly #carrier: Carrier;
  readonly number: number;
  readonly session: Session;

  constructor(carrier: Carrier, number: number, session: Session) {
    this.#carrier = carrier;
    this.number = number;
    this.session = session;
  }

  get carrier(): Carrier {
    return this.#carrier;
  }

  get heardAt(): number {
    return this.#carrier.heardAt;
  }

  notify(notice: string, data: unknown): void {
    this.#carrier.notify(notice, data);
  }

  abortCalls(reason: Error): void {
    this.#carrier.abortCallsOf(this.session, reason);
  }

  forgotten(): void {
    this.#carrier.forget(this);
  }

  sessionEnded(code: string, message: string): void {
    this.#carrier.forget(this);
    this.#carrier.tellEnded(this.number, code, message);
  }

  disconnect(): void {
    this.release();
    this.#carrier.forget(this);
    this.#carrier.disconnect();
  }

  /**
   * Stops carrying the session (its connection closed, or another took it): its lease now
   * runs from the connection's last frame, as it would after the client's last word.
   */
  release(): void {
    if (this.session.sink !== this) return;
    const deadline = this.session.deadline;
    this.session.sink = undefined;
    this.session.deadline = deadline;
  }

  /** Another connection resumed the session: its calls in flight here stop, and it goes. */
  takenAway(reason: Error): void {
    this.release();
    this.#carrier.forget(this);
    this.#carrier.abortCallsOf(this.session, reason);
  }
}
