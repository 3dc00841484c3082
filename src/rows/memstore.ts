import { type Cell, compareVersions } from './cell.js';
import type { Query } from './query.js';
import { SortedKeys } from './sorted-keys.js';

/**
 * The versions of one column, sorted by {@link compareVersions} (newest first; among equal
 * versions of one write, the cell added last first, so it wins as in HBase).
 */
interface Column {
  versions: Cell[];
  /**
   * The oldest read point of the last prune, or -1. Pruning judges only cells at or before
   * that read point, and those never change while it stays the oldest (every cell inserted
   * later has a newer write number), so pruning again at the same point finds nothing: with
   * a scanner holding the read point, a column is walked once, not once per write or cell.
   */
  prunedAt: number;
}

/** The cells of one family of one row: versions per column, and the family's delete markers. */
interface FamilyCells {
  readonly columns: Map<string, Column>;
  /** Qualifiers in byte order, for results sorted as HBase sorts them. */
  readonly qualifiers: SortedKeys;
  readonly familyDeletes: Cell[];
  /** As {@link Column.prunedAt}, for the family's delete markers. */
  deletesPrunedAt: number;
}

interface RowCells {
  readonly families: Map<string, FamilyCells>;
}

/** A write's cells grouped by row, family and qualifier, in the order they came. */
type Grouped = Map<string, Map<string, { deletes: Cell[]; columns: Map<string, Cell[]> }>>;

