import { randomBytes } from 'node:crypto';
import type { LockLostError } from '../core/errors.js';
import { type RowLock, type RowLockLossObserver, rowLockLost } from '../rows/row-lock.js';
import { CONCURRENT_OWNER, type ConcurrentOwner } from '../rows/wait-for-graph.js';
import { sessionKey } from './session-journal.js';

/** What {@link Session.locks} reads as until the session's first lock: shared, never written. */
const NO_LOCKS: ReadonlyMap<string, HeldLock> = new Map();

/** A row lock held by a session, with the table it belongs to. */
export interface HeldLock {
  readonly table: string;
  readonly lock: RowLock;
}

/** Where a session's notices go while a connection is attached. */
export interface SessionSink {
  notify(notice: string, data: unknown): void;
  /** The session is ending: its calls in flight (its lock waits among them) stop with `reason`. */
  abortCalls(reason: Error): void;
  /**
   * For a session a connection carries besides its own: when that connection last sent a
   * frame (monotonic), every frame renewing every session it carries. Absent: the session's
   * lease is renewed by the registry's `touch`.
   */
  readonly heardAt?: number;
  /** The session ended, for whatever reason: a sink that carries it lets it go. */
  forgotten?(): void;
  /** The session ended: the connection says why and closes. */
  sessionEnded(
    code: 'SESSION_EXPIRED' | 'ALREADY_CLOSED' | 'MASTER_CHANGED',
    message: string,
  ): void;
  /**
   * The server closes or steps down while the session stays recorded (durable sessions): the
   * connection drops without a word, so that its client resumes the session where it can.
   */
  disconnect(): void;
}

/**
 * A client's session (after etcd's): the owner of its row locks and scanners, with a lease
 * that every frame from its connection renews. It outlives its connection for the rest of the
 * lease, so a client that reconnects in time resumes it, locks included; when the lease runs
 * out, or the client closes it, everything it holds is released (`SessionRegistry.end`).
 *
 * The id is 128 random bits: holding it is what lets a connection resume the session, so it
 * is never logged, stored nor shown on a status page. The server finds a session by its
 * {@link key} (the id's sha-256), which is what the session journal records; a session put
 * back from the journal learns its id again when its client presents it.
 */
export class Session implements ConcurrentOwner, RowLockLossObserver {
  /** A session runs many calls at once: it waits for itself without deadlock (see WaitForGraph). */
  readonly [CONCURRENT_OWNER] = true;
  /** The secret id; empty for a session put back from the journal until its client resumes it. */
  id: string;
  readonly key: string;
  readonly leaseMs: number;
  readonly releaseOnDisconnect: boolean;
  readonly client: string;
  readonly openedAt = Date.now();
  #deadline: number;
  sink: SessionSink | undefined;
  // Made at the first lock or scanner: most sessions of a busy server hold none at a given
  // moment, and an empty Map or Set with its table is about 200 B of heap.
  #locks: Map<string, HeldLock> | undefined;
  #scanners: Set<string> | undefined;
  /**
   * `lockRow` calls in flight, bounded per session (`maxWaitersPerSession`). Status pages count
   * waits from the row lock managers instead, where every wait (explicit or the implicit lock
   * of a blocked mutation) is counted once.
   */
  lockCalls = 0;
  ended = false;
  /** Hears of the loss of a lock the session holds (set by whoever adopts its locks). */
  onLockLost: ((session: Session, lock: RowLock, reason: LockLostError) => void) | undefined;

  /**
   * A new session (`id` absent: a fresh random one), or one put back from the journal
   * (`id` empty, `key` recorded).
   */
  constructor(
    leaseMs: number,
    releaseOnDisconnect: boolean,
    client: string,
    now: number,
    recorded?: { key: string },
  ) {
    this.id = recorded === undefined ? randomBytes(16).toString('base64url') : '';
    this.key = recorded === undefined ? sessionKey(this.id) : recorded.key;
    this.leaseMs = leaseMs;
    this.releaseOnDisconnect = releaseOnDisconnect;
    this.client = client;
    this.#deadline = now + leaseMs;
  }

  /**
   * Monotonic deadline of the lease (the registry's lease queue reads it): a lease after the
   * last renewal, or after its carrying connection's last frame (see `SessionSink.heardAt`).
   */
  get deadline(): number {
    const heard = this.sink?.heardAt;
    return heard === undefined ? this.#deadline : Math.max(this.#deadline, heard + this.leaseMs);
  }

  set deadline(value: number) {
    this.#deadline = value;
  }

  /** The session's row locks by id (change them through {@link addLock}/{@link removeLock}). */
  get locks(): ReadonlyMap<string, HeldLock> {
    return this.#locks ?? NO_LOCKS;
  }

  /** Ids of the session's open scanners. */
  get scanners(): Set<string> {
    this.#scanners ??= new Set();
    return this.#scanners;
  }

  /** How many scanners the session has open (makes no set). */
  get scannerCount(): number {
    return this.#scanners?.size ?? 0;
  }

  /** A short, non-secret name for logs and status: the key's first 6 characters. */
  get label(): string {
    return `${this.key.slice(0, 6)}…`;
  }

  addLock(lockId: string, held: HeldLock): void {
    this.#locks ??= new Map();
    this.#locks.set(lockId, held);
  }

  /** Forgets the lock; returns what it was, or undefined if the session did not hold it. */
  removeLock(lockId: string): HeldLock | undefined {
    const held = this.#locks?.get(lockId);
    if (held === undefined) return undefined;
    this.#locks?.delete(lockId);
    return held;
  }

  /** @internal The region tells the owner of a lock it lost (see `rowLockLost`). */
  [rowLockLost](lock: RowLock, reason: LockLostError): void {
    this.onLockLost?.(this, lock, reason);
  }

  /** @internal The session ends: its calls in flight, lock waits included, stop with `reason`. */
  abortWaits(reason: Error): void {
    this.sink?.abortCalls(reason);
  }
}
