import { InvalidArgumentError } from '../core/errors.js';
import { describeValue } from '../core/options.js';
import { checkRowLockArg } from './mutation.js';
import {
  type BytesInput,
  checkFamilyName,
  checkQualifier,
  checkRow,
  checkTimestamp,
} from './row-input.js';

/**
 * Which cells a read returns: families (all when none named), columns within them, how many
 * versions per column (1 unless told), and a time range `[min, max)`.
 */
export abstract class Query {
  /** family → qualifiers (undefined: the whole family). Empty map: every family. */
  readonly columns = new Map<string, Set<string> | undefined>();
  maxVersions = 1;
  minStamp = 0;
  maxStamp = Number.MAX_SAFE_INTEGER;

  addFamily(family: string): this {
    this.columns.set(checkFamilyName(family), undefined);
    return this;
  }

  addColumn(family: string, qualifier: BytesInput): this {
    checkFamilyName(family);
    const q = checkQualifier(qualifier);
    if (!this.columns.has(family)) this.columns.set(family, new Set([q]));
    else this.columns.get(family)?.add(q);
    return this;
  }

  /** With no argument, every version kept; `n` must be at least 1 (HBase throws on 0). */
  setMaxVersions(n?: number): this {
    if (n === undefined) {
      this.maxVersions = Number.MAX_SAFE_INTEGER;
      return this;
    }
    if (!Number.isSafeInteger(n) || n < 1) {
      throw new InvalidArgumentError(
        `maxVersions must be a positive integer, got ${describeValue(n)}`,
      );
    }
    this.maxVersions = n;
    return this;
  }

  /** Only versions with `min <= timestamp < max`. */
  setTimeRange(min: number, max: number): this {
    checkTimestamp(min, 'minimum timestamp');
    checkTimestamp(max, 'maximum timestamp');
    if (max < min) {
      throw new InvalidArgumentError(`Time range maximum ${max} is before its minimum ${min}`);
    }
    this.minStamp = min;
    this.maxStamp = max;
    return this;
  }

  /** Only the version at exactly `timestamp`. */
  setTimeStamp(timestamp: number): this {
    checkTimestamp(timestamp);
    return this.setTimeRange(timestamp, timestamp + 1);
  }
}

/** Reads one row (HBase's `Get`). A lock id on it is only checked and its lease renewed. */
export class Get extends Query {
  readonly row: string;
  /** Any table's lock (`TableRowLock`, in process or remote); only its `lockId` is used. */
  readonly rowLock: { readonly lockId: string } | undefined;

  constructor(row: BytesInput, rowLock?: { readonly lockId: string }) {
    super();
    this.row = checkRow(row);
    if (rowLock !== undefined) checkRowLockArg(rowLock);
    this.rowLock = rowLock;
  }
}

/** Reads rows in `[startRow, stopRow)` in byte order, each row consistent (HBase's `Scan`). */
export class Scan extends Query {
  readonly startRow: string;
  readonly stopRow: string | undefined;

  constructor(options: { startRow?: BytesInput; stopRow?: BytesInput } = {}) {
    super();
    this.startRow = options.startRow === undefined ? '' : checkRow(options.startRow, 'start row');
    this.stopRow =
      options.stopRow === undefined ? undefined : checkRow(options.stopRow, 'stop row');
  }
}

/**
 * The same scan over `[startRow, stopRow)` (checked keys; `stopRow` undefined: no end): what a
 * table split into regions asks of each region. Shares the original's column selection.
 */
export function scanBetween(scan: Scan, startRow: string, stopRow: string | undefined): Scan {
  return Object.assign(Object.create(Scan.prototype) as Scan, scan, { startRow, stopRow });
}
