import { callContext } from './call-context.js';
import type { CheckedCallOptions } from './call-options.js';
import type { Delete, Mutation, Put } from './mutation.js';
import type { Draft } from './mutation-cells.js';
import type { RegionRowLocks } from './region-row-locks.js';
import type { RowLockGrant } from './row-lock-manager.js';
import type { TimestampAllocator } from './timestamp-allocator.js';

export interface MutationRunnerOptions {
  locks: RegionRowLocks;
  times: TimestampAllocator;
  /** Makes cells durable and visible (the write path); resolves once they are. */
  apply: (cells: Draft[]) => Promise<void>;
  /** Throws when the region may not write (closed, or stopped after a storage failure). */
  checkOpen: () => void;
  /** HBase 0.90's batch path: the time is read on arrival, before the row lock. */
  timestampOnArrival: boolean;
}

/**
 * Runs mutations under their row locks: the caller's explicit lock (checked and renewed) or
 * implicit ones held for the mutation's duration, released on every exit path.
 *
 * Contract: a fencing token is checked before any wait (a stale writer fails at once) and,
 * for implicit locks, again under the lock (an explicit grant may have come meanwhile); cells
 * are built under the lock, with the row's server time, so a check-and-set always reads the
 * previous write; the lock is held until the write is visible. {@link settled} waits for
 * every write holding row locks (what `close()` needs).
 */
export class MutationRunner {
  readonly #options: MutationRunnerOptions;
  readonly #inflight = new Set<Promise<unknown>>();

  constructor(options: MutationRunnerOptions) {
    this.#options = options;
  }

  /**
   * Runs one mutation of `row`: `build` turns it into cells under the lock and returns what
   * the caller gets back; it may throw to refuse (nothing is written then).
   */
  mutate<T>(
    row: string,
    rowLock: Mutation['rowLock'],
    token: number | undefined,
    options: CheckedCallOptions,
    build: (now: number) => { cells: Draft[]; result: T },
  ): Promise<T> {
    // No async function: a small put's frames and awaits cost more than its own work. A
    // synchronous failure is a rejection, as it was.
    const { locks, times } = this.#options;
    let arrival: number | undefined;
    let implicit: RowLockGrant | null | undefined;
    try {
      this.#options.checkOpen();
      arrival = this.#options.timestampOnArrival ? times.timeFor(row) : undefined;
      locks.checkToken(row, token);
      if (rowLock !== undefined) locks.use(rowLock, row);
      else implicit = locks.tryAcquireImplicit(row, options.owner);
    } catch (err) {
      return Promise.reject(err);
    }
    if (implicit === null) {
      return locks
        .acquireImplicit(row, options)
        .then((grant) => this.#track(this.#write(row, token, grant, arrival, options, build)));
    }
    return this.#track(this.#write(row, token, implicit, arrival, options, build));
  }

  /** Builds and applies one mutation under its lock; an implicit lock is released at the end. */
  #write<T>(
    row: string,
    token: number | undefined,
    implicit: RowLockGrant | undefined,
    arrival: number | undefined,
    options: CheckedCallOptions,
    build: (now: number) => { cells: Draft[]; result: T },
  ): Promise<T> {
    const { locks, times } = this.#options;
    let result: T;
    let applied: Promise<void> | undefined;
    try {
      if (implicit !== undefined) locks.checkToken(row, token);
      const built = build(arrival ?? times.timeFor(row));
      result = built.result;
      if (built.cells.length > 0) applied = this.#options.apply(built.cells);
    } catch (err) {
      if (implicit !== undefined) locks.releaseImplicit(implicit);
      return Promise.reject(err);
    }
    if (applied === undefined) {
      if (implicit !== undefined) locks.releaseImplicit(implicit);
      return Promise.resolve(result);
    }
    options[callContext]?.waiting();
    return applied.then(
      () => {
        if (implicit !== undefined) locks.releaseImplicit(implicit);
        return result;
      },
      (err: unknown) => {
        if (implicit !== undefined) locks.releaseImplicit(implicit);
        throw err;
      },
    );
  }

  /**
   * Runs checked puts and deletes of several rows as one write: their rows' implicit locks
   * are taken in byte order, then every cell goes into one MVCC write and one log record.
   */
  async mutateRows(
    mutations: readonly (Put | Delete)[],
    options: CheckedCallOptions,
    cellsOf: (mutation: Put | Delete, now: number) => Draft[],
  ): Promise<void> {
    const { locks, times } = this.#options;
    const rows = [...new Set(mutations.map((m) => m.row))];
    for (const m of mutations) locks.checkToken(m.row, m.token);
    const grants = await locks.acquireImplicitMany(rows, options);
    return this.#track(
      (async () => {
        try {
          for (const m of mutations) locks.checkToken(m.row, m.token);
          const cells = mutations.flatMap((m) => cellsOf(m, times.timeFor(m.row)));
          if (cells.length > 0) {
            const applied = this.#options.apply(cells);
            options[callContext]?.waiting();
            await applied;
          }
        } finally {
          for (const grant of grants) locks.releaseImplicit(grant);
        }
      })(),
    );
  }

  async settled(): Promise<void> {
    await Promise.allSettled([...this.#inflight]);
  }

  /** Counts `work` in {@link settled} until it settles. */
  #track<T>(work: Promise<T>): Promise<T> {
    this.#inflight.add(work);
    const untrack = () => this.#inflight.delete(work);
    work.then(untrack, untrack);
    return work;
  }
}
