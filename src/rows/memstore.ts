import { type Cell, compareVersions } from './cell.js';
import type { Query } from './query.js';

/** The cells of one family of one row: versions per column, and the family's delete markers. */
interface FamilyCells {
  readonly columns: Map<string, Cell[]>;
  /** Qualifiers in byte order, for results sorted as HBase sorts them. */
  readonly qualifiers: string[];
  readonly familyDeletes: Cell[];
}

interface RowCells {
  readonly families: Map<string, FamilyCells>;
}

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
  // Row keys in byte order, for scans. New rows go to #newKeys and are merged in only when a
  // scan needs order: inserting into a sorted array costs O(rows) per new row, which with
  // 10^5 rows dominated a put. Keys of removed rows may linger until the next merge; readers
  // skip keys no longer in #rows.
  #keys: string[] = [];
  #newKeys: string[] = [];
  #cellCount = 0;

  get rowCount(): number {
    return this.#rows.size;
  }

  get cellCount(): number {
    return this.#cellCount;
  }

  insert(cell: Cell): void {
    let row = this.#rows.get(cell.row);
    if (row === undefined) {
      row = { families: new Map() };
      this.#rows.set(cell.row, row);
      this.#newKeys.push(cell.row);
    }
    let family = row.families.get(cell.family);
    if (family === undefined) {
      family = { columns: new Map(), qualifiers: [], familyDeletes: [] };
      row.families.set(cell.family, family);
    }
    this.#cellCount++;
    if (cell.type === 'DeleteFamily') {
      family.familyDeletes.push(cell);
      return;
    }
    let versions = family.columns.get(cell.qualifier);
    if (versions === undefined) {
      versions = [];
      family.columns.set(cell.qualifier, versions);
      family.qualifiers.splice(lowerBound(family.qualifiers, cell.qualifier), 0, cell.qualifier);
    }
    // Versions are few and new cells are usually the newest: search from the front.
    let at = 0;
    while (at < versions.length && compareVersions(versions[at] as Cell, cell) < 0) at++;
    versions.splice(at, 0, cell);
  }

  /** Takes back the cells of a mutation that failed before it became visible. */
  remove(cells: readonly Cell[]): void {
    for (const cell of cells) {
      const family = this.#rows.get(cell.row)?.families.get(cell.family);
      if (family === undefined) continue;
      const list =
        cell.type === 'DeleteFamily' ? family.familyDeletes : family.columns.get(cell.qualifier);
      const at = list?.indexOf(cell) ?? -1;
      if (list !== undefined && at >= 0) {
        list.splice(at, 1);
        this.#cellCount--;
      }
    }
    for (const cell of cells) this.#dropIfEmpty(cell.row);
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
      const qualifiers = selected === undefined ? family.qualifiers : [...selected].sort();
      for (const qualifier of qualifiers) {
        const versions = family.columns.get(qualifier);
        if (versions !== undefined) {
          visibleVersions(versions, readPoint, familyDeleteTs, query, out);
        }
      }
    }
    return out;
  }

  /** The newest visible Put of one column as of `readPoint` (for check-and-set and increments). */
  latest(row: string, family: string, qualifier: string, readPoint: number): Cell | undefined {
    const cells = this.#rows.get(row)?.families.get(family);
    const versions = cells?.columns.get(qualifier);
    if (cells === undefined || versions === undefined) return undefined;
    const out: Cell[] = [];
    visibleVersions(versions, readPoint, newestFamilyDelete(cells, readPoint), LATEST, out);
    return out[0];
  }

  /** The first row key `>= from` (or `> after` when given) and `< stop`, or undefined. */
  nextRow(from: string, after: string | undefined, stop: string | undefined): string | undefined {
    const keys = this.#sortedKeys();
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
   * `compact` removes them.
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
    const versions = cells.columns.get(qualifier);
    if (versions !== undefined) {
      this.#cellCount -= pruneColumn(
        versions,
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
        for (const [qualifier, versions] of family.columns) {
          const pending = versions.some((c) => c.seq > oldestReadPoint);
          pendingInFamily ||= pending;
          this.#cellCount -= pruneColumn(
            versions,
            maxVersionsOf(name),
            oldestReadPoint,
            familyDeleteTs,
            !pending,
          );
          if (versions.length === 0) {
            family.columns.delete(qualifier);
            family.qualifiers.splice(lowerBound(family.qualifiers, qualifier), 1);
          }
        }
        if (!pendingInFamily) {
          const before = family.familyDeletes.length;
          const keep = family.familyDeletes.filter((c) => c.seq > oldestReadPoint);
          family.familyDeletes.splice(0, before, ...keep);
          this.#cellCount -= before - keep.length;
        } else {
          this.#trimFamilyDeletes(family, oldestReadPoint);
        }
        if (family.columns.size === 0 && family.familyDeletes.length === 0)
          row.families.delete(name);
      }
      this.#dropIfEmpty(key);
    }
    this.#keys = this.#keys.filter((key) => this.#rows.has(key));
  }

  /** Every cell, row by row, each column oldest write first (the order that rebuilds it). */
  *cells(): Generator<Cell> {
    for (const key of this.#sortedKeys()) {
      const row = this.#rows.get(key);
      if (row === undefined) continue;
      for (const family of row.families.values()) {
        yield* family.familyDeletes;
        for (const versions of family.columns.values()) {
          for (let i = versions.length - 1; i >= 0; i--) yield versions[i] as Cell;
        }
      }
    }
  }

  /** The row keys in byte order: merges new rows in, dropping removed and repeated ones. */
  #sortedKeys(): string[] {
    if (this.#newKeys.length === 0) return this.#keys;
    const added = this.#newKeys.sort();
    const old = this.#keys;
    const merged: string[] = [];
    let i = 0;
    let j = 0;
    while (i < old.length || j < added.length) {
      const a = old[i];
      const b = added[j];
      let next: string | undefined;
      if (b === undefined || (a !== undefined && a <= b)) {
        next = a;
        i++;
      } else {
        next = b;
        j++;
      }
      if (next !== undefined && this.#rows.has(next) && merged[merged.length - 1] !== next) {
        merged.push(next);
      }
    }
    this.#keys = merged;
    this.#newKeys = [];
    return merged;
  }

  #trimFamilyDeletes(family: FamilyCells, oldestReadPoint: number): void {
    // The newest family marker judged at the oldest read point hides all that older ones hide.
    const list = family.familyDeletes;
    if (list.length < 2) return;
    let newest: Cell | undefined;
    for (const c of list) {
      if (c.seq <= oldestReadPoint && (newest === undefined || c.timestamp > newest.timestamp))
        newest = c;
    }
    const keep = list.filter((c) => c.seq > oldestReadPoint || c === newest);
    this.#cellCount -= list.length - keep.length;
    list.splice(0, list.length, ...keep);
  }

  #dropIfEmpty(key: string): void {
    const row = this.#rows.get(key);
    if (row === undefined) return;
    for (const [name, family] of row.families) {
      if (family.familyDeletes.length === 0) {
        for (const [qualifier, versions] of family.columns) {
          if (versions.length === 0) {
            family.columns.delete(qualifier);
            family.qualifiers.splice(lowerBound(family.qualifiers, qualifier), 1);
          }
        }
        if (family.columns.size === 0) row.families.delete(name);
      }
    }
    if (row.families.size === 0) {
      this.#rows.delete(key);
      if (this.#rows.size === 0) {
        this.#keys = [];
        this.#newKeys = [];
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
  let deleted: number[] | undefined;
  let lastTs = -1;
  for (const c of versions) {
    if (c.seq > readPoint) continue;
    if (c.type === 'DeleteColumn') {
      if (c.timestamp > columnDeleteTs) columnDeleteTs = c.timestamp;
      continue;
    }
    if (c.type === 'Delete') {
      deleted ??= [];
      deleted.push(c.timestamp);
      continue;
    }
    // Sorted newest first: once a column or family marker covers a put, it covers the rest.
    if (c.timestamp <= columnDeleteTs || c.timestamp <= familyDeleteTs) return;
    if (c.timestamp === lastTs) continue;
    lastTs = c.timestamp;
    if (deleted?.includes(c.timestamp)) continue;
    if (c.timestamp < query.minStamp || c.timestamp >= query.maxStamp) continue;
    out.push(c);
    if (++count >= query.maxVersions) return;
  }
}

/**
 * Removes the versions no reader at or after `readPoint` sees; with `dropMarkers`, also the
 * column's delete markers (they hid what was just removed). Returns how many cells went.
 */
function pruneColumn(
  versions: Cell[],
  maxVersions: number,
  readPoint: number,
  familyDeleteTs: number,
  dropMarkers: boolean,
): number {
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
  if (removed > 0) versions.splice(0, versions.length, ...kept);
  return removed;
}
