import type { TableDescriptor } from './table-descriptor.js';

/**
 * Where a server records which tables exist: the descriptor of each. Recording is the commit
 * point of a create (before the table's region is created) and its removal that of a drop
 * (before the region's data is deleted). An owner opened with an epoch (a master's token) is
 * fenced like a region: once a newer owner opened the catalog, its `add` and `remove` reject
 * with `FencedError` and change nothing.
 *
 * The default keeps `<data>/tables/<name>.table.json` files; a region storage that keeps the
 * regions elsewhere can keep the catalog beside them (`OpenRegionStorage.openCatalog`), so that
 * a server on another machine finds the same tables.
 */
export interface TableCatalogStore {
  /** The tables recorded, after clearing what a crashed create or drop left half done. */
  load(): Promise<TableDescriptor[]>;
  /** Records a new table; `TABLE_EXISTS` if one of that name is recorded. */
  add(descriptor: TableDescriptor): Promise<void>;
  /** Forgets a table. */
  remove(name: string): Promise<void>;
  /** Records a recorded table's new descriptor (a split added a key): all or nothing. */
  replace(descriptor: TableDescriptor): Promise<void>;
  close(): Promise<void>;
}
