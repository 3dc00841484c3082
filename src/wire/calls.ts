import { InvalidArgumentError, type LocksmithError, ProtocolError } from '../core/errors.js';
import { describeValue } from '../core/options.js';
import { LOCK_ID } from '../rows/lock-id.js';
import type { Delete, Increment, Put, RowMutations } from '../rows/mutation.js';
import type { Get, Scan } from '../rows/query.js';
import type { Result } from '../rows/result.js';
import type { BatchStatus } from '../rows/table.js';
import {
  checkTableDescriptor,
  describeTable,
  type TableDescription,
  type TableDescriptor,
} from '../rows/table-descriptor.js';
import type { ServerStatus } from '../server/server-status.js';
import type { TableRegions } from '../server/table-regions.js';
import {
  bytes,
  decodeDelete,
  decodeGet,
  decodeIncrement,
  decodeMutation,
  decodePut,
  decodeResult,
  decodeRowMutations,
  decodeScan,
  encodeDelete,
  encodeGet,
  encodeIncrement,
  encodeMutation,
  encodePut,
  encodeResult,
  encodeRowMutations,
  encodeScan,
  type LockResolver,
  wireInteger,
} from './rows-codec.js';
import { fromWireError, toWireError } from './wire-error.js';

/**
 * The protocol's calls, declared once (docs/protocol.md, "Methods", is checked against this
 * table by a test). Each call says:
 *
 * - `lane`: `priority` calls (releasing, renewing, keeping alive, administration, status)
 *   never queue behind `handler` calls, and no call waits for a row while it holds a handler.
 * - `resend`: whether the client may send it again after a lost connection (running it twice
 *   is the same as once, or, for a lock call, a grant the client never learned of is given
 *   back when the session's next WELCOME lists it). Any other call in flight when a connection drops fails with
 *   `CONNECTION_LOST`: it may or may not have run.
 * - `late`: what the client does with a result that arrives after its caller gave up (timed
 *   out, aborted): `'drop'` it, or `'giveBack'` the row lock it grants (with `unlockRow`).
 * - `encodeArgs` (client) and `decodeArgs` (server): the argument tuple on the wire. The
 *   server's decoder refuses a wrong arity or a malformed value (`INVALID_ARGUMENT`) with the
 *   same checks and messages as the in-process call, resolves tables (`TABLE_NOT_FOUND`) and
 *   the session's lock ids (`UNKNOWN_ROW_LOCK`) through its {@link ArgScope}.
 * - `encodeResult` (server) and `decodeResult` (client): the result on the wire; a malformed
 *   result from a server is its `PROTOCOL_ERROR`, never the caller's mistake.
 */

/** A table an argument names, found by the server. */
export interface TableArg {
  readonly name: string;
  readonly regions: TableRegions;
}

/** What the server's argument decoders ask of the calling session and the server. */
export interface ArgScope {
  /** The table named by `name`, or `TABLE_NOT_FOUND`. */
  table(name: unknown): TableArg;
  /** Resolves lock ids in mutations against the calling session, on `table`. */
  locks(table: string): LockResolver;
  /** `lockId` if the calling session holds it on `table`; `UNKNOWN_ROW_LOCK` otherwise. */
  owned(table: string, lockId: unknown): string;
}

/** A row lock as a server grants it. */
export interface Grant {
  readonly lockId: string;
  readonly token: number;
  /**
   * The lock's lease: it is lost unless used or renewed within this long. 0: no lease of its
   * own, the lock renews itself (held while the session lives).
   */
  readonly leaseMs: number;
}

/** A session opened on a connection besides its own (`openSession`). */
export interface OpenedSession {
  /** The secret that resumes it (on this connection after a reconnect, or on another). */
  readonly id: string;
  readonly leaseMs: number;
}

/** A session resumed on a connection besides its own (`resumeSession`). */
export interface ResumedSession {
  readonly leaseMs: number;
  /** `[lockId, table]` of each row lock it still holds. */
  readonly locks: [string, string][];
}

/** A failed entry of a `batch`: its error; null for an entry that succeeded. */
export type BatchEntry = LocksmithError | null;

