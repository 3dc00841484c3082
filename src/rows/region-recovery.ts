import { InvalidArgumentError } from '../core/errors.js';
import { decodeCells, forEachFamily } from './cell-codec.js';
import type { ColumnFamily } from './column-family.js';
import { Memstore } from './memstore.js';
import type { CheckedRegionOptions } from './region-options.js';
import type { Recovered, RegionStorage } from './region-storage.js';
import { type RowLockTokenStore, TokenReservation } from './row-lock-tokens.js';

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
export async function recoverRegion(options: CheckedRegionOptions): Promise<RegionRecovery> {
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
    const replay = (record: Uint8Array, each: boolean) => {
      const { cells } = decodeCells(record);
      if (!each) seq++;
      memstore.insert(cells.map((cell) => ({ ...cell, seq: each ? ++seq : seq })));
    };
    for (const record of recovered.snapshot) replay(record, true);
    for (const record of recovered.log) replay(record, false);
    memstore.compact((f) => families.get(f)?.maxVersions ?? 1, seq);
    const wall = options.clock.wall();
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
