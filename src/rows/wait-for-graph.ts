import type { RowLockOwner } from './row-lock-manager.js';

/**
 * Marks an owner that runs several calls at once, such as a server session pipelining its
 * clients' requests: while one of its calls waits, others go on and may release what the wait
 * needs, so a wait of such an owner for itself (for its own lock, or behind its own queued
 * request) is ordinary queueing, not a deadlock. Cycles through other owners still are.
 */
export const CONCURRENT_OWNER: unique symbol = Symbol('locksmith.concurrentOwner');

export interface ConcurrentOwner {
  readonly [CONCURRENT_OWNER]: true;
}

function isConcurrent(owner: RowLockOwner): boolean {
  return (
    typeof owner === 'object' && (owner as Partial<ConcurrentOwner>)[CONCURRENT_OWNER] === true
  );
}

/** A pending lock request as the graph sees it. */
export interface PendingWait {
  /** Who waits; `undefined` for an anonymous one-shot call, which holds nothing. */
  readonly owner: RowLockOwner | undefined;
  readonly row: string;
  /** The request queued just ahead of this one on the same row (FIFO), if any. */
  readonly prev: PendingWait | undefined;
}

/** One step of a cycle: `owner` waits on `row`. */
export interface WaitStep {
  readonly owner: RowLockOwner;
  readonly row: string;
}

/**
 * The wait-for graph over lock owners, kept implicitly: the only stored state is each owner's
 * pending requests; edges are derived on demand from the row queues.
 *
 * Owners are sequential actors: while one waits it releases nothing. A request therefore waits
 * for the owner of the request just ahead of it in the row's FIFO queue, or for the holder when
 * it is first (it also waits for everyone further ahead, which the chain of such edges already
 * says). Anonymous requests hold nothing and wait once, so an edge into one passes straight
 * through to whatever it waits for.
 *
 * New edges only appear when a request is queued (a grant hands a row to a request whose
 * followers already waited for it), so checking each new request finds every cycle: the search
 * runs from the new request's blocker along waits only, and costs what it visits.
 */
export class WaitForGraph {
  readonly #holderOf: (row: string) => RowLockOwner | undefined;
  readonly #waits = new Map<RowLockOwner, PendingWait[]>();

  /** `holderOf(row)` is the owner holding `row` (`undefined` when anonymous or free). */
  constructor(holderOf: (row: string) => RowLockOwner | undefined) {
    this.#holderOf = holderOf;
  }

  /** Records a pending request of a named owner. */
  add(wait: PendingWait & { readonly owner: RowLockOwner }): void {
    const list = this.#waits.get(wait.owner);
    if (list === undefined) this.#waits.set(wait.owner, [wait]);
    else list.push(wait);
  }

  /** Forgets a request recorded with {@link add}. */
  delete(wait: PendingWait & { readonly owner: RowLockOwner }): void {
    const list = this.#waits.get(wait.owner);
    if (list === undefined) return;
    if (list.length === 1) {
      if (list[0] === wait) this.#waits.delete(wait.owner);
      return;
    }
    const i = list.indexOf(wait);
    if (i >= 0) list.splice(i, 1);
  }

  /**
   * The cycle that the queued request `wait` (already recorded, already in its row's queue)
   * closes, as steps starting with `wait` itself, or `undefined` when there is none.
   */
  findCycle(wait: PendingWait & { readonly owner: RowLockOwner }): WaitStep[] | undefined {
    const target = wait.owner;
    const first = this.#blocker(wait);
    if (first === undefined) return undefined;
    if (first === target) {
      return isConcurrent(target) ? undefined : [{ owner: target, row: wait.row }];
    }
    if (!this.#waits.has(first)) return undefined;
    // Depth-first from the blocker; `via` remembers how each owner was reached.
    const via = new Map<RowLockOwner, WaitStep>([[first, { owner: target, row: wait.row }]]);
    const stack: RowLockOwner[] = [first];
    for (let owner = stack.pop(); owner !== undefined; owner = stack.pop()) {
      for (const w of this.#waits.get(owner) ?? []) {
        const next = this.#blocker(w);
        if (next === undefined || via.has(next)) continue;
        const step = { owner, row: w.row };
        if (next === target) {
          const steps: WaitStep[] = [step];
          for (let o = owner; o !== target; ) {
            const back = via.get(o) as WaitStep;
            steps.push(back);
            o = back.owner;
          }
          return steps.reverse();
        }
        via.set(next, step);
        if (this.#waits.has(next)) stack.push(next);
      }
    }
    return undefined;
  }

  /**
   * The owner `wait` waits for: the nearest request ahead of it of a sequential owner, else the
   * holder. Requests of anonymous and of concurrent owners are passed through: they hold
   * nothing while queued, and a concurrent owner queued twice on one row (two of its calls,
   * interleaved with another session's) is not waiting for itself nor for that other session.
   */
  #blocker(wait: PendingWait): RowLockOwner | undefined {
    let ahead = wait.prev;
    while (ahead !== undefined && (ahead.owner === undefined || isConcurrent(ahead.owner))) {
      ahead = ahead.prev;
    }
    return ahead !== undefined ? ahead.owner : this.#holderOf(wait.row);
  }
}

const labels = new WeakMap<object, string>();
let nextLabel = 1;

/** How an owner is named in messages: strings quoted, objects by their own text or a number. */
export function describeOwner(owner: RowLockOwner | undefined): string {
  if (owner === undefined) return '(anonymous)';
  if (typeof owner === 'string') return JSON.stringify(owner);
  let label = labels.get(owner);
  if (label === undefined) {
    let text: string | undefined;
    try {
      text = String(owner);
    } catch {
      text = undefined;
    }
    if (text === undefined || text.startsWith('[object ') || text.startsWith('function ')) {
      const name = (owner as { constructor?: { name?: unknown } }).constructor?.name;
      text = `${typeof name === 'string' && name !== '' ? name : 'owner'}#${nextLabel++}`;
    }
    label = text;
    labels.set(owner, label);
  }
  return label;
}
