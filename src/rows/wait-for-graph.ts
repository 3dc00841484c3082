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

/**
 * One multi-row call (`acquireImplicitMany`): a node of its own in the graph, since it holds the
 * rows it took while it waits for the next, and those are released when the call ends, not
 * when its owner's other calls do. Its waits are also its owner's: the owner's explicit locks
 * stay held until the call returns.
 */
export class RowsCall {
  /** The caller (a session, a client name), or `undefined` for an anonymous call. */
  readonly owner: RowLockOwner | undefined;

  constructor(owner: RowLockOwner | undefined) {
    this.owner = owner;
  }
}

/** A pending lock request as the graph sees it. */
export interface PendingWait {
  /**
   * The graph node that waits: the caller, or the {@link RowsCall} of a multi-row call;
   * `undefined` for an anonymous single-row call, which holds nothing.
   */
  readonly node: RowLockOwner | undefined;
  /**
   * The node that will hold the row once this request is granted and keep it while waiting for
   * something else: the owner of an explicit lock, the {@link RowsCall} of a multi-row call;
   * `undefined` for a single-row call's implicit lock, held for one call that waits for nothing
   * more while it holds it.
   */
  readonly holds: RowLockOwner | undefined;
  readonly row: string;
  /**
   * The nearest request queued ahead of this one on the same row, when this one was queued,
   * that {@link keepsRow keeps the row}; `undefined` when there was none. It may have left the
   * queue since: the graph then follows its own `keeper`, and shortens the path it walked.
   */
  keeper: PendingWait | undefined;
  /** True once the request left its row's queue (granted, aborted, timed out, refused). */
  readonly settled: boolean;
}

/**
 * Whether whoever queues behind this request waits for its node rather than for what the
 * request itself waits for (see {@link WaitForGraph}). Not so for a single-row call (it will
 * keep nothing), a concurrent owner's request, nor a multi-row call's: a {@link RowsCall} has
 * one wait at a time, this one, so the search would only go on from it to what it waits for;
 * once it holds the row it is the row's holder, and its next wait is checked when queued.
 * Passing those through keeps the walk to a queue's keepers, not its length.
 */
export function keepsRow(wait: PendingWait): boolean {
  const holds = wait.holds;
  return holds !== undefined && !(holds instanceof RowsCall) && !isConcurrent(holds);
}

/** One step of a cycle: `owner` waits on `row`. */
export interface WaitStep {
  readonly owner: RowLockOwner;
  readonly row: string;
}

type NamedWait = PendingWait & { readonly node: RowLockOwner };

/**
 * The wait-for graph, kept implicitly: the only stored state is each node's pending requests;
 * edges are derived on demand from the row queues.
 *
 * An edge `A -> B` exists only where A holds something it will not release until it gets
 * what it waits for, and B stands between it and that: a wait's node is its caller (whose
 * explicit locks stay held until the call returns) or its multi-row call (which holds the rows
 * it took). The implicit lock of a single-row call is no node's: that call waits for nothing
 * while it holds it, so nothing that waits for it can be part of a cycle through it. This is
 * why single-row calls never deadlock one another, however many a session runs at once.
 *
 * A request waits for the node that holds its row, or for the nearest request ahead of it in
 * the row's FIFO queue that will keep the row while it waits for something else (it waits for
 * everyone further ahead too, which the chain of such edges already says). Requests ahead that
 * will not (single-row calls) or whose owner runs several calls at once are passed through.
 *
 * New edges only appear when a request is queued (a grant hands a row to a request whose
 * followers already waited for it), so checking each new request finds every cycle: the search
 * runs from the new request's blocker along waits only, and costs what it visits.
 */
export class WaitForGraph {
  readonly #holderOf: (row: string) => RowLockOwner | undefined;
  /** Each node's pending requests: a set, so that a request leaves in O(1) however many wait. */
  readonly #waits = new Map<RowLockOwner, Set<PendingWait>>();