function lowerBound(sorted: readonly string[], key: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((sorted[mid] as string) < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * All live cells of a region, in memory: rows in byte order, each family's columns with their
 * versions sorted as HBase sorts them. Every read takes a read point and ignores cells written
 * after it, so a mutation whose cells are being inserted is invisible until MVCC says so.
 *
 * Pruning is HBase's compaction, done in place: `trimColumn` after each write drops versions no
 * reader at or after the oldest open read point can see (beyond `maxVersions`, masked by a
 * delete marker, or an older write of the same version); `compact` also drops delete markers
 * and empty rows, as a major compaction does. So neither version churn nor deletes grow memory
 * without bound.
 */
export class Memstore {
  readonly #rows = new Map<string, RowCells>();
  /** Row keys in byte order, for scans; a removed row's key may linger (readers skip it). */
  readonly #keys = new SortedKeys();
  readonly #hasRow = (key: string): boolean => this.#rows.has(key);
  #cellCount = 0;

  get rowCount(): number {
    return this.#rows.size;
  }

  get cellCount(): number {
    return this.#cellCount;
  }

  /** Adds the cells of one write at once (see {@link insertSteps}). */
  insert(cells: readonly Cell[]): void {
    const only = cells.length === 1 ? (cells[0] as Cell) : undefined;
    if (only !== undefined && only.type !== 'DeleteFamily') {
      this.#insertColumn([only]);
      return;
    }
    for (const _ of this.insertSteps(cells, Number.POSITIVE_INFINITY));
  }

  /**
   * Adds the cells of one write in steps of about `stepCells` cells (the caller runs one step
   * per turn of the event loop): first the cells are grouped by column, then each column takes
   * all of its new cells in one merge. So the cost is near-linear in the cells plus the
   * versions already in the columns they touch, however the cells fall: many of one column
   * cost one merge, not one walk (or one merge per step) each. A column is never left half
   * merged between steps; the write's cells stay invisible until MVCC says so anyway.
   */
  *insertSteps(cells: readonly Cell[], stepCells: number): Generator<void, void, undefined> {
    const grouped: Grouped = new Map();
    let work = 0;
    for (const cell of cells) {
      let families = grouped.get(cell.row);
      if (families === undefined) {
        families = new Map();
        grouped.set(cell.row, families);
      }
      let family = families.get(cell.family);
      if (family === undefined) {
        family = { deletes: [], columns: new Map() };
        families.set(cell.family, family);
      }
      if (cell.type === 'DeleteFamily') family.deletes.push(cell);
      else {
        const column = family.columns.get(cell.qualifier);
        if (column === undefined) family.columns.set(cell.qualifier, [cell]);
        else column.push(cell);
      }
      if (++work >= stepCells) {
        work = 0;
        yield;
      }
    }
    for (const families of grouped.values()) {
      for (const { deletes, columns } of families.values()) {
        if (deletes.length > 0) {
          const target = this.#familyOf(deletes[0] as Cell);
          for (const cell of deletes) target.familyDeletes.push(cell);
          this.#cellCount += deletes.length;
        }
        for (const group of columns.values()) {
          this.#insertColumn(group);
          work += group.length;
          if (work >= stepCells) {
            work = 0;
            yield;
          }
        }
      }
    }
  }

  /** Merges `group` (cells of one column of one write, in the order they came) into it. */
  #insertColumn(group: Cell[]): void {
    const first = group[0] as Cell;
    const family = this.#familyOf(first);
    this.#cellCount += group.length;
    let column = family.columns.get(first.qualifier);
    if (column === undefined) {
      column = { versions: [], prunedAt: -1 };
      family.columns.set(first.qualifier, column);
      family.qualifiers.add(first.qualifier);
    }
    if (group.length === 1) {
      insertVersion(column.versions, first);
    } else {
      // Reversed, then a stable sort: equal versions end up added-last first. Cells of one
      // write usually share a timestamp, and the sort then finds one run in linear time.
      group.reverse().sort(compareVersions);
      column.versions = mergeSorted(group, column.versions, compareVersions);
    }
  }

  /** The family of `cell`'s row, made (with the row) when missing. */
  #familyOf(cell: Cell): FamilyCells {
    let row = this.#rows.get(cell.row);
    if (row === undefined) {
      row = { families: new Map() };
      this.#rows.set(cell.row, row);
      this.#keys.add(cell.row);
    }
    let family = row.families.get(cell.family);
    if (family === undefined) {
      family = {
        columns: new Map(),
        qualifiers: new SortedKeys(),
        familyDeletes: [],
        deletesPrunedAt: -1,
      };
      row.families.set(cell.family, family);
    }
    return family;
  }

  /**
   * Takes back the cells of a write that failed before it became visible: one pass over each
   * list the cells are in, whatever their number.
   */
  remove(cells: readonly Cell[]): void {
    const byList = new Map<Cell[], Set<Cell>>();
    for (const cell of cells) {
      const family = this.#rows.get(cell.row)?.families.get(cell.family);
      if (family === undefined) continue;
      const list =
        cell.type === 'DeleteFamily'
          ? family.familyDeletes
          : family.columns.get(cell.qualifier)?.versions;
      if (list === undefined) continue;
      const set = byList.get(list);
      if (set === undefined) byList.set(list, new Set([cell]));
      else set.add(cell);
    }
    for (const [list, gone] of byList) {
      const kept = list.filter((c) => !gone.has(c));
      this.#cellCount -= list.length - kept.length;
      replaceAll(list, kept);
    }
    const rows = new Set<string>();
    for (const cell of cells) rows.add(cell.row);
    for (const row of rows) this.#dropIfEmpty(row);
  }

  /**
   * The cells of `row` that `query` selects, as of `readPoint`, in result order. `families`
   * lists the region's families in byte order (the order of a result).
   */
  read(row: string, query: Query, readPoint: number, families: readonly string[]): Cell[] {
    const out: Cell[] = [];
    const cells = this.#rows.get(row);
    if (cells === undefined) return out;
    for (const name of families) {
      if (query.columns.size > 0 && !query.columns.has(name)) continue;
      const selected = query.columns.get(name);
      const family = cells.families.get(name);
      if (family === undefined) continue;
      const familyDeleteTs = newestFamilyDelete(family, readPoint);
      const qualifiers =
        selected === undefined
          ? family.qualifiers.sorted((q) => family.columns.has(q))
          : [...selected].sort();
      for (const qualifier of qualifiers) {
        const column = family.columns.get(qualifier);
        if (column !== undefined) {
          visibleVersions(column.versions, readPoint, familyDeleteTs, query, out);
        }
      }
    }
    return out;
  }

  /** The newest visible Put of one column as of `readPoint` (for check-and-set and increments). */
  latest(row: string, family: string, qualifier: string, readPoint: number): Cell | undefined {
    const cells = this.#rows.get(row)?.families.get(family);
    const column = cells?.columns.get(qualifier);
    if (cells === undefined || column === undefined) return undefined;
    const out: Cell[] = [];
    visibleVersions(column.versions, readPoint, newestFamilyDelete(cells, readPoint), LATEST, out);
    return out[0];
  }

  /** The first row key `>= from` (or `> after` when given) and `< stop`, or undefined. */
  nextRow(from: string, after: string | undefined, stop: string | undefined): string | undefined {
    const keys = this.#keys.sorted(this.#hasRow);
    let at = after === undefined ? lowerBound(keys, from) : lowerBound(keys, after);
    if (after !== undefined && keys[at] === after) at++;
    while (at < keys.length && !this.#rows.has(keys[at] as string)) at++;
    const key = keys[at];
    if (key === undefined || (stop !== undefined && key >= stop)) return undefined;
    return key;
  }

  /**
   * Drops the versions of one column that no reader at or after `oldestReadPoint` can see:
   * puts masked by delete markers, older writes of the same version, and versions beyond
   * `maxVersions`. Only cells at or before `oldestReadPoint` are judged; newer ones may still
   * be rolled back or unseen. Delete markers stay (a put with an older timestamp may follow);
   * `compact` removes them. The oldest read point never goes back; called again at the same
   * one, it returns at once (see {@link Column.prunedAt}), so trimming every cell of a big
   * write costs one walk per column.
   */
  trimColumn(
    row: string,
    family: string,
    qualifier: string,
    maxVersions: number,
    oldestReadPoint: number,
  ): void {
    const cells = this.#rows.get(row)?.families.get(family);
    if (cells === undefined) return;
    this.#trimFamilyDeletes(cells, oldestReadPoint);
    const column = cells.columns.get(qualifier);
    if (column !== undefined && column.prunedAt !== oldestReadPoint) {
      this.#cellCount -= pruneColumn(
        column,
        maxVersions,
        oldestReadPoint,
        newestFamilyDelete(cells, oldestReadPoint),
        false,
      );
    }
  }

  /**
   * Major compaction: prunes every column as `trimColumn` does, then drops delete markers
   * that nothing newer than `oldestReadPoint` could still need, and rows left empty.
   */
  compact(maxVersionsOf: (family: string) => number, oldestReadPoint: number): void {
    for (const [key, row] of this.#rows) {
      for (const [name, family] of row.families) {
        const familyDeleteTs = newestFamilyDelete(family, oldestReadPoint);
        let pendingInFamily = false;
        for (const column of family.columns.values()) {
          const pending = column.versions.some((c) => c.seq > oldestReadPoint);
          pendingInFamily ||= pending;
          this.#cellCount -= pruneColumn(
            column,
            maxVersionsOf(name),
            oldestReadPoint,
            familyDeleteTs,
            !pending,
          );
        }
        dropEmptyColumns(family);
        if (!pendingInFamily) {
          const before = family.familyDeletes.length;
          const keep = family.familyDeletes.filter((c) => c.seq > oldestReadPoint);
          replaceAll(family.familyDeletes, keep);
          this.#cellCount -= before - keep.length;
        } else {
          this.#trimFamilyDeletes(family, oldestReadPoint);
        }
        if (family.columns.size === 0 && family.familyDeletes.length === 0)
          row.families.delete(name);
      }
      this.#dropIfEmpty(key);
    }
    this.#keys.prune(this.#hasRow);
  }

  /**
   * The cells of the rows of `[from, to)` (`to` `''`: no end) as {@link cells} yields them
   * (the order that rebuilds them): what a region split hands to the region that takes those
   * rows over. Linear in those rows' cells plus a search for the first.
   */
  cellsBetween(from: string, to: string): Cell[] {
    const out: Cell[] = [];
    for (const key of this.#keysBetween(from, to)) {
      const row = this.#rows.get(key);
      if (row === undefined) continue;
      for (const family of row.families.values()) {
        out.push(...family.familyDeletes);
        for (const { versions } of family.columns.values()) {
          for (let i = versions.length - 1; i >= 0; i--) out.push(versions[i] as Cell);
        }
      }
    }
    return out;
  }

  /** Forgets the rows of `[from, to)` (`to` `''`: no end): a split moved them elsewhere. */
  dropRows(from: string, to: string): void {
    for (const key of this.#keysBetween(from, to)) {
      const row = this.#rows.get(key);
      if (row === undefined) continue;
      for (const family of row.families.values()) {
        this.#cellCount -= family.familyDeletes.length;
        for (const { versions } of family.columns.values()) this.#cellCount -= versions.length;
      }
      this.#rows.delete(key);
    }
    if (this.#rows.size === 0) this.#keys.clear();
  }

  *#keysBetween(from: string, to: string): Generator<string> {
    const keys = this.#keys.sorted(this.#hasRow);
    for (let at = lowerBound(keys, from); at < keys.length; at++) {
      const key = keys[at] as string;
      if (to !== '' && key >= to) return;
      yield key;
    }
  }

  /** Every cell, row by row, each column oldest write first (the order that rebuilds it). */
  *cells(): Generator<Cell> {
    for (const key of this.#keys.sorted(this.#hasRow)) {
      const row = this.#rows.get(key);
      if (row === undefined) continue;
      for (const family of row.families.values()) {
        yield* family.familyDeletes;
        for (const { versions } of family.columns.values()) {
          for (let i = versions.length - 1; i >= 0; i--) yield versions[i] as Cell;
        }
      }
    }
  }

  #trimFamilyDeletes(family: FamilyCells, oldestReadPoint: number): void {
    // The newest family marker judged at the oldest read point hides all that older ones hide.
    const list = family.familyDeletes;
    if (list.length < 2 || family.deletesPrunedAt === oldestReadPoint) return;
    family.deletesPrunedAt = oldestReadPoint;
    let newest: Cell | undefined;
    for (const c of list) {
      if (c.seq <= oldestReadPoint && (newest === undefined || c.timestamp > newest.timestamp))
        newest = c;
    }
    const keep = list.filter((c) => c.seq > oldestReadPoint || c === newest);
    this.#cellCount -= list.length - keep.length;
    replaceAll(list, keep);
  }

  #dropIfEmpty(key: string): void {
    const row = this.#rows.get(key);
    if (row === undefined) return;
    for (const [name, family] of row.families) {
      if (family.familyDeletes.length === 0) {
        dropEmptyColumns(family);
        if (family.columns.size === 0) row.families.delete(name);
      }
    }
    if (row.families.size === 0) {
      this.#rows.delete(key);
      if (this.#rows.size === 0) {
        this.#keys.clear();
      }
    }
  }
}

