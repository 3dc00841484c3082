/**
 * Hooks for tests, reachable only through this symbol (not part of the public API):
 * `insertYield` runs between the cell inserts of a mutation, so tests can interleave readers
 * with a half-inserted write; `readAll` replaces the read point with "everything", which
 * breaks MVCC on purpose so a test can show its checks fail.
 */
export const rowsInternals: unique symbol = Symbol('locksmith.rows.internals');

export interface RegionTestHooks {
  insertYield: ((cellIndex: number) => Promise<void> | undefined) | undefined;
  readAll: boolean;
}
