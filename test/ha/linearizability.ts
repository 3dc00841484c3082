// Not a test: the linearizability checker. It reads what client processes saw of
// counters and registers through a cluster under faults (history.ts), and lists every
// observation that no single order of the operations consistent with real time can explain.
//
// Real time: A precedes B when A completed before B was invoked, by more than `clockSlackMs`
// (the processes' clocks agree up to that). Concurrent operations may take effect in any order.
// An ok operation took effect once, between its invocation and its completion; a fail one
// never; an info one at most once, at any time after its invocation (possibly long after the
// client gave up on it: a paused master may apply it when it resumes).
//
// Counters start at 0 (no row) and only ever grow by 1 per increment; an increment returns the
// new value. So, for an ok increment or an ok read of a counter returning v:
//   - v > the values of the ok increments and reads of that counter preceding it (an increment:
//     strictly; a read: or equal), otherwise real-time order is broken (`counter-order`);
//   - v >= the number of ok increments preceding it (+1 for an increment), otherwise one of
//     those acknowledged increments was lost (`lost-increment`);
//   - v <= the number of ok and info increments invoked before it completed, otherwise some
//     increment was applied twice, or something else wrote (`extra-increment`);
//   - no two ok increments return the same value (`duplicate-increment`: one applied twice,
//     or one lost as the other's effect was overwritten).
// A read after every increment completed is the final value V: okCount <= V <= okCount +
// infoCount, and V >= every value returned, which is what the rules above say for it.
//
// Registers have a single writer each (a client writing its own key), whose writes are
// sequential with increasing values; that gives the version order of the key exactly: an ok
// write precedes every later write of its writer. A read returning the value of write i:
//   - i must exist, not be a failed write, and not be invoked after the read completed
//     (`unwritten-value`);
//   - no ok write j > i may precede the read (`stale-read`);
//   - no read returning j > i may precede the read (`read-went-back`).
// Both hold only when write i is ok (or i is the initial "none"): an info write may take effect
// after the writer's later writes, so a read of it after them is legal; it is reported as a
// note, not a violation.
import { describeOp, type Op } from './history.js';

export type ViolationKind =
  | 'duplicate-increment'
  | 'lost-increment'
  | 'extra-increment'
  | 'counter-order'
  | 'stale-read'
  | 'read-went-back'
  | 'unwritten-value'
  | 'malformed';

export interface Violation {
  kind: ViolationKind;
  key: string;
  /** What is wrong, in words. */
  message: string;
  /** The operations involved: the offending one first. */
  ops: Op[];
}

export interface CheckOptions {
  /** How far apart the clocks of two client processes may be, in ms (default 0). */
  clockSlackMs?: number;
  /**
   * Every counter that was incremented must have a read invoked after all its increments
   * completed (its final value), or the check reports it (`malformed`). Default false.
   */
  requireFinalReads?: boolean;
}

export interface CheckResult {
  violations: Violation[];
  /** Legal but noteworthy observations (an indeterminate write applied late). */
  notes: string[];
  counters: Map<string, { ok: number; info: number; fail: number; final?: number }>;
  registers: Map<string, { ok: number; info: number; fail: number; reads: number }>;
}

/** `items` sorted by `at`, for "how many / which of them happened before t" queries. */
class Timeline<T> {
  readonly #at: number[];
  readonly items: T[];

  constructor(items: readonly T[], at: (item: T) => number) {
    this.items = [...items].sort((a, b) => at(a) - at(b));
    this.#at = this.items.map(at);
  }