const LATEST = { minStamp: 0, maxStamp: Number.MAX_SAFE_INTEGER, maxVersions: 1 } as const;

function newestFamilyDelete(family: FamilyCells, readPoint: number): number {
  let ts = -1;
  for (const c of family.familyDeletes)
    if (c.seq <= readPoint && c.timestamp > ts) ts = c.timestamp;
  return ts;
}

/** Appends to `out` the versions of one column a reader at `readPoint` sees, newest first. */
function visibleVersions(
  versions: readonly Cell[],
  readPoint: number,
  familyDeleteTs: number,
  query: { readonly minStamp: number; readonly maxStamp: number; readonly maxVersions: number },
  out: Cell[],
): void {
  let count = 0;
  let columnDeleteTs = -1;
  let deleted: Set<number> | undefined;
  let lastTs = -1;
  for (const c of versions) {
    if (c.seq > readPoint) continue;
    if (c.type === 'DeleteColumn') {
      if (c.timestamp > columnDeleteTs) columnDeleteTs = c.timestamp;
      continue;
    }
    if (c.type === 'Delete') {
      deleted ??= new Set();
      deleted.add(c.timestamp);
      continue;
    }
    // Sorted newest first: once a column or family marker covers a put, it covers the rest.
    if (c.timestamp <= columnDeleteTs || c.timestamp <= familyDeleteTs) return;
    if (c.timestamp === lastTs) continue;
    lastTs = c.timestamp;
    if (deleted?.has(c.timestamp)) continue;
    if (c.timestamp < query.minStamp || c.timestamp >= query.maxStamp) continue;
    out.push(c);
    if (++count >= query.maxVersions) return;
  }
}

