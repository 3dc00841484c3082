import { InvalidArgumentError } from '../core/errors.js';
import type { Cell, CellType } from '../rows/cell.js';
import { Delete, type DeleteEntry, Increment, Put, RowMutations } from '../rows/mutation.js';
import { Get, type Query, Scan } from '../rows/query.js';
import { Result } from '../rows/result.js';
import { checkCellCount } from '../rows/row-input.js';

/**
 * The wire forms of the row store's requests and results (docs/protocol.md, "Values"): plain
 * MessagePack arrays, bytes as `bin` (a `str` is taken as its UTF-8 bytes, as the library
 * does). Decoding goes through the library's own constructors, so a value refused in process
 * is refused over the wire with the same `INVALID_ARGUMENT` message.
 *
 * A row lock travels as its lock id; the server resolves it against the calling session (see
 * `LockResolver`), so an id of another session is `UNKNOWN_ROW_LOCK` before anything runs.
 */

/** Turns a lock id from the wire into what a mutation carries (the server's session check). */
export type LockResolver = (lockId: string) => { readonly lockId: string };

type Bytes = string | Uint8Array;

const CELL_TYPES: readonly CellType[] = ['Put', 'Delete', 'DeleteColumn', 'DeleteFamily'];
const DELETE_TYPES: readonly DeleteEntry['type'][] = ['Delete', 'DeleteColumn', 'DeleteFamily'];

function latin1(s: string): Buffer {
  return Buffer.from(s, 'latin1');
}

function fail(what: string): never {
  throw new InvalidArgumentError(`Malformed ${what}`);
}

function array(value: unknown, what: string, length?: number): unknown[] {
  if (!Array.isArray(value) || (length !== undefined && value.length !== length)) {
    fail(
      length === undefined
        ? `${what}: expected an array`
        : `${what}: expected an array of ${length}`,
    );
  }
  return value;
}

/** Bytes from the wire: a `bin`, or a `str` taken as its UTF-8 bytes. */
export function bytes(value: unknown, what: string): Bytes {
  if (typeof value === 'string' || value instanceof Uint8Array) return value;
  fail(`${what}: expected bytes`);
}

function optional<T>(value: unknown, check: (v: unknown) => T): T | undefined {
  return value === null || value === undefined ? undefined : check(value);
}

/** A safe integer, whether it came as a MessagePack int, a 64-bit int or a float. */
export function wireInteger(value: unknown, what: string): number {
  if (typeof value === 'bigint') {
    if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER))
      fail(`${what}: out of range`);
    return Number(value);
  }
  if (typeof value !== 'number' || !Number.isSafeInteger(value))
    fail(`${what}: expected an integer`);
  return value;
}

function lockIdOrUndefined(
  value: unknown,
  resolve: LockResolver | undefined,
): { readonly lockId: string } | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value !== 'string' || resolve === undefined) fail('row lock id');
  return resolve(value);
}

function mutationOptions(lockId: unknown, token: unknown, resolve: LockResolver | undefined) {
  const rowLock = lockIdOrUndefined(lockId, resolve);
  const t = optional(token, (v) => wireInteger(v, 'token'));
  return {
    ...(rowLock === undefined ? {} : { rowLock }),
    ...(t === undefined ? {} : { token: t }),
  };
}

// ---- encoding (client side) --------------------------------------------------------------

export function encodePut(put: Put): unknown[] {
  return [
    latin1(put.row),
    put.rowLock?.lockId ?? null,
    put.token ?? null,
    put.cells.map((c) => [c.family, latin1(c.qualifier), c.value, c.timestamp ?? null]),
  ];
}

export function encodeDelete(del: Delete): unknown[] {
  return [
    latin1(del.row),
    del.rowLock?.lockId ?? null,
    del.token ?? null,
    del.entries.map((e) => [
      DELETE_TYPES.indexOf(e.type),
      e.family,
      latin1(e.qualifier),
      e.timestamp ?? null,
    ]),
  ];
}

export function encodeIncrement(inc: Increment): unknown[] {
  return [
    latin1(inc.row),
    inc.rowLock?.lockId ?? null,
    inc.token ?? null,
    inc.columns.map((c) => [c.family, latin1(c.qualifier), c.amount]),
  ];
}

/** A Put or Delete in a list (`mutateRow`, `mutateRows`, `batch`): `[0, put]` or `[1, delete]`. */
export function encodeMutation(m: Put | Delete): unknown[] {
  return m instanceof Put ? [0, encodePut(m)] : [1, encodeDelete(m)];
}

export function encodeRowMutations(rm: RowMutations): unknown[] {
  return [latin1(rm.row), rm.mutations.map(encodeMutation)];
}

function encodeQuery(q: Query): unknown[] {
  return [
    [...q.columns].map(([family, qualifiers]) => [
      family,
      qualifiers === undefined ? null : [...qualifiers].map(latin1),
    ]),
    q.maxVersions,
    q.minStamp,
    q.maxStamp,
  ];
}

export function encodeGet(get: Get): unknown[] {
  return [latin1(get.row), get.rowLock?.lockId ?? null, encodeQuery(get)];
}

export function encodeScan(scan: Scan): unknown[] {
  return [
    latin1(scan.startRow),
    scan.stopRow === undefined ? null : latin1(scan.stopRow),
    encodeQuery(scan),
  ];
}

// ---- decoding (server side) --------------------------------------------------------------

