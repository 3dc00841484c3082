/**
 * The linearizability checker on synthetic histories: clean ones pass (with indeterminate
 * operations that did or did not take effect), and every kind of violation is caught, naming
 * the operations involved.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type Op, type Outcome, parseHistory } from './history.js';
import { checkHistory, formatViolations, type ViolationKind } from './linearizability.js';

/** An operation from `from` to `to` (ms). */
function op(
  client: string,
  kind: Op['op'],
  key: string,
  from: number,
  to: number,
  outcome: Outcome,
  fields: { value?: number; result?: number | null; error?: string } = {},
): Op {
  return { client, op: kind, key, invokeAt: from, completeAt: to, outcome, ...fields };
}
const incr = (c: string, from: number, to: number, result: number) =>
  op(c, 'incr', 'ctr', from, to, 'ok', { result });
const incrInfo = (c: string, from: number, to: number) =>
  op(c, 'incr', 'ctr', from, to, 'info', { error: 'CONNECTION_LOST' });
const readCtr = (c: string, from: number, to: number, result: number | null) =>
  op(c, 'read', 'ctr', from, to, 'ok', { result });
const write = (from: number, to: number, value: number, outcome: Outcome = 'ok') =>
  op('w', 'write', 'reg', from, to, outcome, {
    value,
    ...(outcome === 'ok' ? {} : { error: outcome === 'info' ? 'CONNECTION_LOST' : 'LOCK_TIMEOUT' }),
  });
const read = (c: string, from: number, to: number, result: number | null) =>
  op(c, 'read', 'reg', from, to, 'ok', { result });

function kinds(history: Op[], options = {}): ViolationKind[] {
  return checkHistory(history, options).violations.map((v) => v.kind);
}

function assertClean(history: Op[], options = {}): void {
  const { violations } = checkHistory(history, options);
  assert.deepEqual(violations, [], formatViolations(violations));
}

describe('linearizability checker: counters', () => {
  it('passes a clean history with concurrent increments and a final read', () => {
    assertClean(
      [
        incr('a', 0, 10, 1),
        incr('b', 5, 30, 3), // concurrent with c's: either order
        incr('c', 12, 25, 2),
        readCtr('a', 11, 14, 1),
        incr('a', 31, 40, 4),
        readCtr('final', 50, 51, 4),
      ],
      { requireFinalReads: true },
    );
  });

  it('passes indeterminate increments that took effect, and ones that did not', () => {
    // b's first increment was applied (c got 3), b's second was not (final is 4 = 3 ok + 1 info).
    assertClean(
      [
        incr('a', 0, 10, 1),
        incrInfo('b', 11, 20),
        incr('a', 21, 30, 3),
        incrInfo('b', 31, 40),
        op('b', 'incr', 'ctr', 41, 42, 'fail', { error: 'LOCK_TIMEOUT' }),
        incr('c', 43, 50, 4),
        readCtr('final', 60, 61, 4),
      ],
      { requireFinalReads: true },
    );
    // The same, neither info one applied: final 2 + 0; or one applied before the end, late.
    assertClean([
      incr('a', 0, 10, 1),
      incrInfo('b', 11, 20),
      incr('a', 21, 30, 2),
      readCtr('final', 60, 61, 2),
    ]);
    assertClean([
      incr('a', 0, 10, 1),
      incrInfo('b', 11, 20),
      incr('a', 21, 30, 2),
      readCtr('final', 60, 61, 3),
    ]);
  });

  it('catches a lost acknowledged increment (final value too small)', () => {
    const history = [
      incr('a', 0, 10, 1),
      incr('b', 11, 20, 2),
      incr('a', 21, 30, 3),
      readCtr('final', 40, 41, 2),
    ];
    assert.deepEqual(kinds(history), ['counter-order']);
    // Without the value 3 being seen: three acknowledged, the counter says 2.
    const lost = [
      incr('a', 0, 10, 1),
      incr('b', 5, 20, 2),
      incr('c', 5, 20, 2),
      readCtr('final', 40, 41, 2),
    ];
    assert.ok(
      kinds(lost).includes('lost-increment'),
      formatViolations(checkHistory(lost).violations),
    );
    // An increment that returns a value its predecessors' count does not allow.
    assert.deepEqual(kinds([incr('a', 0, 10, 1), incr('b', 0, 10, 2), incr('c', 20, 30, 2)]), [
      'duplicate-increment',
      'counter-order',
    ]);
  });

  it('catches a double-applied increment (duplicate value, final value too large)', () => {
    const duplicate = [incr('a', 0, 10, 1), incr('b', 5, 15, 1), readCtr('final', 20, 21, 2)];
    assert.deepEqual(kinds(duplicate), ['duplicate-increment']);
    const twice = [incr('a', 0, 10, 1), incr('b', 11, 20, 2), readCtr('final', 30, 31, 3)];
    const result = checkHistory(twice);
    assert.deepEqual(
      result.violations.map((v) => v.kind),
      ['extra-increment'],
    );
    assert.match(formatViolations(result.violations), /final value of ctr is 3.*only 2 increments/);
    // An increment returning more than the increments invoked so far.
    assert.deepEqual(kinds([incr('a', 0, 10, 2)]), ['extra-increment']);
  });

  it('catches broken real-time order between increments', () => {
    // c was invoked after a completed, yet got a smaller value (p and r run all along).
    const history = [
      incr('p', 0, 30, 1),
      incr('r', 0, 40, 4),
      incr('a', 1, 10, 3),
      incr('c', 11, 20, 2),
    ];
    const result = checkHistory(history);
    assert.deepEqual(
      result.violations.map((v) => v.kind),
      ['counter-order'],
    );
    assert.equal(result.violations[0]?.ops[0]?.client, 'c');
    assert.equal(result.violations[0]?.ops[1]?.client, 'a');
    // Within the clock slack, the two are concurrent, and either order is fine.
    assertClean([incr('a', 0, 10, 1), readCtr('b', 9.5, 20, 0)], { clockSlackMs: 1 });
    assert.deepEqual(kinds([incr('a', 0, 10, 1), readCtr('b', 11.5, 20, 0)], { clockSlackMs: 1 }), [
      'counter-order',
    ]);
  });

  it('requires a final read when asked to', () => {
    assert.deepEqual(kinds([incr('a', 0, 10, 1)], { requireFinalReads: true }), ['malformed']);
    // A read concurrent with the last increment is not final.
    assert.deepEqual(
      kinds([incr('a', 0, 10, 1), readCtr('r', 5, 12, 1)], { requireFinalReads: true }),
      ['malformed'],
    );
  });
});