/**
 * Removes the versions no reader at or after `readPoint` sees; with `dropMarkers`, also the
 * column's delete markers (they hid what was just removed). Returns how many cells went.
 * One walk of the column, whatever its length.
 */
function pruneColumn(
  column: Column,
  maxVersions: number,
  readPoint: number,
  familyDeleteTs: number,
  dropMarkers: boolean,
): number {
  column.prunedAt = readPoint;
  const versions = column.versions;
  if (
    versions.length <= maxVersions &&
    familyDeleteTs < 0 &&
    versions.every((c) => c.type === 'Put')
  ) {
    return 0;
  }
  const out: Cell[] = [];
  visibleVersions(versions, readPoint, familyDeleteTs, { ...LATEST, maxVersions }, out);
  const visible = new Set<Cell>(out);
  const kept: Cell[] = [];
  for (const c of versions) {
    if (c.seq > readPoint || visible.has(c) || (c.type !== 'Put' && !dropMarkers)) kept.push(c);
  }
  const removed = versions.length - kept.length;
  if (removed > 0) column.versions = kept;
  return removed;
}

/** Drops the columns left without versions (one pass over the qualifiers, not one each). */
function dropEmptyColumns(family: FamilyCells): void {
  let dropped = false;
  for (const [qualifier, column] of family.columns) {
    if (column.versions.length === 0) {
      family.columns.delete(qualifier);
      dropped = true;
    }
  }
  if (dropped) family.qualifiers.prune((q) => family.columns.has(q));
}

