import { randomBytes } from 'node:crypto';
import type { Clock } from '../core/clock.js';
import { LimitExceededError, LockLostError } from '../core/errors.js';
import { describeValue } from '../core/options.js';
import { LeaseQueue } from '../rows/lease-queue.js';
import type { Result } from '../rows/result.js';
import type { Session } from './session.js';

/** A server-side scanner: a region scan paused between `nextRows` calls. */
export interface Scanner {
  readonly id: string;
  readonly session: Session;
  readonly table: string;
  readonly rows: AsyncGenerator<Result, void, undefined>;
  deadline: number;
  /** A `nextRows` is running: a second one at the same time is refused. */
  busy: boolean;
  closed: boolean;
}

/**
 * Open scanners, each with a lease (HBase's scanner leases, on the same period as row locks):
 * every `nextRows` renews it, and a scanner nobody reads for a lease is closed, which ends its
 * region scan and so releases the MVCC read point it pinned. A session's scanners close with
 * the session. Ids are unguessable and checked against the calling session.
 */
export class ScannerRegistry {
  readonly #scanners = new Map<string, Scanner>();
  readonly #clock: Clock;
  readonly #leaseMs: number;
  readonly #maxPerSession: number;
  readonly #leases: LeaseQueue<Scanner>;
  #expired = 0;

  constructor(clock: Clock, leaseMs: number, maxPerSession: number) {
    this.#clock = clock;
    this.#leaseMs = leaseMs;
    this.#maxPerSession = maxPerSession;
    this.#leases = new LeaseQueue<Scanner>(
      clock,
      (s) => !s.closed,
      (s) => {
        this.#expired++;
        this.#close(s, true);
      },
      false,
    );
  }

  get size(): number {
    return this.#scanners.size;
  }

  get expired(): number {
    return this.#expired;
  }

  open(session: Session, table: string, rows: AsyncGenerator<Result, void, undefined>): Scanner {
    if (session.scanners.size >= this.#maxPerSession) {
      void rows.return();
      throw new LimitExceededError(
        `Session ${session.label} has ${session.scanners.size} open scanners; the limit is ${this.#maxPerSession}`,
      );
    }
    const scanner: Scanner = {
      id: randomBytes(12).toString('base64url'),
      session,
      table,
      rows,
      deadline: this.#clock.monotonic() + this.#leaseMs,
      busy: false,
      closed: false,
    };
    this.#scanners.set(scanner.id, scanner);
    session.scanners.add(scanner.id);
    this.#leases.add(scanner);
    return scanner;
  }

  /** The session's scanner with this id (renewing its lease), or undefined. */
  get(session: Session, id: unknown): Scanner | undefined {
    const scanner = typeof id === 'string' ? this.#scanners.get(id) : undefined;
    if (scanner === undefined || scanner.session !== session || scanner.closed) return undefined;
    scanner.deadline = this.#clock.monotonic() + this.#leaseMs;
    return scanner;
  }

  close(scanner: Scanner): void {
    this.#close(scanner, false);
  }

  closeAll(session: Session): void {
    if (session.scannerCount === 0) return;
    for (const id of [...session.scanners]) {
      const scanner = this.#scanners.get(id);
      if (scanner !== undefined) this.#close(scanner, false);
    }
  }

  shutdown(): void {
    for (const scanner of [...this.#scanners.values()]) this.#close(scanner, false);
    this.#leases.close();
  }

  #close(scanner: Scanner, dequeued: boolean): void {
    if (scanner.closed) return;
    scanner.closed = true;
    this.#scanners.delete(scanner.id);
    scanner.session.scanners.delete(scanner.id);
    if (!dequeued) this.#leases.remove();
    // Ends the region scan (its finally releases the read point). A scan that is mid-read
    // finishes that read first; `return()` then runs when the generator next yields.
    scanner.rows.return().catch(() => undefined);
  }
}

/** Why a scanner id is not usable (HBase's UnknownScannerException). */
export function unknownScanner(id: unknown): LockLostError {
  return new LockLostError(
    `Unknown scanner ${typeof id === 'string' ? id.slice(0, 6) : describeValue(id)}: it expired, was closed, or belongs to another session`,
    { code: 'LEASE_EXPIRED' },
  );
}
