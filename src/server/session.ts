import { randomBytes } from 'node:crypto';
import type { RowLock } from '../rows/row-lock.js';

/** A row lock held by a session, with the table it belongs to. */
export interface HeldLock {
  readonly table: string;
  readonly lock: RowLock;
}

/** Where a session's notices go while a connection is attached. */
export interface SessionSink {
  notify(notice: string, data: unknown): void;
  /** The session ended: the connection says why and closes. */
  sessionEnded(code: 'SESSION_EXPIRED' | 'ALREADY_CLOSED', message: string): void;
}

/**
 * A client's session (after etcd's): the owner of its row locks and scanners, with a lease
 * that every frame from its connection renews. It outlives its connection for the rest of the
 * lease, so a client that reconnects in time resumes it, locks included; when the lease runs
 * out, or the client closes it, everything it holds is released (`SessionRegistry.end`).
 *
 * The id is 128 random bits: holding it is what lets a connection resume the session, so it
 * is never logged in full nor shown on a status page (see {@link label}).
 */
export class Session {
  readonly id = randomBytes(16).toString('base64url');
  readonly leaseMs: number;
  readonly releaseOnDisconnect: boolean;
  readonly client: string;
  readonly openedAt = Date.now();
  /** Monotonic deadline of the lease (the registry's lease queue reads it). */
  deadline: number;
  sink: SessionSink | undefined;
  readonly locks = new Map<string, HeldLock>();
  readonly scanners = new Set<string>();
  /** Row lock waits in flight (bounded per session). */
  waiting = 0;
  ended = false;
  /** Aborts the session's lock waits when it ends. */
  readonly #ending = new AbortController();

  constructor(leaseMs: number, releaseOnDisconnect: boolean, client: string, now: number) {
    this.leaseMs = leaseMs;
    this.releaseOnDisconnect = releaseOnDisconnect;
    this.client = client;
    this.deadline = now + leaseMs;
  }

  /** Aborts when the session ends: pass it to everything the session waits for. */
  get signal(): AbortSignal {
    return this.#ending.signal;
  }

  /** A short, non-secret name for logs and status: the id's first 6 characters. */
  get label(): string {
    return `${this.id.slice(0, 6)}…`;
  }

  /** @internal */
  abortWaits(reason: Error): void {
    this.#ending.abort(reason);
  }
}
