import { InvalidArgumentError } from '../core/errors.js';
import { toStringBinary } from './bytes.js';
import type { Cell, CellType } from './cell.js';
import type { EncodableCell } from './cell-codec.js';
import { type Delete, type Increment, Put } from './mutation.js';

/** A cell before it gets its MVCC write number. */
export type Draft = EncodableCell;

/** The newest cell of a column visible to the mutation being built, if any. */
export type LatestCell = (row: string, family: string, qualifier: string) => Cell | undefined;

const EMPTY = Buffer.alloc(0);

/** A Put's cells, `now` for those without a timestamp. */
function putCells(put: Put, now: number): Draft[] {
  return put.cells.map((c) => ({
    row: put.row,
    family: c.family,
    qualifier: c.qualifier,
    timestamp: c.timestamp ?? now,
    type: 'Put' as const,
    value: c.value,
  }));
}

/**
 * Delete markers: a Delete without entries marks every family of `families` (byte order);
 * a version delete without a timestamp hides the newest version, or "now" when there is none.
 */
function deleteCells(
  del: Delete,
  now: number,
  families: readonly string[],
  latest: LatestCell,
): Draft[] {
  const marker = (type: CellType, family: string, qualifier: string, timestamp: number) => ({
    row: del.row,
    family,
    qualifier,
    timestamp,
    type,
    value: EMPTY,
  });
  if (del.entries.length === 0) {
    return families.map((f) => marker('DeleteFamily', f, '', del.timestamp ?? now));
  }
  return del.entries.map((e) => {
    if (e.type !== 'Delete' || e.timestamp !== undefined) {
      return marker(e.type, e.family, e.qualifier, e.timestamp ?? now);
    }
    return marker(
      'Delete',
      e.family,
      e.qualifier,
      latest(del.row, e.family, e.qualifier)?.timestamp ?? now,
    );
  });
}

/**
 * The new 64-bit values of an Increment's counters, one cell per column (a column named twice
 * adds up); a current value that is not 8 bytes wide refuses the whole Increment. Columns are
 * looked up by key, so the cost is linear in the columns however many there are.
 */
function incrementCells(inc: Increment, now: number, latest: LatestCell): Draft[] {
  const cells: Draft[] = [];
  const at = new Map<string, number>();
  for (const { family, qualifier, amount } of inc.columns) {
    // A declared family name has no ':' (see columnFamilies): the key is unambiguous.
    const key = `${family}:${qualifier}`;
    const index = at.get(key);
    const current =
      index === undefined
        ? latest(inc.row, family, qualifier)?.value
        : (cells[index] as Draft).value;
    let value = 0n;
    if (current !== undefined) {
      if (current.length !== 8) {
        throw new InvalidArgumentError(
          `Attempted to increment field ${family}:${toStringBinary(qualifier)} that isn't 64 bits wide (${current.length} bytes)`,
        );
      }
      value = current.readBigInt64BE(0);
    }
    const next = Buffer.allocUnsafe(8);
    next.writeBigInt64BE(BigInt.asIntN(64, value + amount));
    const draft: Draft = {
      row: inc.row,
      family,
      qualifier,
      timestamp: now,
      type: 'Put',
      value: next,
    };
    if (index !== undefined) cells[index] = draft;
    else {
      at.set(key, cells.length);
      cells.push(draft);
    }
  }
  return cells;
}

/**
 * Turning a region's mutations into cells, under the row lock, as HBase does. Contract: `now`
 * is the server time of the mutation (see `TimestampAllocator`), given to every cell without
 * its own timestamp; the builders are pure apart from `latest`, which reads the region's rows
 * as of the current read point; a builder that throws (`INVALID_ARGUMENT`) refuses the whole
 * mutation. Bound to the region's families in byte order (the order of a whole-row delete).
 */
export class MutationCells {
  readonly #families: readonly string[];
  readonly #latest: LatestCell;

  constructor(families: readonly string[], latest: LatestCell) {
    this.#families = families;
    this.#latest = latest;
  }

  /** The cells of a Put or a Delete. */
  readonly of = (m: Put | Delete, now: number): Draft[] =>
    m instanceof Put ? putCells(m, now) : deleteCells(m, now, this.#families, this.#latest);

  increment(inc: Increment, now: number): Draft[] {
    return incrementCells(inc, now, this.#latest);
  }

  /**
   * The cells of `m` if `family:qualifier` of `row` holds `expected`, none otherwise. HBase's
   * check-and-mutate test: an empty expectation matches only a missing cell.
   */
  ifExpected(
    row: string,
    family: string,
    qualifier: string,
    expected: Buffer,
    m: Put | Delete,
    now: number,
  ): Draft[] | undefined {
    const current = this.#latest(row, family, qualifier);
    const holds =
      expected.length === 0 ? current === undefined : current?.value.equals(expected) === true;
    return holds ? this.of(m, now) : undefined;
  }
}
