import { InvalidArgumentError } from '../core/errors.js';
import type { FamilySchema } from './family-schema.js';
import { Delete, type Mutation, Put, type RowMutations } from './mutation.js';
import {
  type BytesInput,
  checkCellCount,
  checkFamilyName,
  checkQualifier,
  checkRow,
  checkValue,
} from './row-input.js';

/**
 * Argument checks of the region's multi-part mutation calls, against its schema. Contract:
 * they run before any lock is taken or anything is written, and throw `INVALID_ARGUMENT`
 * (changing nothing) at the first problem.
 */

/** A RowMutations' one lock (its mutations may not carry different ones) and newest token. */
export function checkRowMutations(
  schema: FamilySchema,
  mutations: RowMutations,
): { rowLock: Mutation['rowLock']; token: number | undefined } {
  if (mutations.mutations.length === 0) throw new InvalidArgumentError('RowMutations is empty');
  let rowLock: Mutation['rowLock'];
  let token: number | undefined;
  checkCellCount(cellCount(mutations.mutations), 'A RowMutations');
  for (const m of mutations.mutations) {
    if (m instanceof Put) schema.checkPut(m);
    else schema.checkDelete(m);
    if (m.rowLock !== undefined) {
      if (rowLock !== undefined && rowLock.lockId !== m.rowLock.lockId) {
        throw new InvalidArgumentError(
          'The mutations of one RowMutations carry different row locks',
        );
      }
      rowLock = m.rowLock;
    }
    if (m.token !== undefined) token = Math.max(token ?? m.token, m.token);
  }
  return { rowLock, token };
}

/** `mutateRows`: a non-empty array of Put and Delete, none carrying a row lock. */
export function checkMutateRows(schema: FamilySchema, mutations: readonly (Put | Delete)[]): void {
  if (!Array.isArray(mutations) || mutations.length === 0) {
    throw new InvalidArgumentError('mutateRows() takes a non-empty array of Put and Delete');
  }
  for (const m of mutations) {
    if (m instanceof Put) schema.checkPut(m);
    else if (m instanceof Delete) schema.checkDelete(m);
    else throw new InvalidArgumentError('mutateRows() takes Put and Delete objects');
    if (m.rowLock !== undefined) {
      throw new InvalidArgumentError('mutateRows() takes its own locks; drop the rowLock');
    }
  }
  checkCellCount(cellCount(mutations), 'A mutateRows call');
}

/**
 * The cells a list of checked Puts and Deletes writes, as {@link checkCellCount} counts them
 * (a whole-row Delete as one: it writes one marker per family). Anything else counts 0.
 */
export function cellCount(mutations: readonly unknown[]): number {
  let count = 0;
  for (const m of mutations) {
    if (m instanceof Put) count += m.cells.length;
    else if (m instanceof Delete) count += Math.max(1, m.entries.length);
  }
  return count;
}

/** A check-and-mutate's expectation, in internal form; `mutation` must be of that row. */
export function checkExpectation(
  schema: FamilySchema,
  row: BytesInput,
  family: string,
  qualifier: BytesInput,
  expected: BytesInput | null,
  mutation: Mutation,
): { row: string; qualifier: string; expected: Buffer } {
  const key = checkRow(row);
  schema.check(checkFamilyName(family));
  const q = checkQualifier(qualifier);
  const want = expected === null || expected === undefined ? Buffer.alloc(0) : checkValue(expected);
  if (mutation.row !== key) {
    throw new InvalidArgumentError("Action's row must match the passed row");
  }
  return { row: key, qualifier: q, expected: want };
}
