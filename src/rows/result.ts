import { type Cell, formatCell } from './cell.js';
import { type BytesInput, checkQualifier } from './row-input.js';

/**
 * The cells a read returned for one row, sorted family, qualifier, then newest first; all of
 * them from one consistent state of the row.
 */
export class Result {
  readonly row: Buffer;
  readonly cells: readonly Cell[];

  constructor(row: string, cells: readonly Cell[]) {
    this.row = Buffer.from(row, 'latin1');
    this.cells = cells;
  }

  get isEmpty(): boolean {
    return this.cells.length === 0;
  }

  /** The newest value of `family:qualifier`, or undefined. */
  getValue(family: string, qualifier: BytesInput): Buffer | undefined {
    const q = checkQualifier(qualifier);
    return this.cells.find((c) => c.family === family && c.qualifier === q)?.value;
  }

  /** Every returned version of `family:qualifier`, newest first. */
  getColumn(family: string, qualifier: BytesInput): Cell[] {
    const q = checkQualifier(qualifier);
    return this.cells.filter((c) => c.family === family && c.qualifier === q);
  }

  /** The cells in HBase 0.90's text form, one per line. */
  toString(): string {
    return this.cells.map(formatCell).join('\n');
  }
}
