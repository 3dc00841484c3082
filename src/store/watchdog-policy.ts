import { systemClock } from '../core/clock.js';
import { sharedNow } from '../os/command-watchdog.js';
import { DATABASE_QUERY_TIMEOUT_MS, type LockerKind } from './create-locker.js';
import { DEFAULT_ACQUIRE_INTERVAL_MS } from './locker.js';
import type { ConfirmedEvent } from './supervisor.js';

/** The command watchdog's deadlines, in {@link sharedNow} ms. */
export interface WatchdogDeadlines {
  termAt: number;
  killAt: number;
}

/** What {@link watchdogPolicy} needs to know of the locker and the command; in ms. */
export interface WatchdogPolicyOptions {
  /** The locker, made by {@link createLocker} with these settings. */
  kind: LockerKind;
  /** lease-database, etcd: the lease (default {@link DEFAULT_ACQUIRE_INTERVAL_MS}). */
  leaseMs?: number | undefined;
  /** Time between SIGTERM and SIGKILL the command is given when it must stop. */
  graceMs: number;
  /** The supervisor's keep-alive (renewal) period. */
  renewMs: number;
}

/**
 * Turns a confirmation of mastership into the command's deadlines: SIGKILL to its group at
 * `killAt`, which comes before any other contender can be master; SIGTERM `min(grace, lead)`
 * before it.
 *
 * - lease-database: `killAt` = the locker's `validUntil` (3/4 of the lease after the renewal
 *   was sent): the lease itself runs at least 1/4 lease longer, and a contender takes it only
 *   once it has expired on the database's clock. Lead: 1/8 of the lease.
 * - etcd: the same as lease-database (`validUntil` is 3/4 of the lease after the keep-alive
 *   was sent; etcd expires the lease a full TTL after it received it).
 * - database: the row lock is held by our session, paused or not; another contender gets it
 *   only when the database or the network ends that session, and then pauses `renew + query
 *   timeout` before it acts. The lock was ours after `at` (the confirmation's start), so
 *   `killAt` = at + renew + 3/4 of the query timeout leaves 1/4 of it (500 ms) for the
 *   watchdog to act. Lead: 1/4 of the query timeout. (This holds when every contender uses
 *   the same renewal period; the newcomer's pause is its own.)
 * - shared-file: the kernel's lock stays with our open file while its holder is paused, and
 *   is freed only when the holder dies, which also kills the command (parent-death signal,
 *   and the watchdog): no deadline.
 */
export function watchdogPolicy(
  options: WatchdogPolicyOptions,
): (confirmed: ConfirmedEvent) => WatchdogDeadlines {
  const { graceMs, renewMs } = options;
  const toShared = (monotonic: number) =>
    monotonic === Number.POSITIVE_INFINITY
      ? monotonic
      : sharedNow() + (monotonic - systemClock.monotonic());
  const deadlines = (killAt: number, lead: number): WatchdogDeadlines => ({
    termAt: killAt - Math.min(graceMs, lead),
    killAt,
  });
  switch (options.kind) {
    case 'lease-database':
    case 'etcd': {
      const lease = options.leaseMs ?? DEFAULT_ACQUIRE_INTERVAL_MS;
      return ({ validUntil }) => deadlines(toShared(validUntil), lease / 8);
    }
    case 'database':
      return ({ at, validUntil }) =>
        deadlines(
          toShared(Math.min(validUntil, at + renewMs + (DATABASE_QUERY_TIMEOUT_MS * 3) / 4)),
          DATABASE_QUERY_TIMEOUT_MS / 4,
        );
    case 'shared-file':
      // Infinity today; a deadline the locker comes to know is honoured as it is.
      return ({ validUntil }) => deadlines(toShared(validUntil), renewMs / 2);
  }
}
