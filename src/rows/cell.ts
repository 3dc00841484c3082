import { toStringBinary } from './bytes.js';

/**
 * A cell is one version of one column of one row: `row/family:qualifier/timestamp/type` →
 * value. Rows and qualifiers are bytes, held as latin1 strings (one char per byte) so they can
 * key Maps and compare in byte order with `<`.
 */
export type CellType = 'Put' | 'Delete' | 'DeleteColumn' | 'DeleteFamily';

export interface Cell {
  readonly row: string;
  readonly family: string;
  readonly qualifier: string;
  /** Milliseconds since the epoch, as HBase's `long` timestamps. */
  readonly timestamp: number;
  readonly type: CellType;
  readonly value: Buffer;
  /**
   * The MVCC write number of the mutation that wrote the cell: readers see a cell only once
   * their read point has reached it. Breaks timestamp ties (the newer write sorts first).
   */
  readonly seq: number;
}

/** HBase's sort order: ts descending, then delete markers before puts, then newer write first. */
export function compareVersions(a: Cell, b: Cell): number {
  if (a.timestamp !== b.timestamp) return b.timestamp - a.timestamp;
  const ta = a.type === 'Put' ? 1 : 0;
  const tb = b.type === 'Put' ? 1 : 0;
  if (ta !== tb) return ta - tb;
  return b.seq - a.seq;
}

/** `row1/colfam1:qual1/1300775520118/Put/vlen=4`: HBase 0.90's `KeyValue.toString()`. */
export function formatCell(cell: Cell): string {
  return `${toStringBinary(cell.row)}/${cell.family}:${toStringBinary(cell.qualifier)}/${cell.timestamp}/${cell.type}/vlen=${cell.value.length}`;
}