/** A page of a scan: the rows, and the scanner id to ask for more (null: the scan is over). */
export interface ScanPage {
  readonly scanner: string | null;
  readonly rows: Result[];
}

export type Lane = 'handler' | 'priority';

/** One call of the protocol (see the file comment). */
export interface CallSpec<In extends unknown[], Args extends unknown[], Out, Back> {
  readonly lane: Lane;
  /** The argument tuple as docs/protocol.md writes it; trailing `name?` elements are optional. */
  readonly shape: string;
  readonly resend: boolean;
  readonly late: 'drop' | 'giveBack';
  encodeArgs(...args: In): unknown[];
  decodeArgs(raw: readonly unknown[], scope: ArgScope): Args;
  encodeResult(out: Out): unknown;
  decodeResult(value: unknown): Back;
}

function spec<In extends unknown[], Args extends unknown[], Out, Back>(
  s: CallSpec<In, Args, Out, Back>,
): CallSpec<In, Args, Out, Back> {
  return s;
}

// ---- argument pieces ---------------------------------------------------------------------

/**
 * How many arguments a shape takes: its top-level elements, the trailing ones marked `?`
 * optional (`[table, Put, waitMs?]`: 2 or 3).
 */
export function shapeArity(shape: string): readonly [min: number, max: number] {
  const elements = shapeElements(shape);
  const required = elements.filter((e) => !e.endsWith('?')).length;
  return [required, elements.length];
}

/** Where a call's server-side wait (`waitMs`) sits in its arguments; undefined if it has none. */
export function waitArgOf(shape: string): number | undefined {
  const at = shapeElements(shape).findIndex((e) => /^waitMs\b/.test(e));
  return at === -1 ? undefined : at;
}

/** A shape's top-level elements: `[a, [b, c], d?]` → `a`, `[b, c]`, `d?`. */
function shapeElements(shape: string): string[] {
  const inner = shape.slice(1, -1).trim();
  if (inner === '') return [];
  const elements: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < inner.length; i++) {
    const c = inner[i];
    if (c === '[' || c === '{') depth++;
    else if (c === ']' || c === '}') depth--;
    else if (c === ',' && depth === 0) {
      elements.push(inner.slice(start, i).trim());
      start = i + 1;
    }
  }
  elements.push(inner.slice(start).trim());
  return elements;
}

/** A wait on the wire: milliseconds >= 0, -1 for forever, nil or absent for the default. */
export function encodeWait(ms: number | undefined): number | null {
  if (ms === undefined) return null;
  return Number.isFinite(ms) ? Math.ceil(ms) : -1;
}

function decodeWait(value: unknown): number | undefined {
  if (value === null || value === undefined) return undefined;
  const ms = wireInteger(value, 'waitMs');
  if (ms === -1) return Number.POSITIVE_INFINITY;
  if (ms < 0) throw new InvalidArgumentError(`waitMs must be >= 0 or -1 (forever), got ${ms}`);
  return ms;
}

/**
 * Whether a row lock renews itself (held while the session lives, no lease of its own);
 * absent means false, a lease, as before the flag existed.
 */
function decodeRenew(value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value !== 'boolean') {
    throw new InvalidArgumentError(`renew must be true or false, got ${describeValue(value)}`);
  }
  return value;
}

/** The id of a lock to adopt (20 characters of base64url), or nil: the holder's lock on the row. */
function adoptedLockId(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value !== 'string' || !LOCK_ID.test(value))
    throw new InvalidArgumentError(
      `adoptLock: ${describeValue(value)} is not a lock id (20 characters of base64url)`,
    );
  return value;
}

/** The id of the session that held the lock on its region's earlier server (22 characters of base64url). */
function holderSessionId(value: unknown): string {
  if (typeof value !== 'string' || !/^[A-Za-z0-9_-]{22}$/.test(value))
    throw new InvalidArgumentError(
      `adoptLock: ${describeValue(value)} is not a session id (22 characters of base64url)`,
    );
  return value;
}

