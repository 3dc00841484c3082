import { toStringBinary } from '../rows/bytes.js';
import type { RowLockOwner } from '../rows/row-lock-manager.js';
import { describeOwner } from '../rows/wait-for-graph.js';
import { Session } from './session.js';
import { WAITS_LISTED } from './status-lists.js';
import type { TableRegions } from './table-regions.js';

/** Who waits or holds, as a status page names it: a session by its label, never its id. */
export interface OwnerLabel {
  session: string | null;
  client: string;
}

/** A lock request waiting for a row. */
export interface LockWaitEntry {
  table: string;
  row: string;
  /** `null`: an anonymous call. */
  waiter: OwnerLabel | null;
  /** Who holds the row (`null`: a mutation's implicit lock without a session). */
  holder: OwnerLabel | null;
  explicit: boolean;
  waitedMs: number;
}

/** What `status()` shows of lock waits and deadlocks. */
export interface LockWaitStatus {
  /** Requests waiting now (at most `limit`, see {@link lockWaitStatus}). */
  waits: LockWaitEntry[];
  /** Requests waiting in all, across tables. */
  waiting: number;
  deadlocks: {
    /** Requests refused with DEADLOCK since the tables were opened. */
    detected: number;
    /** The most recent cycle caught: each step is an owner waiting on a row. */
    last: { at: number; table: string; cycle: { waiter: OwnerLabel; row: string }[] } | null;
  };
}

function label(owner: RowLockOwner | undefined): OwnerLabel | null {
  if (owner === undefined) return null;
  if (owner instanceof Session) return { session: owner.label, client: owner.client };
  return { session: null, client: describeOwner(owner) };
}

/**
 * The lock waits and deadlocks of every table, for `status()` and the dashboard: what the row
 * lock managers know, with owners named as status pages name sessions (a label and the client
 * name; the session id stays secret). At most `limit` waits are listed; `waiting` counts all.
 */
export function lockWaitStatus(
  tables: Iterable<[string, { regions: TableRegions }]>,
  limit = WAITS_LISTED,
): LockWaitStatus {
  const waits: LockWaitEntry[] = [];
  let waiting = 0;
  let detected = 0;
  let last: LockWaitStatus['deadlocks']['last'] = null;
  for (const [table, { regions }] of tables) {
    const activity = regions.rowLockActivity(Math.max(0, limit - waits.length));
    waiting += activity.waiting;
    detected += activity.deadlocks;
    for (const w of activity.waits) {
      waits.push({
        table,
        row: toStringBinary(w.row),
        waiter: label(w.owner),
        holder: label(w.holder),
        explicit: w.explicit,
        waitedMs: Math.round(w.waitedMs),
      });
    }
    const d = activity.lastDeadlock;
    if (d !== undefined && (last === null || d.at >= last.at)) {
      last = {
        at: d.at,
        table,
        cycle: d.cycle.map((step) => ({
          waiter: label(step.owner) as OwnerLabel,
          row: toStringBinary(step.row),
        })),
      };
    }
  }
  return { waits, waiting, deadlocks: { detected, last } };
}
