// Not a test: the history format of the linearizability check, its clock, its
// writer and its reader.
//
// A history is JSON lines, one file per client process, one line per operation:
//   {"client":"c1","op":"incr","key":"ctr-3","invokeAt":…,"completeAt":…,"outcome":"ok","result":17}
//   {"client":"c1","op":"write","key":"reg-c1","value":42,"invokeAt":…,"completeAt":…,"outcome":"info","error":"CONNECTION_LOST"}
//   {"client":"c2","op":"read","key":"reg-c1","invokeAt":…,"completeAt":…,"outcome":"ok","result":41}
// A line is written once the operation has completed (an answer, an error or a timeout), so a
// client process must end cleanly (not be killed) for its history to be whole: an operation
// missing from a history could have been applied, and the checker would call it an extra.
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';

export type OpKind = 'incr' | 'write' | 'read';

/**
 * `ok`: the server answered and the operation took effect (for a read: returned `result`).
 * `fail`: the operation certainly did not take effect (see {@link DEFINITE_FAILURE_CODES}).
 * `info`: indeterminate — it may or may not have taken effect, at any time after `invokeAt`.
 */
export type Outcome = 'ok' | 'fail' | 'info';

export interface Op {
  /** The client process that ran it; a client runs its operations one at a time. */
  client: string;
  op: OpKind;
  /** A counter (incr, read) or a register (write, read); a key is one or the other. */
  key: string;
  /** What a write writes: unique per key, increasing along the writer's sequence. */
  value?: number;
  /** {@link historyNow} just before the call was made, and just after it settled. */
  invokeAt: number;
  completeAt: number;
  outcome: Outcome;
  /** An ok incr: the new value. An ok read: the value read, null when the key has none. */
  result?: number | null;
  /** The error code of a fail or info operation. */
  error?: string;
}

/**
 * Error codes that guarantee the operation was not applied, so its outcome is `fail`:
 * - `INVALID_ARGUMENT`: refused by the client's checks, before anything is sent;
 * - `TABLE_NOT_FOUND`: the server found no table, so nothing could be written;
 * - `LOCK_TIMEOUT`: the mutation never obtained its row's lock on the server;
 * - `UNAUTHENTICATED`: refused at the session's HELLO, before any call.
 * Every other error is `info`: `CONNECTION_LOST` (the call may have been applied before the
 * connection broke), `ABORTED` and timeouts (the call may be applied after we gave up),
 * `FENCED` (the batch may be on disk, and a new master may have read it), `NOT_MASTER` and
 * `MASTER_CHANGED` returned to a call (the master may have lost its mastership mid-call),
 * `ALREADY_CLOSED`, `INTERNAL`, and anything unknown.
 */
export const DEFINITE_FAILURE_CODES: ReadonlySet<string> = new Set([
  'INVALID_ARGUMENT',
  'TABLE_NOT_FOUND',
  'LOCK_TIMEOUT',
  'UNAUTHENTICATED',
]);

/** The outcome of an operation that failed with `err`: `fail` only when it cannot have applied. */
export function outcomeOf(err: unknown): { outcome: 'fail' | 'info'; error: string } {
  const code = (err as { code?: unknown } | null)?.code;
  const error = typeof code === 'string' ? code : ((err as Error)?.name ?? 'UNKNOWN');
  return { outcome: DEFINITE_FAILURE_CODES.has(error) ? 'fail' : 'info', error };
}

/**
 * Milliseconds on a clock shared by every process of one machine: `process.hrtime`, which is
 * the system's monotonic clock (Linux CLOCK_MONOTONIC: since boot, the same in every process,
 * never stepped, unlike the wall clock that `performance.timeOrigin` is taken from at each
 * process's start). Sub-microsecond precision; the checker still allows a slack
 * (`clockSlackMs`) for the time between reading the clock and sending or receiving.
 */
export function historyNow(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** Appends operations to a history file, one synchronous line each (nothing buffered). */
export class HistoryWriter {
  readonly #fd: number;

  constructor(path: string) {
    this.#fd = openSync(path, 'a');
  }

  append(op: Op): void {
    writeSync(this.#fd, `${JSON.stringify(op)}\n`);
  }

  close(): void {
    closeSync(this.#fd);
  }
}

const KINDS: ReadonlySet<string> = new Set(['incr', 'write', 'read']);
const OUTCOMES: ReadonlySet<string> = new Set(['ok', 'fail', 'info']);

/** Checks one parsed line; throws naming `where` when it is not an {@link Op}. */
export function checkOp(raw: unknown, where: string): Op {
  const o = raw as Record<string, unknown> | null;
  const bad = (what: string) => new Error(`${where}: ${what} in ${JSON.stringify(raw)}`);
  if (o === null || typeof o !== 'object' || Array.isArray(o)) throw bad('not an object');
  if (typeof o.client !== 'string' || o.client === '') throw bad('no client');
  if (typeof o.op !== 'string' || !KINDS.has(o.op)) throw bad('op is not incr, write or read');
  if (typeof o.key !== 'string' || o.key === '') throw bad('no key');
  if (typeof o.outcome !== 'string' || !OUTCOMES.has(o.outcome)) throw bad('bad outcome');
  if (typeof o.invokeAt !== 'number' || typeof o.completeAt !== 'number')
    throw bad('invokeAt and completeAt must be numbers');
  if (o.completeAt < o.invokeAt) throw bad('completeAt is before invokeAt');
  if (o.op === 'write' && !Number.isSafeInteger(o.value))
    throw bad('a write needs an integer value');
  if (o.outcome === 'ok') {
    if (o.op === 'incr' && !Number.isSafeInteger(o.result)) throw bad('an ok incr needs a result');
    if (o.op === 'read' && o.result !== null && !Number.isSafeInteger(o.result))
      throw bad('an ok read needs an integer or null result');
  }
  return o as unknown as Op;
}

/** Parses history text (JSON lines); a blank line is skipped, anything else must be an Op. */
export function parseHistory(text: string, source = 'history'): Op[] {
  const ops: Op[] = [];
  const lines = text.split('\n');
  for (const [i, line] of lines.entries()) {
    if (line.trim() === '') continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      throw new Error(`${source}:${i + 1}: not JSON: ${line.slice(0, 200)}`);
    }
    ops.push(checkOp(parsed, `${source}:${i + 1}`));
  }
  return ops;
}

/** Reads and merges the histories of several client files. */
export function readHistories(paths: readonly string[]): Op[] {
  return paths.flatMap((path) => parseHistory(readFileSync(path, 'utf8'), path));
}

/** One line describing an operation, for violation messages. */
export function describeOp(op: Op): string {
  const what =
    op.op === 'write'
      ? `write(${op.key}, ${op.value})`
      : `${op.op}(${op.key})${op.outcome === 'ok' ? ` -> ${op.result === null ? 'none' : op.result}` : ''}`;
  const at = `[${op.invokeAt.toFixed(3)} .. ${op.completeAt.toFixed(3)}]`;
  const outcome = op.outcome === 'ok' ? 'ok' : `${op.outcome}${op.error ? ` ${op.error}` : ''}`;
  return `${op.client} ${what} ${outcome} ${at}`;
}
