import { InvalidArgumentError } from '../core/errors.js';
import type { ColumnFamily } from './column-family.js';
import type { Delete, Increment, Put } from './mutation.js';
import type { Query } from './query.js';
import { checkCellCount } from './row-input.js';

/**
 * A region's column families, as declared at open.
 *
 * Contract: {@link order} lists the family names in byte order (the order of a result's
 * cells and of a whole-row delete's markers); every `check*` throws `INVALID_ARGUMENT`
 * naming the family that does not exist, and changes nothing.
 */
export class FamilySchema {
  readonly #families: Map<string, ColumnFamily>;
  readonly order: readonly string[];

  constructor(families: Map<string, ColumnFamily>) {
    this.#families = families;
    this.order = [...families.keys()].sort();
  }

  /** Families in byte order. */
  get families(): readonly ColumnFamily[] {
    return this.order.map((f) => this.#families.get(f) as ColumnFamily);
  }

  /** Versions kept of a column of `family` (1 for an unknown family). */
  maxVersions(family: string): number {
    return this.#families.get(family)?.maxVersions ?? 1;
  }

  check(family: string): void {
    if (!this.#families.has(family)) {
      throw new InvalidArgumentError(
        `Column family ${family} does not exist in this region (it has ${this.order.join(', ')})`,
      );
    }
  }

  checkQuery(query: Query): void {
    for (const family of query.columns.keys()) this.check(family);
  }

  checkPut(put: Put): void {
    if (put.cells.length === 0) throw new InvalidArgumentError('A Put needs at least one cell');
    checkCellCount(put.cells.length, 'A Put');
    for (const cell of put.cells) this.check(cell.family);
  }

  checkDelete(del: Delete): void {
    checkCellCount(del.entries.length, 'A Delete');
    for (const entry of del.entries) this.check(entry.family);
  }

  checkIncrement(inc: Increment): void {
    if (inc.columns.length === 0)
      throw new InvalidArgumentError('An Increment needs at least one column');
    checkCellCount(inc.columns.length, 'An Increment');
    for (const c of inc.columns) this.check(c.family);
  }
}