/** The number a client gives a session its connection carries: an integer 1..2^32-1. */
function sessionNumber(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 0xffff_ffff) {
    throw new InvalidArgumentError(
      `A session number must be an integer from 1 to 2^32-1, got ${describeValue(value)}`,
    );
  }
  return value;
}

/** A session id as a WELCOME or `openSession` gave it (at most 128 characters). */
function sessionIdArg(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 128) {
    throw new InvalidArgumentError(`${describeValue(value)} is not a session id`);
  }
  return value;
}

/** An optional boolean argument; absent or nil: false. */
function optionalFlag(value: unknown, what: string): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value !== 'boolean') {
    throw new InvalidArgumentError(`${what} must be true or false, got ${describeValue(value)}`);
  }
  return value;
}

/** The optional trailing waitMs of a mutation: sent only when the caller gave one. */
function withWait(args: unknown[], waitMs: number | undefined): unknown[] {
  if (waitMs !== undefined) args.push(encodeWait(waitMs));
  return args;
}

function decodeCount(value: unknown, what: string): number | undefined {
  if (value === null || value === undefined) return undefined;
  const n = wireInteger(value, what);
  if (n < 1) throw new InvalidArgumentError(`nextRows: the ${what} must be at least 1, got ${n}`);
  return n;
}

function mutationList(
  value: unknown,
  resolve?: LockResolver,
  what = 'mutation list',
): (Put | Delete)[] {
  if (!Array.isArray(value)) throw new InvalidArgumentError(`Malformed ${what}: expected an array`);
  return value.map((m) => decodeMutation(m, resolve));
}

function expectedValue(value: unknown) {
  return value === null || value === undefined ? null : bytes(value, 'expected value');
}

const latin1 = (s: string) => Buffer.from(s, 'latin1');

/** Bytes from the wire: a `bin`, or a `str` taken as its UTF-8 bytes. */
type Bytes = string | Uint8Array;

// ---- result pieces (client side: a malformed result is the server's PROTOCOL_ERROR) --------

function malformed(what: string, detail?: string): ProtocolError {
  return new ProtocolError(`The server sent a malformed ${what}${detail ? `: ${detail}` : ''}`);
}

/** Decodes with a shared decoder whose refusal is the server's fault here. */
function fromServer<T>(what: string, decode: () => T): T {
  try {
    return decode();
  } catch (err) {
    if (err instanceof InvalidArgumentError || err instanceof TypeError) {
      throw new ProtocolError(`The server sent a malformed ${what}: ${err.message}`, {
        cause: err,
      });
    }
    throw err;
  }
}

function tuple(value: unknown, what: string, length: number): unknown[] {
  if (!Array.isArray(value) || value.length !== length) {
    throw malformed(what, `expected an array of ${length}`);
  }
  return value;
}

function nothing(value: unknown): void {
  if (value !== null && value !== undefined) throw malformed('answer', 'expected nil');
}

function nil(): null {
  return null;
}

function flag(value: unknown): boolean {
  if (typeof value !== 'boolean') throw malformed('answer', 'expected a boolean');
  return value;
}

function result(what: string) {
  return (value: unknown): Result => fromServer(what, () => decodeResult(value));
}

function results(value: unknown, what: string): Result[] {
  if (!Array.isArray(value)) throw malformed(what, 'expected an array of results');
  return value.map((r) => fromServer(what, () => decodeResult(r)));
}

function grant(value: unknown): Grant {
  const [lockId, token, leaseMs] = tuple(value, 'grant', 3);
  if (typeof lockId !== 'string' || lockId.length === 0) throw malformed('grant', 'lock id');
  return {
    lockId,
    token: fromServer('grant', () => wireInteger(token, 'token')),
    leaseMs: fromServer('grant', () => wireInteger(leaseMs, 'lease')),
  };
}

function encodeGrant(g: Grant): unknown[] {
  return [g.lockId, g.token, g.leaseMs];
}

