import { InvalidArgumentError } from '../core/errors.js';
import { describeValue } from '../core/options.js';
import { rowKey } from './bytes.js';

/** Rows, qualifiers and values are bytes; strings are taken as their UTF-8 encoding. */
export type BytesInput = string | Uint8Array;

/** HBase's limits: a row key is 1..Short.MAX_VALUE bytes; a cell's value is capped (10 MiB). */
export const MAX_ROW_BYTES = 32767;
export const MAX_QUALIFIER_BYTES = 65535;
export const MAX_VALUE_BYTES = 10 * 1024 * 1024;

/**
 * The most cells one call may write (a Put's cells, a Delete's entries, an Increment's
 * columns, summed over the mutations of a multi-mutation call). Not HBase's: it bounds how
 * long one call may hold the event loop. A write's cost is near-linear in its cells, but its
 * decoding, log record and trim are each one synchronous pass; at this size each pass is a
 * few tens of milliseconds (docs/server.md, "Limits").
 */
export const MAX_CELLS_PER_CALL = 100_000;

/** Refuses a call of more than {@link MAX_CELLS_PER_CALL} cells (`what`: "A put", ...). */
export function checkCellCount(count: number, what: string): void {
  if (count > MAX_CELLS_PER_CALL) {
    throw new InvalidArgumentError(
      `${what} has ${count} cells; one call may write at most ${MAX_CELLS_PER_CALL} (split it into several calls)`,
    );
  }
}

function isBytes(input: unknown): input is BytesInput {
  return typeof input === 'string' || input instanceof Uint8Array;
}

/** A row key as the latin1 string used internally; empty or oversized rows are rejected. */
export function checkRow(input: BytesInput, what = 'row'): string {
  if (!isBytes(input)) {
    throw new InvalidArgumentError(
      `The ${what} must be a string or Uint8Array, got ${typeof input}`,
    );
  }
  return checkRowKey(rowKey(input), what);
}

/**
 * The one check of a row key already in its latin1 form (see `rowKey`): 1 to
 * {@link MAX_ROW_BYTES} characters, one per byte. Returns the key unchanged.
 */
export function checkRowKey(row: string, what = 'row'): string {
  if (typeof row !== 'string') {
    throw new InvalidArgumentError(
      `The ${what} must be a latin1 string (see rowKey), got ${typeof row}`,
    );
  }
  if (row.length === 0) throw new InvalidArgumentError(`The ${what} must not be empty`);
  if (row.length > MAX_ROW_BYTES) {
    throw new InvalidArgumentError(
      `The ${what} is ${row.length} bytes; the maximum is ${MAX_ROW_BYTES}`,
    );
  }
  return row;
}

export function checkQualifier(input: BytesInput): string {
  if (!isBytes(input)) {
    throw new InvalidArgumentError(
      `A qualifier must be a string or Uint8Array, got ${typeof input}`,
    );
  }
  const qualifier = rowKey(input);
  if (qualifier.length > MAX_QUALIFIER_BYTES) {
    throw new InvalidArgumentError(
      `A qualifier is ${qualifier.length} bytes; the maximum is ${MAX_QUALIFIER_BYTES}`,
    );
  }
  return qualifier;
}

export function checkValue(input: BytesInput): Buffer {
  if (!isBytes(input)) {
    throw new InvalidArgumentError(`A value must be a string or Uint8Array, got ${typeof input}`);
  }
  const value =
    typeof input === 'string'
      ? Buffer.from(input, 'utf8')
      : Buffer.from(Uint8Array.prototype.slice.call(input));
  if (value.length > MAX_VALUE_BYTES) {
    throw new InvalidArgumentError(
      `A value is ${value.length} bytes; the maximum is ${MAX_VALUE_BYTES}`,
    );
  }
  return value;
}

export function checkFamilyName(family: unknown): string {
  if (typeof family !== 'string' || family.length === 0) {
    throw new InvalidArgumentError(
      `A column family must be a non-empty string, got ${describeValue(family)}`,
    );
  }
  return family;
}

/** Timestamps are non-negative integer milliseconds. */
export function checkTimestamp(ts: unknown, what = 'timestamp'): number {
  if (typeof ts !== 'number' || !Number.isSafeInteger(ts) || ts < 0) {
    throw new InvalidArgumentError(
      `The ${what} must be a non-negative integer number of milliseconds, got ${describeValue(ts)}`,
    );
  }
  return ts;
}