export function decodePut(value: unknown, resolve?: LockResolver): Put {
  const [row, lockId, token, cells] = array(value, 'put', 4);
  const put = new Put(bytes(row, 'put row'), mutationOptions(lockId, token, resolve));
  const list = array(cells, 'put cells');
  // Refused before anything is built: the region would refuse it after (see checkCellCount).
  checkCellCount(list.length, 'A Put');
  for (const cell of list) {
    const [family, qualifier, v, ts] = array(cell, 'put cell', 4);
    const t = optional(ts, (x) => wireInteger(x, 'timestamp'));
    put.add(family as string, bytes(qualifier, 'qualifier'), bytes(v, 'value'), t);
  }
  return put;
}

export function decodeDelete(value: unknown, resolve?: LockResolver): Delete {
  const [row, lockId, token, entries] = array(value, 'delete', 4);
  const del = new Delete(bytes(row, 'delete row'), mutationOptions(lockId, token, resolve));
  const list = array(entries, 'delete entries');
  checkCellCount(list.length, 'A Delete');
  for (const entry of list) {
    const [type, family, qualifier, ts] = array(entry, 'delete entry', 4);
    const t = optional(ts, (x) => wireInteger(x, 'timestamp'));
    const q = bytes(qualifier, 'qualifier');
    if (type === 0) del.deleteColumn(family as string, q, t);
    else if (type === 1) del.deleteColumns(family as string, q, t);
    else if (type === 2) del.deleteFamily(family as string, t);
    else fail('delete entry type: expected 0, 1 or 2');
  }
  return del;
}

export function decodeIncrement(value: unknown, resolve?: LockResolver): Increment {
  const [row, lockId, token, columns] = array(value, 'increment', 4);
  const inc = new Increment(bytes(row, 'increment row'), mutationOptions(lockId, token, resolve));
  const list = array(columns, 'increment columns');
  checkCellCount(list.length, 'An Increment');
  for (const column of list) {
    const [family, qualifier, amount] = array(column, 'increment column', 3);
    if (typeof amount !== 'bigint' && typeof amount !== 'number')
      fail('increment amount: expected an integer');
    inc.addColumn(family as string, bytes(qualifier, 'qualifier'), amount);
  }
  return inc;
}

export function decodeMutation(value: unknown, resolve?: LockResolver): Put | Delete {
  const [kind, body] = array(value, 'mutation', 2);
  if (kind === 0) return decodePut(body, resolve);
  if (kind === 1) return decodeDelete(body, resolve);
  fail('mutation kind: expected 0 (put) or 1 (delete)');
}

export function decodeRowMutations(value: unknown, resolve?: LockResolver): RowMutations {
  const [row, mutations] = array(value, 'row mutations', 2);
  const rm = new RowMutations(bytes(row, 'row'));
  for (const m of array(mutations, 'row mutations list')) rm.add(decodeMutation(m, resolve));
  return rm;
}

function decodeQuery<Q extends Query>(q: Q, value: unknown): Q {
  const [columns, maxVersions, minStamp, maxStamp] = array(value, 'query', 4);
  for (const column of array(columns, 'query columns')) {
    const [family, qualifiers] = array(column, 'query column', 2);
    if (qualifiers === null || qualifiers === undefined) q.addFamily(family as string);
    else
      for (const qualifier of array(qualifiers, 'qualifiers'))
        q.addColumn(family as string, bytes(qualifier, 'qualifier'));
  }
  q.setMaxVersions(wireInteger(maxVersions, 'maxVersions'));
  q.setTimeRange(
    wireInteger(minStamp, 'minimum timestamp'),
    wireInteger(maxStamp, 'maximum timestamp'),
  );
  return q;
}

export function decodeGet(value: unknown, resolve?: LockResolver): Get {
  const [row, lockId, query] = array(value, 'get', 3);
  const rowLock = lockIdOrUndefined(lockId, resolve);
  return decodeQuery(new Get(bytes(row, 'get row'), rowLock), query);
}

export function decodeScan(value: unknown): Scan {
  const [startRow, stopRow, query] = array(value, 'scan', 3);
  const start = bytes(startRow, 'start row');
  const stop = optional(stopRow, (v) => bytes(v, 'stop row'));
  const scan = new Scan({
    ...(start.length === 0 ? {} : { startRow: start }),
    ...(stop === undefined ? {} : { stopRow: stop }),
  });
  return decodeQuery(scan, query);
}

// ---- results -----------------------------------------------------------------------------

export function encodeResult(result: Result): unknown[] {
  return [
    result.row,
    result.cells.map((c) => [
      c.family,
      latin1(c.qualifier),
      c.timestamp,
      CELL_TYPES.indexOf(c.type),
      c.value,
    ]),
  ];
}

/** A result from a server; a malformed one is the server's fault (`PROTOCOL_ERROR` upstream). */
export function decodeResult(value: unknown): Result {
  const [row, cells] = array(value, 'result', 2);
  const key = Buffer.from(bytes(row, 'result row')).toString('latin1');
  const decoded: Cell[] = array(cells, 'result cells').map((cell) => {
    const [family, qualifier, timestamp, type, v] = array(cell, 'result cell', 5);
    const t = CELL_TYPES[type as number];
    if (typeof family !== 'string' || t === undefined) fail('result cell');
    return {
      row: key,
      family,
      qualifier: Buffer.from(bytes(qualifier, 'qualifier')).toString('latin1'),
      timestamp: wireInteger(timestamp, 'timestamp'),
      type: t,
      value: Buffer.from(bytes(v, 'value')),
      seq: 0,
    };
  });
  return new Result(key, decoded);
}