  /** `holderOf(row)`: the node holding `row` (see {@link PendingWait.holds}), if any. */
  constructor(holderOf: (row: string) => RowLockOwner | undefined) {
    this.#holderOf = holderOf;
  }

  /** Records a pending request of a node (and of its caller, for a multi-row call). */
  add(wait: NamedWait): void {
    this.#record(wait.node, wait);
    const caller = callerOf(wait.node);
    if (caller !== undefined) this.#record(caller, wait);
  }

  /** Forgets a request recorded with {@link add}. */
  delete(wait: NamedWait): void {
    this.#forget(wait.node, wait);
    const caller = callerOf(wait.node);
    if (caller !== undefined) this.#forget(caller, wait);
  }

  /**
   * The cycle that the queued request `wait` (already recorded, already in its row's queue)
   * closes, as steps starting with `wait` itself, or `undefined` when there is none. A cycle
   * closes when the search from the request's blocker comes back to the request's node or to
   * its caller.
   */
  findCycle(wait: NamedWait): WaitStep[] | undefined {
    const node = wait.node;
    const caller = callerOf(node);
    const isTarget = (o: RowLockOwner) => o === node || o === caller;
    const first = this.#blocker(wait);
    if (first === undefined) return undefined;
    if (isTarget(first)) {
      return isConcurrent(first) ? undefined : [{ owner: shown(node), row: wait.row }];
    }
    if (!this.#waits.has(first)) return undefined;
    // Depth-first from the blocker; `via` remembers how each node was reached.
    const via = new Map<RowLockOwner, WaitStep>([[first, { owner: node, row: wait.row }]]);
    const stack: RowLockOwner[] = [first];
    for (let owner = stack.pop(); owner !== undefined; owner = stack.pop()) {
      for (const w of this.#waits.get(owner) ?? []) {
        const next = this.#blocker(w);
        if (next === undefined || via.has(next)) continue;
        const step = { owner, row: w.row };
        if (isTarget(next)) {
          const steps: WaitStep[] = [step];
          for (let o = owner; o !== node; ) {
            const back = via.get(o) as WaitStep;
            steps.push(back);
            o = back.owner;
          }
          return steps.reverse().map((s) => ({ owner: shown(s.owner), row: s.row }));
        }
        via.set(next, step);
        if (this.#waits.has(next)) stack.push(next);
      }
    }
    return undefined;
  }

  /**
   * The node `wait` waits for: the nearest request still queued ahead of it that keeps the row
   * while waiting for more ({@link keepsRow}), else the row's holder. Requests of concurrent
   * owners are passed through too: such an owner queued twice on one row (two of its calls,
   * interleaved with another session's) is not waiting for itself nor for that other session.
   */
  #blocker(wait: PendingWait): RowLockOwner | undefined {
    // Costs the keepers that left since it was last asked, not the length of the queue: a hot
    // row with thousands of waiters must not make each new wait walk all of them.
    let ahead = wait.keeper;
    while (ahead?.settled) ahead = ahead.keeper;
    wait.keeper = ahead;
    return ahead !== undefined ? ahead.holds : this.#holderOf(wait.row);
  }

  #record(node: RowLockOwner, wait: PendingWait): void {
    const set = this.#waits.get(node);
    if (set === undefined) this.#waits.set(node, new Set([wait]));
    else set.add(wait);
  }

  #forget(node: RowLockOwner, wait: PendingWait): void {
    const set = this.#waits.get(node);
    if (set?.delete(wait) && set.size === 0) this.#waits.delete(node);
  }
}

function callerOf(node: RowLockOwner): RowLockOwner | undefined {
  return node instanceof RowsCall ? node.owner : undefined;
}

/** How a node appears in a cycle: a multi-row call as its caller when it has one. */
function shown(node: RowLockOwner): RowLockOwner {
  return node instanceof RowsCall ? (node.owner ?? node) : node;
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
