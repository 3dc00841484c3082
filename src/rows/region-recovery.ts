import { InvalidArgumentError } from '../core/errors.js';
import type { Cell } from './cell.js';
import { decodeCells, type EncodableCell, forEachFamily } from './cell-codec.js';
import type { ColumnFamily } from './column-family.js';
import { Memstore } from './memstore.js';
import type { CheckedRegionOptions } from './region-options.js';
import type { Recovered, RegionStorage } from './region-storage.js';
import { type RowLockTokenStore, TokenReservation } from './row-lock-tokens.js';

/** Cells a split's region inserts per turn of the event loop. */
const SPLIT_INSERT_STEP = 1024;

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Where a region of a server's table sits (internal; see `Region.open`): the rows it holds,
 * `[startKey, endKey)` in latin1 (`''`: no bound), and, for a region a split makes, what it
 * starts with.
 */
export interface RegionPlacement {
  readonly startKey: string;
  readonly endKey: string;
  readonly split?: {
    /** The rows it takes over from its parent, as `Memstore.cellsBetween` gives them. */
    readonly cells: readonly Cell[];
    /** Its parent's token ceiling: every token it hands out is larger. */
    readonly tokensAbove: number;
  };
}

/** What a region starts from: its cells, its last write number, and its storage if any. */
export interface RegionRecovery {
  memstore: Memstore;
  /** The MVCC write number of the newest recovered cell (0 for a new region). */
  seq: number;
  storage: RegionStorage | undefined;
  tokens: RowLockTokenStore | undefined;
}

/**
 * Recovery replay: opens `dir` (when given), refuses it before anything on disk changes if it
 * holds cells of a family `families` does not declare (`INVALID_ARGUMENT`; the directory is
 * left byte for byte as it was), then replays the newest snapshot and the log after it into a
 * fresh memstore and compacts it, and opens the durable fencing-token reservation.
 *
 * Write numbers: each snapshot cell gets its own, each log record one for all its cells (a
 * logged mutation stays one MVCC write). On any failure after the storage opened, the storage
 * is closed again and the error rethrown. Without `dir`, an empty in-memory start.
 */
export async function recoverRegion(
  options: CheckedRegionOptions,
  placement?: RegionPlacement,
): Promise<RegionRecovery> {
  const { families, dir, durability, epoch, openStorage } = options;
  const memstore = new Memstore();
  if (dir === undefined) return { memstore, seq: 0, storage: undefined, tokens: undefined };
  const accept = (recovered: Recovered) => {
    for (const record of recovered.snapshot) checkFamilies(record, families, dir);
    for (const record of recovered.log) checkFamilies(record, families, dir);
  };
  const storageOptions = epoch === undefined ? { durability } : { durability, epoch };
  const { storage, recovered } = await openStorage(dir, storageOptions, accept);
  try {
    let seq = 0;
    // A region ends where a split cut it: its storage may still hold the rows after the cut
    // (until its next checkpoint), which now belong to the region the split made.
    const start = placement?.startKey ?? '';
    const end = placement?.endKey ?? '';
    const mine = (cell: EncodableCell) => cell.row >= start && (end === '' || cell.row < end);
    const bounded = start !== '' || end !== '';
    const replay = (cells: readonly EncodableCell[], each: boolean) => {
      if (!each) seq++;
      const kept = bounded ? cells.filter(mine) : cells;
      memstore.insert(kept.map((cell) => ({ ...cell, seq: each ? ++seq : seq })));
    };
    for (const record of recovered.snapshot) replay(decodeCells(record).cells, true);
    for (const record of recovered.log) replay(decodeCells(record).cells, false);
    if (placement?.split !== undefined) {
      // A split's rows come while the region they leave serves on: inserted a step per turn
      // of the event loop, so that its calls are not held up behind them.
      const cells = placement.split.cells.map((cell) => ({ ...cell, seq: ++seq }));
      for (const _ of memstore.insertSteps(cells, SPLIT_INSERT_STEP)) await nextTurn();
    }
    memstore.compact((f) => families.get(f)?.maxVersions ?? 1, seq);
    // A split's region starts above its parent's tokens: its rows' holders keep theirs, and a
    // new grant of one of those rows must be larger (the wall clock in µs is the other floor).
    const above = placement?.split?.tokensAbove;
    const wall =
      above === undefined
        ? options.clock.wall()
        : Math.max(options.clock.wall(), (above + 3) / 1000);
    const tokens =
      storage.openTokens !== undefined
        ? await storage.openTokens(wall)
        : await TokenReservation.open(storage.directory, wall);
    return { memstore, seq, storage, tokens };
  } catch (err) {
    await storage.close();
    throw err;
  }
}

/** Refuses a stored record holding cells of a family `families` does not declare. */
function checkFamilies(record: Uint8Array, families: Map<string, ColumnFamily>, dir: string): void {
  forEachFamily(record, (family) => {
    if (!families.has(family)) {
      throw new InvalidArgumentError(
        `${dir} holds cells of column family ${family}, which this region does not declare`,
      );
    }
  });
}