function description(value: unknown): TableDescription {
  const d = value as Partial<TableDescription> | null;
  if (
    typeof d !== 'object' ||
    d === null ||
    typeof d.name !== 'string' ||
    !Array.isArray(d.families) ||
    typeof d.timestampOnArrival !== 'boolean' ||
    !d.families.every((f) => typeof f?.name === 'string' && typeof f.maxVersions === 'number') ||
    !(
      d.splits === undefined ||
      (Array.isArray(d.splits) && d.splits.every((k) => k instanceof Uint8Array))
    )
  ) {
    throw malformed('table description');
  }
  return {
    name: d.name,
    families: d.families.map((f) => ({ name: f.name, maxVersions: f.maxVersions })),
    timestampOnArrival: d.timestampOnArrival,
    // A server from before regions sends none: its tables are one region.
    splits: (d.splits ?? []).map((k) => Buffer.from(k.buffer, k.byteOffset, k.byteLength)),
  };
}

// ---- the calls ---------------------------------------------------------------------------

/** A mutation of one row through one object (put, delete, increment, mutateRow). */
function rowMutation<M, Out, Back>(
  shape: string,
  encode: (m: M) => unknown[],
  decode: (value: unknown, resolve: LockResolver) => M,
  encodeResult: (out: Out) => unknown,
  decodeResult: (value: unknown) => Back,
) {
  return spec({
    lane: 'handler',
    shape,
    resend: false,
    late: 'drop',
    encodeArgs: (table: string, m: M, waitMs?: number) => withWait([table, encode(m)], waitMs),
    decodeArgs: (raw, scope): [TableArg, M, number | undefined] => {
      const table = scope.table(raw[0]);
      return [table, decode(raw[1], scope.locks(table.name)), decodeWait(raw[2])];
    },
    encodeResult,
    decodeResult,
  });
}

/** checkAndPut / checkAndDelete: the compared cell, then the mutation. */
function checkAndMutate<M extends Put | Delete>(
  mutation: 'Put' | 'Delete',
  encode: (m: M) => unknown[],
  decode: (value: unknown, resolve: LockResolver) => M,
) {
  return spec({
    lane: 'handler',
    shape: `[table, row, family, qualifier, expected | nil, ${mutation}, waitMs?]`,
    resend: false,
    late: 'drop',
    encodeArgs: (
      table: string,
      row: string,
      family: string,
      qualifier: string,
      expected: Uint8Array | null,
      m: M,
      waitMs?: number,
    ) => withWait([table, latin1(row), family, latin1(qualifier), expected, encode(m)], waitMs),
    decodeArgs: (
      raw,
      scope,
    ): [TableArg, Bytes, string, Bytes, Bytes | null, M, number | undefined] => {
      const table = scope.table(raw[0]);
      return [
        table,
        bytes(raw[1], 'row'),
        raw[2] as string,
        bytes(raw[3], 'qualifier'),
        expectedValue(raw[4]),
        decode(raw[5], scope.locks(table.name)),
        decodeWait(raw[6]),
      ];
    },
    encodeResult: (out: boolean) => out,
    decodeResult: flag,
  });
}

/** mutateRows / batch: a list of Put and Delete across rows. */
function mutationBatch<Out, Back>(
  resolveLocks: boolean,
  encodeResult: (out: Out) => unknown,
  decodeResult: (value: unknown) => Back,
) {
  return spec({
    lane: 'handler',
    shape: '[table, [mutation, ...], waitMs?]',
    resend: false,
    late: 'drop',
    encodeArgs: (table: string, mutations: readonly (Put | Delete)[], waitMs?: number) =>
      withWait([table, mutations.map(encodeMutation)], waitMs),
    decodeArgs: (raw, scope): [TableArg, (Put | Delete)[], number | undefined] => {
      const table = scope.table(raw[0]);
      // mutateRows leaves lock ids unresolved: the region refuses any, as in process.
      const resolve = resolveLocks ? scope.locks(table.name) : (lockId: string) => ({ lockId });
      return [table, mutationList(raw[1], resolve), decodeWait(raw[2])];
    },
    encodeResult,
    decodeResult,
  });
}

