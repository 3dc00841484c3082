import type { FamilySchema } from './family-schema.js';
import type { Memstore } from './memstore.js';
import type { Mvcc } from './mvcc.js';
import type { Get, Scan } from './query.js';
import { Result } from './result.js';
import { ScannerReadPoints } from './scanner-read-points.js';

/**
 * The read path of a region, for checked queries: never waits for row locks, and reads as of
 * one MVCC read point, so it never sees part of a mutation.
 *
 * Contract: a get reads at the read point of the moment it runs; a scan at the one of the
 * moment it opens, for every row (each row is one consistent state), and while it is open
 * {@link oldestReadPoint} keeps what it can see from being pruned. The read point taken is
 * the MVCC one unless a test overrides it (see internals.ts).
 */
export class RegionReads {
  readonly #memstore: Memstore;
  readonly #schema: FamilySchema;
  readonly #mvcc: Mvcc;
  readonly #scanners = new ScannerReadPoints();
  /** The read point a new read takes. */
  #readPoint: () => number;

  constructor(memstore: Memstore, schema: FamilySchema, mvcc: Mvcc) {
    this.#memstore = memstore;
    this.#schema = schema;
    this.#mvcc = mvcc;
    this.#readPoint = () => mvcc.readPoint;
  }

  /** Test seam: the read point new reads take; `undefined` restores the MVCC read point. */
  overrideReadPoint(readPoint: (() => number) | undefined): void {
    const mvcc = this.#mvcc;
    this.#readPoint = readPoint ?? (() => mvcc.readPoint);
  }

  /** The oldest read point in use, open scanners included: pruning keeps what it sees. */
  oldestReadPoint(): number {
    return this.#scanners.oldest(this.#mvcc.readPoint);
  }

  /**
   * Holds the current read point open, as a scanner does, until `release`: pruning keeps every
   * cell a reader there could see, and drops no newer one (a split copies in two steps).
   */
  pin(): { readPoint: number; release: () => void } {
    const readPoint = this.#mvcc.readPoint;
    this.#scanners.open(readPoint);
    let released = false;
    return {
      readPoint,
      release: () => {
        if (released) return;
        released = true;
        this.#scanners.close(readPoint);
      },
    };
  }

  get(get: Get): Result {
    return new Result(
      get.row,
      this.#memstore.read(get.row, get, this.#readPoint(), this.#schema.order),
    );
  }

  async *scan(scan: Scan): AsyncGenerator<Result, void, undefined> {
    const readPoint = this.#readPoint();
    this.#scanners.open(readPoint);
    try {
      let key: string | undefined;
      for (;;) {
        key = this.#memstore.nextRow(scan.startRow, key, scan.stopRow);
        if (key === undefined) return;
        const cells = this.#memstore.read(key, scan, readPoint, this.#schema.order);
        if (cells.length > 0) yield new Result(key, cells);
      }
    } finally {
      this.#scanners.close(readPoint);
    }
  }
}