  /** How many items have `at < t` (binary search). */
  countBefore(t: number): number {
    let lo = 0;
    let hi = this.#at.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.#at[mid] as number) < t) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/** For each prefix of a timeline, the item with the largest `value` so far (first one wins). */
function prefixMax<T>(items: readonly T[], value: (item: T) => number): (T | undefined)[] {
  const best: (T | undefined)[] = [undefined];
  let current: T | undefined;
  for (const item of items) {
    if (current === undefined || value(item) > value(current)) current = item;
    best.push(current);
  }
  return best;
}

const lines = (ops: readonly Op[]) => ops.map((op) => `\n      ${describeOp(op)}`).join('');

/** Checks a history (the merged operations of every client); see the file comment. */
export function checkHistory(history: readonly Op[], options: CheckOptions = {}): CheckResult {
  const slack = options.clockSlackMs ?? 0;
  if (!(slack >= 0)) throw new Error(`clockSlackMs must be >= 0, got ${slack}`);
  const result: CheckResult = {
    violations: [],
    notes: [],
    counters: new Map(),
    registers: new Map(),
  };
  const byKey = new Map<string, Op[]>();
  for (const op of history) {
    const ops = byKey.get(op.key);
    if (ops === undefined) byKey.set(op.key, [op]);
    else ops.push(op);
  }
  for (const [key, ops] of [...byKey].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const incrs = ops.some((op) => op.op === 'incr');
    const writes = ops.some((op) => op.op === 'write');
    if (incrs && writes) {
      result.violations.push({
        kind: 'malformed',
        key,
        message: `${key} is both incremented and written: a key must be a counter or a register`,
        ops: ops.filter((op) => op.op !== 'read').slice(0, 2),
      });
    } else if (incrs) {
      checkCounter(key, ops, slack, options.requireFinalReads === true, result);
    } else {
      checkRegister(key, ops, slack, result);
    }
  }
  return result;
}

function checkCounter(
  key: string,
  ops: readonly Op[],
  slack: number,
  requireFinal: boolean,
  result: CheckResult,
): void {
  const report = (kind: ViolationKind, message: string, involved: Op[]) =>
    result.violations.push({ kind, key, message, ops: involved });
  const incrs = ops.filter((op) => op.op === 'incr');
  const okIncrs = incrs.filter((op) => op.outcome === 'ok');
  const possible = new Timeline(
    incrs.filter((op) => op.outcome !== 'fail'),
    (op) => op.invokeAt,
  );
  const reads = ops.filter((op) => op.op === 'read' && op.outcome === 'ok');
  const counterValue = (op: Op) => op.result ?? 0;
  // Every ok observation of the counter, by completion: bounds for whatever follows it.
  const seen = new Timeline([...okIncrs, ...reads], (op) => op.completeAt);
  const maxSeen = prefixMax(seen.items, counterValue);
  const acked = new Timeline(okIncrs, (op) => op.completeAt);
  const lastIncrCompleted = incrs.reduce((max, op) => Math.max(max, op.completeAt), -Infinity);

  const first = new Map<number, Op>();
  for (const op of okIncrs) {
    const other = first.get(counterValue(op));
    if (other === undefined) first.set(counterValue(op), op);
    else
      report(
        'duplicate-increment',
        `two acknowledged increments of ${key} both returned ${counterValue(op)}: one was applied twice, or one was lost`,
        [op, other],
      );
  }

  for (const op of [...okIncrs, ...reads]) {
    const isIncr = op.op === 'incr';
    const v = counterValue(op);
    const before = op.invokeAt - slack;
    const max = maxSeen[seen.countBefore(before)];
    const ackedBefore = acked.countBefore(before);
    const invokedBy = possible.countBefore(op.completeAt + slack);
    const what = isIncr
      ? `an increment of ${key} returned ${v}`
      : op.invokeAt - slack > lastIncrCompleted
        ? `the final value of ${key} is ${v}`
        : `a read of ${key} returned ${v}`;
    if (max !== undefined && (isIncr ? v <= counterValue(max) : v < counterValue(max))) {
      report(
        'counter-order',
        `${what}, but ${max.op === 'incr' ? 'an increment' : 'a read'} that completed before it was invoked had already ${max.op === 'incr' ? 'returned' : 'read'} ${counterValue(max)}: the counter went back in time`,
        [op, max],
      );
    } else if (v < ackedBefore + (isIncr ? 1 : 0)) {
      report(
        'lost-increment',
        `${what}, but ${ackedBefore} acknowledged increments had completed before it was invoked: at least ${ackedBefore + (isIncr ? 1 : 0) - v} acknowledged increment(s) lost`,
        [op, ...acked.items.slice(Math.max(0, ackedBefore - 3), ackedBefore)],
      );
    }
    if (v > invokedBy) {
      report(
        'extra-increment',
        `${what}, but only ${invokedBy} increments (ok or indeterminate) had been invoked by the time it completed: an increment was applied twice, or from nowhere`,
        [op],
      );
    }
  }

  const finals = reads.filter((op) => op.invokeAt - slack > lastIncrCompleted);
  const final = finals.at(-1);
  if (requireFinal && final === undefined) {
    report(
      'malformed',
      `no read of ${key} after all its increments completed: its final value is unknown`,
      [],
    );
  }
  result.counters.set(key, {
    ok: okIncrs.length,
    info: incrs.filter((op) => op.outcome === 'info').length,
    fail: incrs.filter((op) => op.outcome === 'fail').length,
    ...(final === undefined ? {} : { final: counterValue(final) }),
  });
}

function checkRegister(key: string, ops: readonly Op[], slack: number, result: CheckResult): void {
  const report = (kind: ViolationKind, message: string, involved: Op[]) =>
    result.violations.push({ kind, key, message, ops: involved });
  const writes = ops.filter((op) => op.op === 'write').sort((a, b) => a.invokeAt - b.invokeAt);
  const reads = ops.filter((op) => op.op === 'read' && op.outcome === 'ok');
  result.registers.set(key, {
    ok: writes.filter((op) => op.outcome === 'ok').length,
    info: writes.filter((op) => op.outcome === 'info').length,
    fail: writes.filter((op) => op.outcome === 'fail').length,
    reads: reads.length,
  });

  // The version order: one writer, sequential, increasing values. Anything else cannot be
  // checked this way, and is reported rather than guessed at.
  const writers = new Set(writes.map((op) => op.client));
  if (writers.size > 1) {
    report(
      'malformed',
      `${key} has ${writers.size} writers (${[...writers].join(', ')}): the check needs one writer per register`,
      writes.slice(0, 2),
    );
    return;
  }
  for (let i = 1; i < writes.length; i++) {
    const [prev, next] = [writes[i - 1] as Op, writes[i] as Op];
    if (prev.completeAt > next.invokeAt || (prev.value as number) >= (next.value as number)) {
      report('malformed', `the writes of ${key} are not sequential with increasing values`, [
        next,
        prev,
      ]);
      return;
    }
  }
  const index = new Map<number, number>(writes.map((op, i) => [op.value as number, i]));
  /** Index in the version order of what a read returned: -1 for "none" (before any write). */
  const indexOf = (op: Op) => (op.result === null ? -1 : (index.get(op.result as number) ?? -2));
  const definite = (i: number) => i === -1 || writes[i]?.outcome === 'ok';
  const okWrites = new Timeline(
    writes.filter((op) => op.outcome === 'ok'),
    (op) => op.completeAt,
  );
  const validReads = new Timeline(
    reads.filter((op) => {
      const i = indexOf(op);
      return i !== -2 && (i === -1 || writes[i]?.outcome !== 'fail');
    }),
    (op) => op.completeAt,
  );
  const latestRead = prefixMax(validReads.items, indexOf);

  for (const read of reads) {
    const i = indexOf(read);
    const shown = read.result === null ? 'none' : String(read.result);
    const write = writes[i];
    if (i === -2) {
      report('unwritten-value', `a read of ${key} returned ${shown}, which was never written`, [
        read,
      ]);
      continue;
    }
    if (write !== undefined && write.outcome === 'fail') {
      report(
        'unwritten-value',
        `a read of ${key} returned ${shown}, written only by a write that failed with ${write.error ?? 'an error'} (certainly not applied)`,
        [read, write],
      );
      continue;
    }
    if (write !== undefined && write.invokeAt > read.completeAt + slack) {
      report(
        'unwritten-value',
        `a read of ${key} returned ${shown} before anyone wrote it (the write was invoked after the read completed)`,
        [read, write],
      );
      continue;
    }
    const before = read.invokeAt - slack;
    const done = okWrites.items[okWrites.countBefore(before) - 1];
    const doneIndex = done === undefined ? -1 : (index.get(done.value as number) as number);
    const earlier = latestRead[validReads.countBefore(before)];
    const earlierIndex = earlier === undefined ? -1 : indexOf(earlier);
    if (doneIndex > i || earlierIndex > i) {
      if (!definite(i)) {
        result.notes.push(
          `${key}: read ${shown} (an indeterminate write) after a later value: legal if that write took effect late\n      ${describeOp(read)}`,
        );
      } else if (doneIndex > i && done !== undefined) {
        report(
          'stale-read',
          `a read of ${key} returned ${shown}, but the write of ${done.value} had completed before the read was invoked`,
          [read, done, ...(write === undefined ? [] : [write])],
        );
      } else if (earlier !== undefined) {
        report(
          'read-went-back',
          `a read of ${key} returned ${shown}, but a read that completed before it was invoked had returned ${earlier.result}: the register went back in time`,
          [read, earlier, ...(write === undefined ? [] : [write])],
        );
      }
    }
  }
}

/** The violations as text: each kind, key and message, then the operations involved. */
export function formatViolations(violations: readonly Violation[], max = 20): string {
  const shown = violations
    .slice(0, max)
    .map((v) => `${v.kind} ${v.key}: ${v.message}${lines(v.ops)}`);
  if (violations.length > max) shown.push(`... and ${violations.length - max} more`);
  return shown.join('\n');
}

/** A one-paragraph summary: operations by outcome, counters' final values, notes. */
export function summarize(result: CheckResult): string {
  const counters = [...result.counters].map(
    ([key, c]) => `${key}: ok ${c.ok}, info ${c.info}, fail ${c.fail}, final ${c.final ?? '?'}`,
  );
  const registers = [...result.registers].map(
    ([key, r]) => `${key}: writes ok ${r.ok}, info ${r.info}, fail ${r.fail}; reads ${r.reads}`,
  );
  return [
    ...counters,
    ...registers,
    `${result.violations.length} violation(s), ${result.notes.length} note(s)`,
  ].join('\n');
}
