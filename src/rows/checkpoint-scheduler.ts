import { type EncodableCell, encodeCells } from './cell-codec.js';
import type { Memstore } from './memstore.js';
import type { RegionStorage } from './region-storage.js';

/** A snapshot record holds about this many bytes of cells. */
const SNAPSHOT_RECORD_BYTES = 1 << 20;

/** What a checkpoint reads from the region. */
export interface CheckpointSource {
  readonly memstore: Memstore;
  /** Undefined for a region without a directory: a checkpoint only compacts then. */
  readonly storage: RegionStorage | undefined;
  maxVersions(family: string): number;
  /** The oldest read point still in use (scanners included): compaction keeps what it sees. */
  oldestReadPoint(): number;
  /** Write numbers whose cells are in the memstore but whose log record is not yet queued. */
  readonly pending: ReadonlySet<number>;
}

/**
 * Checkpoint scheduling: one checkpoint at a time, each writing a snapshot of the live cells
 * (compacted first, as HBase's major compaction: hidden versions and delete markers go) and
 * dropping the log before it.
 *
 * Contract: {@link run} joins the checkpoint under way or starts one; {@link afterWrite}
 * starts one in the background once the log exceeds `thresholdBytes`, its failure going to
 * `onBackgroundFailure`; {@link settled} waits for the one under way, whatever its outcome.
 * A snapshot never holds a cell of a write whose log record is not yet queued (that write is
 * still in the log after the snapshot, or not acknowledged).
 */
export class CheckpointScheduler {
  readonly #source: CheckpointSource;
  readonly #thresholdBytes: number;
  readonly #onBackgroundFailure: (err: unknown) => void;
  #running: Promise<void> | undefined;

  constructor(
    source: CheckpointSource,
    thresholdBytes: number,
    onBackgroundFailure: (err: unknown) => void,
  ) {
    this.#source = source;
    this.#thresholdBytes = thresholdBytes;
    this.#onBackgroundFailure = onBackgroundFailure;
  }

  run(): Promise<void> {
    if (this.#running !== undefined) return this.#running;
    const { storage } = this.#source;
    if (storage === undefined) {
      this.#compact();
      return Promise.resolve();
    }
    const checkpoint = storage
      .checkpoint(() => this.#capture())
      .finally(() => {
        this.#running = undefined;
      });
    this.#running = checkpoint;
    return checkpoint;
  }

  afterWrite(): void {
    const { storage } = this.#source;
    if (
      storage !== undefined &&
      storage.logBytes > this.#thresholdBytes &&
      this.#running === undefined
    ) {
      this.run().catch(this.#onBackgroundFailure);
    }
  }

  async settled(): Promise<void> {
    if (this.#running !== undefined) await this.#running.catch(() => undefined);
  }

  #compact(): void {
    const source = this.#source;
    source.memstore.compact((f) => source.maxVersions(f), source.oldestReadPoint());
  }

  /** The snapshot records: every cell whose mutation's log record is already queued. */
  #capture(): Uint8Array[] {
    this.#compact();
    const { memstore, pending } = this.#source;
    const records: Uint8Array[] = [];
    let batch: EncodableCell[] = [];
    let bytes = 0;
    for (const cell of memstore.cells()) {
      if (pending.has(cell.seq)) continue;
      batch.push(cell);
      bytes += 32 + cell.row.length + cell.qualifier.length + cell.value.length;
      if (bytes >= SNAPSHOT_RECORD_BYTES) {
        records.push(encodeCells('snapshot', batch));
        batch = [];
        bytes = 0;
      }
    }
    if (batch.length > 0) records.push(encodeCells('snapshot', batch));
    return records;
  }
}