/** unlockRow / renewLease: a lock the session holds. */
function heldLock() {
  return spec({
    lane: 'priority',
    shape: '[table, lockId]',
    resend: false,
    late: 'drop',
    encodeArgs: (table: string, lockId: string) => [table, lockId],
    decodeArgs: (raw, scope): [TableArg, string] => {
      // The session's check first: a lock of a dropped table is unknown to it.
      const lockId = scope.owned(raw[0] as string, raw[1]);
      return [scope.table(raw[0]), lockId];
    },
    encodeResult: nil,
    decodeResult: nothing,
  });
}

/** A call with no arguments. */
function noArgs<Out, Back>(
  lane: Lane,
  resend: boolean,
  encodeResult: (out: Out) => unknown,
  decodeResult: (value: unknown) => Back,
) {
  return spec({
    lane,
    shape: '[]',
    resend,
    late: 'drop',
    encodeArgs: () => [],
    decodeArgs: (): [] => [],
    encodeResult,
    decodeResult,
  });
}

/** A call on a table by name (describeTable, dropTable). */
function tableAdmin<Out, Back>(
  resend: boolean,
  encodeResult: (out: Out) => unknown,
  decodeResult: (value: unknown) => Back,
) {
  return spec({
    lane: 'priority',
    shape: '[name]',
    resend,
    late: 'drop',
    encodeArgs: (name: string) => [name],
    decodeArgs: (raw, scope): [string] => [scope.table(raw[0]).name],
    encodeResult,
    decodeResult,
  });
}

function statuses(list: BatchStatus[]): unknown[] {
  return list.map((s) => {
    if (s.ok) return null;
    const { code, message } = toWireError(s.error);
    return [code, message];
  });
}

function batchErrors(value: unknown): BatchEntry[] {
  if (!Array.isArray(value)) throw malformed('batch answer', 'expected an array');
  return value.map((entry) => {
    if (entry === null) return null;
    const [code, message] = tuple(entry, 'batch status', 2);
    return fromWireError(code, message);
  });
}

function tableList(value: unknown): string[] {
  if (!Array.isArray(value) || !value.every((n) => typeof n === 'string'))
    throw malformed('table list');
  return value;
}

/** A region of a table as `regionMap` tells it: its rows `[startKey, endKey)` (latin1) and its server. */
export interface RegionMapEntry {
  readonly startKey: string;
  /** `''`: the table's last region. */
  readonly endKey: string;
  /** `host:port` of the server serving it; `null` while none does. */
  readonly server: string | null;
}

/** `regionMap`'s answer: the regions, and the address the answering server names itself by. */
export interface RegionMap {
  readonly self: string;
  readonly regions: readonly RegionMapEntry[];
}

function regionMap(answer: unknown): RegionMap {
  if (!Array.isArray(answer) || answer.length !== 2 || typeof answer[0] !== 'string')
    throw malformed('region map');
  const value = answer[1] as unknown;
  if (!Array.isArray(value) || value.length === 0) throw malformed('region map');
  const key = (v: unknown) => {
    if (v instanceof Uint8Array) return Buffer.from(v).toString('latin1');
    if (typeof v === 'string') return v;
    throw malformed('region map');
  };
  const out = value.map((entry): RegionMapEntry => {
    if (!Array.isArray(entry) || entry.length !== 3) throw malformed('region map');
    const [start, end, server] = entry as unknown[];
    if (server !== null && typeof server !== 'string') throw malformed('region map');
    return { startKey: key(start), endKey: key(end), server };
  });
  // Contiguous, in key order, from the first row to the end: a map a client can route by.
  out.forEach((r, i) => {
    const expected = i === 0 ? '' : (out[i - 1] as RegionMapEntry).endKey;
    if (r.startKey !== expected || (i < out.length - 1 && r.endKey <= r.startKey))
      throw malformed('region map');
  });
  if ((out[out.length - 1] as RegionMapEntry).endKey !== '') throw malformed('region map');
  return { self: answer[0] as string, regions: out };
}

function serverStatus(value: unknown): ServerStatus {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw malformed('status');
  return value as ServerStatus;
}