/** Inserts `cell` into `versions` (sorted) before the first version not sorting before it. */
function insertVersion(versions: Cell[], cell: Cell): void {
  let lo = 0;
  let hi = versions.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareVersions(versions[mid] as Cell, cell) < 0) lo = mid + 1;
    else hi = mid;
  }
  versions.splice(lo, 0, cell);
}

/** `first` and `second` (each sorted by `compare`) merged; on ties, `first`'s come first. */
function mergeSorted<T>(
  first: readonly T[],
  second: readonly T[],
  compare: (a: T, b: T) => number,
): T[] {
  const out: T[] = new Array(first.length + second.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < first.length && j < second.length) {
    if (compare(second[j] as T, first[i] as T) < 0) out[k++] = second[j++] as T;
    else out[k++] = first[i++] as T;
  }
  while (i < first.length) out[k++] = first[i++] as T;
  while (j < second.length) out[k++] = second[j++] as T;
  return out;
}

/**
 * Makes `list` hold `items`, in place. Not `splice(0, n, ...items)`: spreading a long array
 * into arguments overflows the stack (at about 10^5 cells).
 */
function replaceAll<T>(list: T[], items: readonly T[]): void {
  list.length = items.length;
  for (let i = 0; i < items.length; i++) list[i] = items[i] as T;
}
