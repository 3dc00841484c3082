import type { Clock } from '../core/clock.js';

/**
 * The session's lease as the client tracks it, conservatively: a reply to a call sent at
 * monotonic time `t` proves the session alive until `t + lease` and no later (the server may
 * have heard the call late, never early). When that time passes with no later proof, the
 * session counts as lost here ({@link onExpired}) before the server can have released its
 * locks to anyone else.
 */
export class SessionLease {
  readonly #clock: Clock;
  readonly #onExpired: () => void;
  #validUntil = 0;
  #timer: NodeJS.Timeout | undefined;

  /** `onExpired` runs once the lease passes with no later proof (not after {@link end}). */
  constructor(clock: Clock, onExpired: () => void) {
    this.#clock = clock;
    this.#onExpired = onExpired;
  }

  /** Monotonic time until which the session is known alive (0: not known alive). */
  get validUntil(): number {
    return this.#validUntil;
  }

  /** A reply to a call sent at `sentAt` arrived: the session was alive then, for `leaseMs`. */
  aliveAt(sentAt: number, leaseMs: number): void {
    const until = sentAt + leaseMs;
    if (until <= this.#validUntil) return;
    this.#validUntil = until;
    if (this.#timer === undefined) this.#arm();
  }

  /** The session is gone (or being replaced): nothing is known alive, no expiry will fire. */
  end(): void {
    this.#validUntil = 0;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(): void {
    const delay = Math.max(0, this.#validUntil - this.#clock.monotonic());
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#validUntil === 0) return;
      // A proof that came meanwhile moved the end: wait for it (one timer, re-armed lazily).
      if (this.#clock.monotonic() < this.#validUntil) this.#arm();
      else this.#onExpired();
    }, delay);
    this.#timer.unref();
  }
}

/** How long a connection may hear nothing before it counts as dead: 5/8 of the session lease. */
export function silenceLimitMs(sessionLeaseMs: number): number {
  return Math.floor((sessionLeaseMs * 5) / 8);
}
