import type { Cell } from './cell.js';
import { encodeCells } from './cell-codec.js';
import { CheckpointScheduler } from './checkpoint-scheduler.js';
import type { FamilySchema } from './family-schema.js';
import type { Memstore } from './memstore.js';
import type { Draft } from './mutation-cells.js';
import type { Mvcc } from './mvcc.js';
import type { RegionStorage } from './region-storage.js';

/**
 * How a mutation's inserts share the event loop: called after inserting cell `cellIndex`, it
 * returns a promise to wait for before the next insert, or undefined to go on at once.
 */
export type InsertPace = (cellIndex: number) => Promise<void> | undefined;

export const INSERT_CHUNK = 1024;

const RESOLVED: Promise<void> = Promise.resolve();

/** A draft as the cell of write `seq` (the fields named: a spread cost more). */
function cellOf(d: Draft, seq: number): Cell {
  return {
    row: d.row,
    family: d.family,
    qualifier: d.qualifier,
    timestamp: d.timestamp,
    type: d.type,
    value: d.value,
    seq,
  };
}

const nextTurn = (): Promise<void> => new Promise((r) => setImmediate(r));

/**
 * The write path of a region, for cells built under their rows' locks: MVCC write number →
 * cells into the memstore (invisible) → one log record, group-committed → MVCC complete →
 * wait until visible → trim versions nobody can see any more → start a checkpoint in the
 * background once the log has grown past `checkpointBytes` (see {@link checkpoints}).
 *
 * Contract: {@link apply} resolves once the write is durable (when there is storage) and
 * visible; if it rejects, none of its cells stay in the memstore. A failed log append or
 * background checkpoint is remembered in {@link failure}: later writes could not be made
 * durable either, so the region stops writing. A checkpoint never captures the cells of a
 * write whose log record is not yet queued.
 */
export class WritePath {
  readonly #memstore: Memstore;
  readonly #mvcc: Mvcc;
  readonly #storage: RegionStorage | undefined;
  readonly #schema: FamilySchema;
  readonly #oldestReadPoint: () => number;
  /** Write numbers whose cells are in the memstore but whose log record is not yet queued. */
  readonly #pending = new Set<number>();
  #failure: unknown;
  /** A test's pacing, or undefined: a huge mutation yields every `INSERT_CHUNK` cells. */
  #pace: InsertPace | undefined;
  readonly checkpoints: CheckpointScheduler;

  constructor(
    memstore: Memstore,
    mvcc: Mvcc,
    storage: RegionStorage | undefined,
    schema: FamilySchema,
    oldestReadPoint: () => number,
    checkpointBytes: number,
  ) {
    this.#memstore = memstore;
    this.#mvcc = mvcc;
    this.#storage = storage;
    this.#schema = schema;
    this.#oldestReadPoint = oldestReadPoint;
    this.checkpoints = new CheckpointScheduler(
      {
        memstore,
        storage,
        maxVersions: (f) => schema.maxVersions(f),
        oldestReadPoint,
        pending: this.#pending,
      },
      checkpointBytes,
      (err) => this.#fail(err),
    );
  }

  /** Test seam: how inserts pace themselves; `undefined` restores the production pacing. */
  overridePace(pace: InsertPace | undefined): void {
    this.#pace = pace;
  }

  /** The first storage failure, if any (a failed append or background checkpoint). */
  get failure(): unknown {
    return this.#failure;
  }

  /**
   * Applies one mutation's cells (see the class contract). A mutation of fewer than
   * `INSERT_CHUNK` cells (with the production pacing) runs without an async function: its
   * frame and awaits were the largest allocation of a small put.
   */
  apply(drafts: Draft[]): Promise<void> {
    if (drafts.length >= INSERT_CHUNK || this.#pace !== undefined) return this.#applyPaced(drafts);
    const memstore = this.#memstore;
    const seq = this.#mvcc.begin();
    const cells = drafts.map((d): Cell => cellOf(d, seq));
    this.#pending.add(seq);
    let durable: Promise<void> | undefined;
    try {
      memstore.insert(cells);
      if (this.#storage !== undefined)
        durable = this.#storage.append(encodeCells('mutation', drafts));
    } catch (err) {
      memstore.remove(cells);
      this.#mvcc.complete(seq);
      return Promise.reject(err);
    } finally {
      this.#pending.delete(seq);
    }
    if (durable === undefined) return this.#complete(seq, cells);
    return durable.then(
      () => this.#complete(seq, cells),
      (err: unknown) => this.#notApplied(err, seq, cells),
    );
  }

  /** {@link apply} for a big mutation, or with a test's pacing: inserts yield as paced. */
  async #applyPaced(drafts: Draft[]): Promise<void> {
    const memstore = this.#memstore;
    const seq = this.#mvcc.begin();
    const cells = drafts.map((d): Cell => cellOf(d, seq));
    this.#pending.add(seq);
    let durable: Promise<void> | undefined;
    try {
      const pace = this.#pace;
      if (pace === undefined) {
        // Steps of whole columns (see Memstore.insertSteps), one per turn of the event loop.
        for (const _ of memstore.insertSteps(cells, INSERT_CHUNK)) await nextTurn();
      } else {
        for (let i = 0; i < cells.length; i++) {
          memstore.insert([cells[i] as Cell]);
          const wait = pace(i);
          if (wait !== undefined) await wait;
        }
      }
      if (this.#storage !== undefined)
        durable = this.#storage.append(encodeCells('mutation', drafts));
    } catch (err) {
      memstore.remove(cells);
      this.#mvcc.complete(seq);
      throw err;
    } finally {
      this.#pending.delete(seq);
    }
    if (durable !== undefined) {
      try {
        await durable;
      } catch (err) {
        this.#notApplied(err, seq, cells);
      }
    }
    await this.#complete(seq, cells);
  }

  /** The log refused write `seq`: not acknowledged, so not applied; the region stops writing. */
  #notApplied(err: unknown, seq: number, cells: readonly Cell[]): never {
    this.#fail(err);
    this.#memstore.remove(cells);
    this.#mvcc.complete(seq);
    throw err;
  }

  /** The write is durable: complete it, wait until it is visible, then trim its columns. */
  #complete(seq: number, cells: readonly Cell[]): Promise<void> {
    this.#mvcc.complete(seq);
    const visible = this.#mvcc.waitVisible(seq);
    if (visible === undefined) {
      this.#trim(cells);
      return RESOLVED;
    }
    return visible.then(() => this.#trim(cells));
  }

  #trim(cells: readonly Cell[]): void {
    const memstore = this.#memstore;
    const oldest = this.#oldestReadPoint();
    for (const c of cells) {
      if (c.type !== 'DeleteFamily') {
        const maxVersions = this.#schema.maxVersions(c.family);
        memstore.trimColumn(c.row, c.family, c.qualifier, maxVersions, oldest);
      }
    }
    this.checkpoints.afterWrite();
  }

  #fail(err: unknown): void {
    this.#failure ??= err;
  }
}
