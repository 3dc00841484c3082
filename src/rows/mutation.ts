import { InvalidArgumentError } from '../core/errors.js';
import { checkOptionsObject, checkToken, describeValue } from '../core/options.js';
import {
  type BytesInput,
  checkFamilyName,
  checkQualifier,
  checkRow,
  checkTimestamp,
  checkValue,
} from './row-input.js';

export interface MutationOptions {
  /**
   * Run under this explicit lock (which must be for the same row) instead of an implicit one:
   * any table's lock (`TableRowLock`, in process or remote); only its `lockId` is used.
   */
  rowLock?: { readonly lockId: string } | undefined;
  /** Fencing token: the mutation is rejected if the row's lock was granted since this token. */
  token?: number;
  /** Default timestamp for the cells that do not name one; otherwise the server's time. */
  timestamp?: number;
}

/** What every mutation of one row carries: the row, and optionally a lock and a fencing token. */
export abstract class Mutation {
  readonly row: string;
  readonly rowLock: { readonly lockId: string } | undefined;
  readonly token: number | undefined;
  readonly timestamp: number | undefined;

  constructor(row: BytesInput, options?: MutationOptions) {
    this.row = checkRow(row);
    const { rowLock, token, timestamp } = checkOptionsObject(options, 'Mutation options');
    if (rowLock !== undefined) checkRowLockArg(rowLock);
    if (token !== undefined) checkToken(token);
    this.rowLock = rowLock;
    this.token = token;
    this.timestamp = timestamp === undefined ? undefined : checkTimestamp(timestamp);
  }
}

export interface PutCell {
  readonly family: string;
  readonly qualifier: string;
  readonly value: Buffer;
  readonly timestamp: number | undefined;
}

/** Cells to write to one row, in any number of families (HBase's `Put`). */
export class Put extends Mutation {
  readonly cells: PutCell[] = [];

  /** Adds `family:qualifier = value`, at `timestamp` or the mutation's time. */
  add(family: string, qualifier: BytesInput, value: BytesInput, timestamp?: number): this {
    this.cells.push({
      family: checkFamilyName(family),
      qualifier: checkQualifier(qualifier),
      value: checkValue(value),
      timestamp: timestamp === undefined ? this.timestamp : checkTimestamp(timestamp),
    });
    return this;
  }
}

/**
 * `Delete` marker kinds, with HBase's meaning: `DeleteFamily` hides every cell of the family
 * at or before its timestamp, `DeleteColumn` every version of one column at or before it,
 * `Delete` the single version at exactly its timestamp (the newest one when none is given).
 */
export interface DeleteEntry {
  readonly type: 'Delete' | 'DeleteColumn' | 'DeleteFamily';
  readonly family: string;
  readonly qualifier: string;
  readonly timestamp: number | undefined;
}

/** Deletes from one row; with no entries, the whole row (HBase's `Delete`). */
export class Delete extends Mutation {
  readonly entries: DeleteEntry[] = [];

  /** Every cell of `family` at or before `timestamp` (default: the mutation's time). */
  deleteFamily(family: string, timestamp?: number): this {
    return this.#push('DeleteFamily', family, '', timestamp);
  }

  /** Every version of `family:qualifier` at or before `timestamp`. */
  deleteColumns(family: string, qualifier: BytesInput, timestamp?: number): this {
    return this.#push('DeleteColumn', family, checkQualifier(qualifier), timestamp);
  }

  /** The version at exactly `timestamp`, or the newest version when none is given. */
  deleteColumn(family: string, qualifier: BytesInput, timestamp?: number): this {
    return this.#push('Delete', family, checkQualifier(qualifier), timestamp);
  }

  #push(
    type: DeleteEntry['type'],
    family: string,
    qualifier: string,
    timestamp: number | undefined,
  ): this {
    this.entries.push({
      type,
      family: checkFamilyName(family),
      qualifier,
      timestamp: timestamp === undefined ? this.timestamp : checkTimestamp(timestamp),
    });
    return this;
  }
}

export interface IncrementColumn {
  readonly family: string;
  readonly qualifier: string;
  readonly amount: bigint;
}

const LONG_MIN = -(2n ** 63n);
const LONG_MAX = 2n ** 63n - 1n;

/** Adds to 64-bit big-endian counters in one row, atomically (HBase's `Increment`). */
export class Increment extends Mutation {
  readonly columns: IncrementColumn[] = [];

  addColumn(family: string, qualifier: BytesInput, amount: bigint | number): this {
    let delta: bigint;
    if (typeof amount === 'bigint') delta = amount;
    else if (Number.isSafeInteger(amount)) delta = BigInt(amount);
    else
      throw new InvalidArgumentError(
        `An increment amount must be an integer, got ${describeValue(amount)}`,
      );
    if (delta < LONG_MIN || delta > LONG_MAX) {
      throw new InvalidArgumentError(`An increment amount must fit in 64 bits, got ${delta}`);
    }
    this.columns.push({
      family: checkFamilyName(family),
      qualifier: checkQualifier(qualifier),
      amount: delta,
    });
    return this;
  }
}

/** Puts and deletes applied to one row atomically, in order (HBase's `RowMutations`). */
export class RowMutations {
  readonly row: string;
  readonly mutations: (Put | Delete)[] = [];

  constructor(row: BytesInput) {
    this.row = checkRow(row);
  }

  add(mutation: Put | Delete): this {
    if (!(mutation instanceof Put || mutation instanceof Delete)) {
      throw new InvalidArgumentError('RowMutations takes Put and Delete objects');
    }
    if (mutation.row !== this.row) {
      throw new InvalidArgumentError("The mutation's row does not match the RowMutations row");
    }
    this.mutations.push(mutation);
    return this;
  }
}

/** A `rowLock` argument: a RowLock from `lockRow()` (anything with a string `lockId`). */
export function checkRowLockArg(rowLock: unknown): void {
  if (
    typeof rowLock !== 'object' ||
    rowLock === null ||
    typeof (rowLock as { lockId?: unknown }).lockId !== 'string'
  ) {
    throw new InvalidArgumentError('rowLock must be a RowLock returned by lockRow()');
  }
}
