import type { RowLockTokenStore } from './row-lock-tokens.js';
import type { TableCatalogStore } from './table-catalog-store.js';

/**
 * What a region asks of the storage behind it: an ordered, durable log of records and
 * checkpoints that replace the log's prefix. `RowStorage` (log segments and snapshots in a
 * directory) is the one implementation today; another (a database table, say) plugs in by
 * implementing this and recovering the same records in the same order.
 *
 * Contract, as `RowStorage` documents it in full: `append` queues synchronously (call order is
 * log order) and resolves once the record is durable; a record whose append did not resolve is
 * after a crash entirely present or entirely absent, never part of one. `checkpoint(capture)`
 * calls `capture()` at a point where every earlier append is covered, writes what it returns,
 * and only then drops the covered log; a crash at any point loses no acknowledged record. After
 * a failed append the storage refuses every later append and checkpoint.
 */
export interface RegionStorage {
  /** Counters a storage may keep (log records, batches, syncs, ...), for status pages. */
  readonly stats?: object;
  append(record: Uint8Array): Promise<void>;
  checkpoint(capture: () => Iterable<Uint8Array>): Promise<void>;
  /** Bytes of log not covered by a checkpoint (what the checkpoint policy watches). */
  readonly logBytes: number;
  /** A checkpoint is running or queued. */
  readonly checkpointing: boolean;
  /** Where the region keeps what sits beside its data (the fencing-token reservation). */
  readonly directory: string;
  /**
   * Opens the region's row-lock token ceiling where this storage keeps it, so that tokens keep
   * increasing when another machine opens the region next. Absent: a `row-lock.tokens` file in
   * `directory`. `wallMs` is the opener's wall clock (tokens never fall below it, in µs).
   */
  openTokens?(wallMs: number): Promise<RowLockTokenStore>;
  close(): Promise<void>;
}

/** What a storage found when it opened: the records to replay, oldest first. */
export interface Recovered {
  /** The records of the newest valid snapshot, in the order written (empty if none). */
  snapshot: Uint8Array[];
  /** Then every log record appended after that snapshot, in append order. */
  log: Uint8Array[];
}

/** How a region opens its storage (`RowStorage.open` unless told otherwise). */
export interface StorageOpenOptions {
  durability: 'fsync' | 'none';
  /** The writer's epoch (see `RowStorageOptions.epoch`); absent: standalone. */
  epoch?: number;
}

/**
 * Opens the storage of a region at `dir` and returns it with what it recovered. `accept`
 * sees what was recovered before anything on disk changes and may refuse it by throwing (the
 * open then fails and leaves `dir` as it was). The region replays `recovered` and from then
 * on writes through `storage`.
 */
export type OpenRegionStorage = ((
  dir: string,
  options: StorageOpenOptions,
  accept: (recovered: Recovered) => void,
) => Promise<{ storage: RegionStorage; recovered: Recovered }>) & {
  /**
   * Deletes everything kept elsewhere for the region at `dir` (its log and snapshots in a
   * database), so that a table dropped and created again starts empty; refuses
   * (`FencedError`) a region a newer epoch owns. Called with the region closed. Absent: all of
   * a region is in `dir`, which its owner deletes.
   */
  destroy?: ((dir: string, options: { epoch?: number }) => Promise<void>) | undefined;
  /**
   * Opens the server's table catalog where this storage keeps it (fenced by `epoch` like the
   * regions), so that a server on another machine finds the same tables. Absent: descriptor
   * files under `<dataDir>/tables`.
   */
  openCatalog?:
    | ((dataDir: string, options: { epoch?: number }) => Promise<TableCatalogStore>)
    | undefined;
};