export const CALLS = {
  // ---- handler lane
  get: spec({
    lane: 'handler',
    shape: '[table, Get]',
    resend: true,
    late: 'drop',
    encodeArgs: (table: string, get: Get) => [table, encodeGet(get)],
    decodeArgs: (raw, scope): [TableArg, Get] => {
      const table = scope.table(raw[0]);
      return [table, decodeGet(raw[1], scope.locks(table.name))];
    },
    encodeResult,
    decodeResult: result('get result'),
  }),
  put: rowMutation<Put, void, void>('[table, Put, waitMs?]', encodePut, decodePut, nil, nothing),
  delete: rowMutation<Delete, void, void>(
    '[table, Delete, waitMs?]',
    encodeDelete,
    decodeDelete,
    nil,
    nothing,
  ),
  checkAndPut: checkAndMutate<Put>('Put', encodePut, decodePut),
  checkAndDelete: checkAndMutate<Delete>('Delete', encodeDelete, decodeDelete),
  increment: rowMutation<Increment, Result, Result>(
    '[table, Increment, waitMs?]',
    encodeIncrement,
    decodeIncrement,
    encodeResult,
    result('increment result'),
  ),
  mutateRow: rowMutation<RowMutations, void, void>(
    '[table, RowMutations, waitMs?]',
    encodeRowMutations,
    decodeRowMutations,
    nil,
    nothing,
  ),
  mutateRows: mutationBatch<void, void>(false, nil, nothing),
  batch: mutationBatch(true, statuses, batchErrors),
  lockRow: spec({
    lane: 'handler',
    shape: '[table, row, waitMs | nil, renew?]',
    // Sent again after a lost connection: a grant whose answer was lost is listed by the
    // session's next WELCOME and given back, so a second send cannot hold the row twice.
    resend: true,
    late: 'giveBack',
    encodeArgs: (table: string, row: string, waitMs: number | undefined, renew: boolean) => [
      table,
      latin1(row),
      encodeWait(waitMs),
      renew,
    ],
    decodeArgs: (raw, scope): [TableArg, Bytes, number | undefined, boolean] => [
      scope.table(raw[0]),
      bytes(raw[1], 'row'),
      decodeWait(raw[2]),
      decodeRenew(raw[3]),
    ],
    encodeResult: encodeGrant,
    decodeResult: grant,
  }),
  tryLockRow: spec({
    lane: 'handler',
    shape: '[table, row, renew?]',
    resend: true,
    late: 'giveBack',
    encodeArgs: (table: string, row: string, renew: boolean) => [table, latin1(row), renew],
    decodeArgs: (raw, scope): [TableArg, Bytes, boolean] => [
      scope.table(raw[0]),
      bytes(raw[1], 'row'),
      decodeRenew(raw[2]),
    ],
    encodeResult: (g: Grant | null) => (g === null ? null : encodeGrant(g)),
    decodeResult: (value): Grant | null => (value === null ? null : grant(value)),
  }),
  adoptLock: spec({
    lane: 'handler',
    shape: '[table, row, lockId | nil, sessionId]',
    // Adopting a lock the session already holds answers its grant again.
    resend: true,
    late: 'drop',
    encodeArgs: (table: string, row: string, lockId: string | null, sessionId: string) => [
      table,
      latin1(row),
      lockId,
      sessionId,
    ],
    decodeArgs: (raw, scope): [TableArg, Bytes, string | null, string] => [
      scope.table(raw[0]),
      bytes(raw[1], 'row'),
      adoptedLockId(raw[2]),
      holderSessionId(raw[3]),
    ],
    encodeResult: encodeGrant,
    decodeResult: grant,
  }),
  openScanner: spec({
    lane: 'handler',
    shape: '[table, Scan, rows]',
    resend: false,
    late: 'drop',
    encodeArgs: (table: string, scan: Scan, rows: number) => [table, encodeScan(scan), rows],
    decodeArgs: (raw, scope): [TableArg, Scan, number | undefined] => [
      scope.table(raw[0]),
      decodeScan(raw[1]),
      decodeCount(raw[2], 'row count'),
    ],
    encodeResult: (page: { scanner: string | null; rows: Result[] }) => [
      page.scanner,
      page.rows.map(encodeResult),
    ],
    decodeResult: (value): ScanPage => {
      const [scanner, rows] = tuple(value, 'scanner', 2);
      if (scanner !== null && typeof scanner !== 'string') throw malformed('scanner', 'its id');
      return { scanner, rows: results(rows, 'scan result') };
    },
  }),
  nextRows: spec({
    lane: 'handler',
    shape: '[scannerId, rows]',
    resend: false,
    late: 'drop',
    encodeArgs: (scanner: string, rows: number) => [scanner, rows],
    // The scanner id stays as sent: the registry answers LEASE_EXPIRED for any id it does not
    // hold for this session, a string or not.
    decodeArgs: (raw): [unknown, number | undefined] => [raw[0], decodeCount(raw[1], 'row count')],
    encodeResult: (page: { rows: Result[]; more: boolean }) => [
      page.rows.map(encodeResult),
      page.more,
    ],
    decodeResult: (value): { rows: Result[]; more: boolean } => {
      const [rows, more] = tuple(value, 'scan batch', 2);
      return { rows: results(rows, 'scan result'), more: more === true };
    },
  }),
  // ---- priority lane
  unlockRow: heldLock(),
  renewLease: heldLock(),
  closeScanner: spec({
    lane: 'priority',
    shape: '[scannerId]',
    resend: false,
    late: 'drop',
    encodeArgs: (scanner: string) => [scanner],
    decodeArgs: (raw): [unknown] => [raw[0]],
    encodeResult: nil,
    decodeResult: nothing,
  }),
  ping: noArgs<void, void>('priority', true, nil, nothing),
  closeSession: noArgs<void, void>('priority', false, nil, nothing),
  // Both are answered by the connection itself, in the order of its frames (a call naming the
  // session may follow at once); sent again after a reconnect only by the client's own
  // resumption, never by the resend of calls in flight.
  openSession: spec({
    lane: 'priority',
    shape: '[number, sessionLeaseMs | nil, releaseOnDisconnect?]',
    resend: false,
    late: 'drop',
    encodeArgs: (number: number, leaseMs: number | undefined, releaseOnDisconnect: boolean) => [
      number,
      leaseMs ?? null,
      releaseOnDisconnect,
    ],
    decodeArgs: (raw): [number, number | undefined, boolean] => [
      sessionNumber(raw[0]),
      raw[1] === null || raw[1] === undefined ? undefined : wireInteger(raw[1], 'sessionLeaseMs'),
      optionalFlag(raw[2], 'releaseOnDisconnect'),
    ],
    encodeResult: (s: OpenedSession) => [s.id, s.leaseMs],
    decodeResult: (value): OpenedSession => {
      const [id, leaseMs] = tuple(value, 'opened session', 2);
      if (typeof id !== 'string' || id.length === 0) throw malformed('opened session', 'id');
      return { id, leaseMs: fromServer('opened session', () => wireInteger(leaseMs, 'lease')) };
    },
  }),
  resumeSession: spec({
    lane: 'priority',
    shape: '[number, sessionId]',
    resend: false,
    late: 'drop',
    encodeArgs: (number: number, id: string) => [number, id],
    decodeArgs: (raw): [number, string] => [sessionNumber(raw[0]), sessionIdArg(raw[1])],
    encodeResult: (s: ResumedSession) => [s.leaseMs, s.locks],
    decodeResult: (value): ResumedSession => {
      const [leaseMs, locks] = tuple(value, 'resumed session', 2);
      if (
        !Array.isArray(locks) ||
        !locks.every(
          (l) =>
            Array.isArray(l) &&
            l.length === 2 &&
            typeof l[0] === 'string' &&
            typeof l[1] === 'string',
        )
      ) {
        throw malformed('resumed session', 'locks');
      }
      return {
        leaseMs: fromServer('resumed session', () => wireInteger(leaseMs, 'lease')),
        locks: locks as [string, string][],
      };
    },
  }),
  createTable: spec({
    lane: 'priority',
    shape: '[name, [family | {name, maxVersions}, ...], {timestampOnArrival?, splits?}?]',
    resend: false,
    late: 'drop',
    encodeArgs: (name: string, families: readonly unknown[], options: object) => [
      name,
      families,
      options,
    ],
    decodeArgs: (raw): [TableDescriptor] => [checkTableDescriptor(raw[0], raw[1], raw[2])],
    encodeResult: describeTable,
    decodeResult: description,
  }),
  listTables: noArgs('priority', true, (names: string[]) => names, tableList),
  describeTable: tableAdmin(true, describeTable, description),
  dropTable: tableAdmin<void, void>(false, nil, nothing),
  splitTable: spec({
    lane: 'priority',
    shape: '[name, key]',
    // Not resent: a second split at the same key is refused (it is a split already).
    resend: false,
    late: 'drop',
    encodeArgs: (name: string, key: string) => [name, latin1(key)],
    decodeArgs: (raw, scope): [string, Bytes] => [scope.table(raw[0]).name, bytes(raw[1], 'key')],
    encodeResult: describeTable,
    decodeResult: description,
  }),
  regionMap: spec({
    lane: 'priority',
    shape: '[name]',
    resend: true,
    late: 'drop',
    encodeArgs: (name: string) => [name],
    decodeArgs: (raw, scope): [string] => [scope.table(raw[0]).name],
    encodeResult: (map: RegionMap) => [
      map.self,
      map.regions.map((r) => [latin1(r.startKey), latin1(r.endKey), r.server]),
    ],
    decodeResult: regionMap,
  }),
  status: noArgs('priority', true, (s: ServerStatus) => s, serverStatus),
} as const;