describe('linearizability checker: registers', () => {
  it('passes a clean history, with concurrent reads seeing either value', () => {
    assertClean([
      read('r', 0, 1, null),
      write(2, 10, 1),
      read('r', 5, 6, null), // concurrent with the write: not yet
      read('s', 6, 12, 1),
      read('r', 7, 8, null), // concurrent: still fine, s's read had not completed
      write(11, 20, 2),
      read('r', 13, 14, 1),
      read('s', 15, 25, 2),
      read('r', 21, 22, 2),
    ]);
  });

  it('passes indeterminate writes that took effect, late or never', () => {
    assertClean([
      write(0, 10, 1),
      write(11, 20, 2, 'info'),
      read('r', 21, 22, 1), // 2 not applied (yet)
      write(23, 30, 3),
      read('r', 31, 32, 3),
    ]);
    // 2 took effect late, after 3: legal, reported as a note only.
    const late = checkHistory([
      write(0, 10, 1),
      write(11, 20, 2, 'info'),
      write(23, 30, 3),
      read('r', 31, 32, 3),
      read('r', 33, 34, 2),
    ]);
    assert.deepEqual(late.violations, []);
    assert.equal(late.notes.length, 1);
  });

  it('catches a stale read after a completed write', () => {
    const result = checkHistory([write(0, 10, 1), write(11, 20, 2), read('r', 21, 22, 1)]);
    assert.deepEqual(
      result.violations.map((v) => v.kind),
      ['stale-read'],
    );
    assert.match(
      formatViolations(result.violations),
      /returned 1, but the write of 2 had completed/,
    );
    assert.deepEqual(kinds([write(0, 10, 1), read('r', 11, 12, null)]), ['stale-read']);
  });

  it('catches a read going back relative to an earlier read', () => {
    // The write of 2 is still in flight; one read saw it, a later read sees 1 again.
    const history = [write(0, 10, 1), write(11, 40, 2), read('r', 12, 15, 2), read('s', 16, 18, 1)];
    assert.deepEqual(kinds(history), ['read-went-back']);
    // Also when the value seen first came from an indeterminate write: it did take effect.
    assert.deepEqual(
      kinds([
        write(0, 10, 1),
        write(11, 20, 2, 'info'),
        read('r', 21, 22, 2),
        read('s', 23, 24, 1),
      ]),
      ['read-went-back'],
    );
  });

  it('catches a value never written, a failed write read, and a read from the future', () => {
    assert.deepEqual(kinds([write(0, 10, 1), read('r', 11, 12, 7)]), ['unwritten-value']);
    assert.deepEqual(kinds([write(0, 10, 1, 'fail'), read('r', 11, 12, 1)]), ['unwritten-value']);
    assert.deepEqual(kinds([read('r', 0, 1, 1), write(5, 10, 1)]), ['unwritten-value']);
    assert.deepEqual(kinds([read('r', 0, 1, 3)]), ['unwritten-value']);
  });

  it('refuses histories it cannot order', () => {
    const two = [write(0, 10, 1), { ...write(11, 20, 2), client: 'other' }];
    assert.deepEqual(kinds(two), ['malformed']);
    assert.deepEqual(kinds([write(0, 10, 2), write(11, 20, 1)]), ['malformed']);
    assert.deepEqual(kinds([write(0, 10, 1), write(5, 20, 2)]), ['malformed']);
    assert.deepEqual(
      kinds([write(0, 10, 1), incr('a', 0, 1, 1)].map((o) => ({ ...o, key: 'k' }))),
      ['malformed'],
    );
  });
});

describe('history format', () => {
  it('parses JSON lines and refuses malformed ones, naming the line', () => {
    const ops = parseHistory(
      `${JSON.stringify(incr('a', 0, 1, 1))}\n\n${JSON.stringify(write(2, 3, 1, 'info'))}\n`,
    );
    assert.equal(ops.length, 2);
    assert.throws(() => parseHistory('{"client":"a"}\n', 'h.jsonl'), /h\.jsonl:1: op is not/);
    assert.throws(() => parseHistory('nope', 'h.jsonl'), /h\.jsonl:1: not JSON/);
    assert.throws(
      () => parseHistory(JSON.stringify({ ...incr('a', 0, 1, 1), result: undefined })),
      /needs a result/,
    );
  });
});
