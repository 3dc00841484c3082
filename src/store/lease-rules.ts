import { MAX_DURATION_MS } from '../core/duration.js';
import { InvalidArgumentError } from '../core/errors.js';
import { DATABASE_QUERY_TIMEOUT_MS, type LockerKind } from './create-locker.js';
import { DEFAULT_ACQUIRE_INTERVAL_MS } from './locker.js';

/** The shortest lease accepted: below it, scheduling noise alone eats the margins. */
export const MIN_LEASE_MS = 1000;

/**
 * Lease-database: the longest renewal period, as a fraction of the lease. The master counts
 * itself master for 3/4 of the lease after a renewal was sent (then it self-fences), and its
 * command watchdog sends SIGTERM 1/8 of the lease before that; a renewal every 3/8 of the lease
 * leaves 1/4 of the lease for the renewal's round trip and the event loop's delays.
 */
export const MAX_RENEW_FRACTION = 3 / 8;

/** The timings {@link checkLeaseRules} checks, in ms; absent means the locker's default. */
export interface LeaseTimings {
  kind: LockerKind;
  /** lease-database: the lease (default {@link DEFAULT_ACQUIRE_INTERVAL_MS}). */
  leaseMs?: number | undefined;
  /** The supervisor's keep-alive (renewal) period. */
  renewMs?: number | undefined;
}

/**
 * How the messages name the two settings and show their values: a command line names its
 * options (`--lease`) and shows them as the user wrote them (`4s`). By default the names are
 * `leaseMs`/`renewMs` and the values are shown in ms.
 */
export interface LeaseTimingsWording {
  lease: string;
  renew: string;
  leaseText?: string | undefined;
  renewText?: string | undefined;
}

/**
 * The lease/renew combinations that cannot work, refused (an {@link InvalidArgumentError})
 * before anything is taken: a lease-database lease under {@link MIN_LEASE_MS}, a renewal not
 * shorter than the lease or longer than {@link MAX_RENEW_FRACTION} of it, and (database) a
 * renewal so long that the takeover pause (renew + {@link DATABASE_QUERY_TIMEOUT_MS}) is past
 * the longest duration.
 */
export function checkLeaseRules(
  timings: LeaseTimings,
  wording: LeaseTimingsWording = { lease: 'leaseMs', renew: 'renewMs' },
): void {
  const { kind, renewMs: renew } = timings;
  const renewText = wording.renewText ?? `${renew}ms`;
  if (kind === 'lease-database' || kind === 'etcd') {
    const lease = timings.leaseMs ?? DEFAULT_ACQUIRE_INTERVAL_MS;
    const leaseText =
      timings.leaseMs === undefined
        ? `${lease}ms, the default`
        : (wording.leaseText ?? `${lease}ms`);
    if (lease < MIN_LEASE_MS) {
      throw new InvalidArgumentError(
        `${wording.lease} (${leaseText}) must be at least 1s: a shorter lease leaves no time to renew it on a busy machine`,
      );
    }
    if (renew === undefined) return;
    if (renew >= lease) {
      throw new InvalidArgumentError(
        `${wording.renew} (${renewText}) must be shorter than ${wording.lease} (${leaseText}): a lease renewed no faster than it expires lapses between renewals`,
      );
    }
    if (renew > lease * MAX_RENEW_FRACTION) {
      throw new InvalidArgumentError(
        `${wording.renew} (${renewText}) must be at most 3/8 of ${wording.lease} (${leaseText}), e.g. ${wording.renew} ${Math.floor(lease / 4)}ms: the command is stopped 5/8 of the lease after a renewal that is not followed by another`,
      );
    }
  }
  if (
    kind === 'database' &&
    renew !== undefined &&
    renew + DATABASE_QUERY_TIMEOUT_MS > MAX_DURATION_MS
  ) {
    throw new InvalidArgumentError(
      `${wording.renew} (${renewText}) is too long: a new master pauses ${wording.renew} + ${DATABASE_QUERY_TIMEOUT_MS}ms, which must stay within ${MAX_DURATION_MS}ms`,
    );
  }
}