/**
 * The server's side of a call's arguments: the count the shape allows, then the method's
 * decoder.
 */
export function decodeCallArgs(
  method: Method,
  raw: readonly unknown[],
  scope: ArgScope,
): unknown[] {
  const call = CALLS[method] as CallSpec<unknown[], unknown[], unknown, unknown>;
  const [min, max] = ARITY[method];
  if (raw.length < min || raw.length > max) {
    throw new InvalidArgumentError(
      `${method} takes ${call.shape}, got ${raw.length} argument${raw.length === 1 ? '' : 's'}`,
    );
  }
  return call.decodeArgs(raw, scope);
}

export type Calls = typeof CALLS;
export type Method = keyof Calls;
/** A call's arguments as the client gives them (encoded by `encodeArgs`). */
export type CallArgs<M extends Method> = Parameters<Calls[M]['encodeArgs']>;
/** A call's arguments as the server's handler receives them (decoded and checked). */
export type HandlerArgs<M extends Method> = ReturnType<Calls[M]['decodeArgs']>;
/** What a server's handler returns (encoded by `encodeResult`). */
export type HandlerResult<M extends Method> = Parameters<Calls[M]['encodeResult']>[0];
/** A call's result as the client receives it. */
export type CallResult<M extends Method> = ReturnType<Calls[M]['decodeResult']>;

export function isMethod(name: unknown): name is Method {
  return typeof name === 'string' && Object.hasOwn(CALLS, name);
}

/** The methods, in the table's order (the docs list them in the same order). */
export const METHOD_NAMES = Object.keys(CALLS) as Method[];

const ARITY = Object.fromEntries(
  METHOD_NAMES.map((m) => [m, shapeArity(CALLS[m].shape)]),
) as Record<Method, readonly [number, number]>;

/**
 * A result that came after its caller gave up: the lock it grants, to give back (for a
 * `late: 'giveBack'` call), or undefined. `args` are the call's arguments as sent.
 */
export function lateGrant(
  method: Method,
  args: readonly unknown[],
  value: unknown,
): { table: string; lockId: string } | undefined {
  if (CALLS[method].late !== 'giveBack' || value === null || typeof args[0] !== 'string') {
    return undefined;
  }
  try {
    return { table: args[0], lockId: grant(value).lockId };
  } catch {
    return undefined;
  }
}
