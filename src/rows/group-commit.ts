import { fdatasyncSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { FencedError, LockIOError } from '../core/errors.js';
import { createSegment, segmentName, writeFully, writeFullySync } from './log-segment.js';
import { encodeFrame, FILE_HEADER_BYTES, type Seal } from './record-codec.js';
import type { EpochFence } from './storage-epoch.js';

export type Durability = 'fsync' | 'none';

/**
 * A batch up to this size is written with a synchronous `write(2)` from the event loop: a few
 * µs for a page-cache write, where a trip through libuv's pool (and the promise of its answer)
 * cost more than the write itself. Larger batches still go through the pool, so a huge
 * mutation never stalls the loop.
 */
const SYNC_WRITE_MAX_BYTES = 64 * 1024;

/**
 * With `fsync`, a batch of at most this many records is synced from the event loop
 * (`fdatasync` called synchronously) while the device's recent syncs are fast (see
 * {@link INLINE_SYNC_MAX_MS}); larger batches, and every batch on a slow device, sync on
 * libuv's pool. Why: a lone record's latency is mostly the pool's round trip (measured here
 * ~150 µs beside a ~250 µs `fdatasync`, so 1x1 lock cycles went from ~950/s to ~1,450/s),
 * while a large batch means other clients are waiting and the loop serves them better
 * during the sync than blocked by it.
 */
const INLINE_SYNC_MAX_RECORDS = 4;

/**
 * The recent sync latency (a moving average, in ms) above which no sync runs on the loop:
 * the loop is never blocked for more than about a fast device's sync, and a device that
 * slows down (a busy disk, a network volume) moves every sync back to the pool after one
 * slow sample.
 */
const INLINE_SYNC_MAX_MS = 2;

/** The moving average's weight of a new sample. */
const SYNC_LATENCY_WEIGHT = 0.25;

/**
 * With `fsync`, a segment's next bytes are written as zeros (and synced with the batch that
 * first needs them) this many at a time, ahead of the records that will overwrite them. Why:
 * a sync of a write past the file's end must also commit the file's new size (a journal
 * commit on ext4), while one that overwrites bytes already on disk flushes only the data —
 * measured here 0.15-0.25 ms against 0.10-0.18 ms per `fdatasync`. A segment is truncated to
 * its records when it is closed; a crash leaves the zeros, which recovery drops as the torn
 * tail they look like (see `scanSegment`).
 */
const PREALLOCATE_BYTES = 1 << 20;

/** What the zeros are written from (never written to). */
const ZEROS = Buffer.alloc(PREALLOCATE_BYTES);

/** Counters for tests and benchmarks; they only ever grow. */
export interface LogStats {
  /** Records acknowledged (their batch written, and synced with `fsync`). */
  records: number;
  /** Batches written: one `write(2)` each (more only after a short write). */
  batches: number;
  /** `fdatasync` calls on segments, for batches and new segment headers. */
  fileSyncs: number;
  /** Those of {@link fileSyncs} made from the event loop (small batch, fast device). */
  inlineSyncs: number;
  /** `fsync` calls on the directory made by the log (new segments). */
  dirSyncs: number;
  segmentsCreated: number;
  /** Epoch checks made (0 without an epoch): one per batch and one per segment created. */
  fenceChecks: number;
}

/**
 * The segment being appended to: records end at `size`, zeros written up to `allocated`
 * (infinite once preallocating failed: see {@link preallocate}).
 */
interface OpenSegment {
  seq: number;
  handle: FileHandle;
  size: number;
  allocated: number;
}

/** The records queued for one segment that will go out in one write (+ one sync). */
interface Batch {
  seq: number;
  frames: Buffer[];
  bytes: number;
  /** For the batch that creates its segment: the seal its header carries (see `roll`). */
  seal: Seal | undefined;
  /** Settles when the batch is durable (or failed); always has a handler attached. */
  done: Promise<void>;
  resolve: () => void;
  reject: (err: Error) => void;
}

/**
 * The write-ahead log's writer: appends are framed and queued synchronously (call order is log
 * order) and written by one loop, one batch at a time, on libuv's pool (`FileHandle.write` and
 * `datasync`), never blocking the event loop for long: only a small batch is written from the
 * loop itself (see {@link SYNC_WRITE_MAX_BYTES}), and so is a small batch's sync while the
 * device syncs fast (see {@link INLINE_SYNC_MAX_RECORDS}).
 *
 * Group commit: every record queued while a batch is being written and synced goes out in the
 * next batch, as a single `write(2)` of the concatenated frames followed by a single
 * `fdatasync`. A batch never spans two segments: a roll closes the forming batch. After a
 * failed write or sync the log is **poisoned**: the failing batch and everything queued
 * behind it reject with an `IO_ERROR`, as do all later appends, because whether later records
 * could be made durable (after the kernel may have dropped dirty pages) is unknown.
 *
 * With an epoch (a {@link EpochFence}), each batch is checked after it is written and synced
 * and before any of its appends resolves, and so is each segment creation before it happens;
 * a failed check poisons the log the same way, with a `FencedError` (`FENCED`). Without one,
 * nothing is checked (no cost).
 */
export class GroupCommitLog {
  readonly #dir: string;
  readonly #dirHandle: FileHandle;
  readonly #sync: boolean;
  readonly #segmentBytes: number;
  readonly #queue: Batch[] = [];
  /** The batch new appends join; undefined once the writer took it. */
  #forming: Batch | undefined;
  #activeSeq = 0;
  #activeBytes = 0;
  /** Bytes (header + frames, queued or written) per segment not yet deleted. */
  readonly #bytesBySeq = new Map<number, number>();
  #open: OpenSegment | undefined;
  #running: Promise<void> | undefined;
  #poison: LockIOError | FencedError | undefined;
  readonly #epoch: number;
  readonly #fence: EpochFence | undefined;
  /** Moving average of batch sync latency, ms (see {@link INLINE_SYNC_MAX_MS}). */
  #syncLatencyMs = 0;
  readonly stats: LogStats = {
    records: 0,
    batches: 0,
    fileSyncs: 0,
    inlineSyncs: 0,
    dirSyncs: 0,
    segmentsCreated: 0,
    fenceChecks: 0,
  };

  constructor(
    dir: string,
    dirHandle: FileHandle,
    durability: Durability,
    segmentBytes: number,
    fence: EpochFence | undefined = undefined,
  ) {
    this.#dir = dir;
    this.#dirHandle = dirHandle;
    this.#sync = durability === 'fsync';
    this.#segmentBytes = segmentBytes;
    this.#fence = fence;
    this.#epoch = fence?.epoch ?? 0;
  }

  /** The error that poisoned the log, if any. */
  get poison(): LockIOError | FencedError | undefined {
    return this.#poison;
  }

  /**
   * Poisons the log with `err` (a failed epoch check outside the log: a checkpoint's; the
   * storage's lock lost), so every queued and later append rejects; a batch being written
   * fails at its own check, or (without an epoch) is acknowledged as written before.
   */
  poisonWith(err: LockIOError | FencedError): void {
    if (this.#poison !== undefined) return;
    this.#poison = err;
    this.#forming = undefined;
    for (const queued of this.#queue.splice(0)) queued.reject(err);
  }

  /** Bytes in segments numbered `from` and later. */
  bytesFrom(from: number): number {
    let sum = 0;
    for (const [seq, bytes] of this.#bytesBySeq) if (seq >= from) sum += bytes;
    return sum;
  }

  /** Counts an existing segment (found at recovery) in {@link bytesFrom}. */
  noteExisting(seq: number, bytes: number): void {
    this.#bytesBySeq.set(seq, bytes);
  }

  /** Forgets segments below `seq` (deleted by a checkpoint). */
  forgetBelow(seq: number): void {
    for (const s of [...this.#bytesBySeq.keys()]) if (s < seq) this.#bytesBySeq.delete(s);
  }

  /**
   * Queues one record for the active segment (rolling first if that segment is full) and
   * returns a promise of its durability. The payload is copied before this returns.
   */
  append(payload: Uint8Array): Promise<void> {
    if (this.#poison !== undefined) return Promise.reject(this.#poisoned());
    if (this.#activeBytes >= this.#segmentBytes) this.roll();
    const batch = this.#forming ?? this.#newBatch(this.#activeSeq);
    const frame = encodeFrame(payload, batch.bytes);
    batch.frames.push(frame);
    batch.bytes += frame.length;
    this.#activeBytes += frame.length;
    this.#bytesBySeq.set(this.#activeSeq, this.#activeBytes);
    // A promise of its own per caller, so a caller that drops it still gets an unhandled
    // rejection report, while the batch's shared promise is always handled.
    return batch.done.then();
  }

  /**
   * Switches appends, from this call on, to a new segment numbered one past the active one,
   * which is created even if nothing is appended to it (with `seal` in its header, when given:
   * the first segment of an open). Returns its number, and `created`, which resolves once the
   * segment exists (so every earlier batch is done, and the records that joined its first
   * batch are durable) and rejects if the log is or gets poisoned.
   */
  roll(seal?: Seal): { seq: number; created: Promise<void> } {
    const seq = this.#activeSeq + 1;
    this.#activeSeq = seq;
    this.#activeBytes = FILE_HEADER_BYTES;
    this.#bytesBySeq.set(seq, FILE_HEADER_BYTES);
    if (this.#poison !== undefined) {
      const created = Promise.reject(this.#poisoned());
      created.catch(() => {});
      return { seq, created };
    }
    const batch = this.#newBatch(seq);
    batch.seal = seal;
    return { seq, created: batch.done };
  }

  /** Makes `seq - 1` the active segment number, so the next {@link roll} creates `seq`. */
  startAt(seq: number): void {
    this.#activeSeq = seq - 1;
  }

  /** Resolves when every queued batch has been written (or failed). */
  async drain(): Promise<void> {
    while (this.#running !== undefined) await this.#running;
  }

  /** Drains, then closes the open segment. */
  async close(): Promise<void> {
    await this.drain();
    const open = this.#open;
    this.#open = undefined;
    if (open !== undefined) await this.#closeSegment(open);
  }

  /** Drops the zeros past the records (synced with `fsync`), then closes the file. */
  async #closeSegment(open: OpenSegment): Promise<void> {
    try {
      if (open.allocated > open.size) {
        await open.handle.truncate(open.size);
        if (this.#sync) await open.handle.datasync();
      }
    } finally {
      await open.handle.close();
    }
  }

  #newBatch(seq: number): Batch {
    let resolve!: () => void;
    let reject!: (err: Error) => void;
    const done = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    done.catch(() => {});
    const batch: Batch = { seq, frames: [], bytes: 0, seal: undefined, done, resolve, reject };
    this.#queue.push(batch);
    this.#forming = batch;
    this.#kick();
    return batch;
  }

  /**
   * Starts the writer loop if it is idle, on the next macrotask, so every append made in the
   * current tick (and the continuations of the batch just acknowledged) joins the first batch.
   */
  #kick(): void {
    if (this.#running !== undefined) return;
    this.#running = new Promise<void>((r) => setImmediate(r))
      .then(() => this.#run())
      .finally(() => {
        this.#running = undefined;
        if (this.#queue.length > 0) this.#kick();
      });
  }

  async #run(): Promise<void> {
    for (let batch = this.#queue.shift(); batch !== undefined; batch = this.#queue.shift()) {
      if (batch === this.#forming) this.#forming = undefined;
      try {
        await this.#write(batch);
        // Written (and synced): now, before any of its appends resolves, is this writer still
        // the storage's owner? If it is not, nothing of the batch counts (see storage-epoch.ts).
        this.#check('acknowledge an append batch');
      } catch (err) {
        this.#fail(this.#fencedInstead(err), batch);
        return;
      }
      batch.resolve();
    }
  }

  async #write(batch: Batch): Promise<void> {
    let open = this.#open;
    if (open?.seq !== batch.seq) {
      this.#open = undefined;
      // Truncated (and synced) before the next segment exists: only the last segment may
      // end in zeros, the tail a crash leaves (see scanSegment).
      if (open !== undefined) await this.#closeSegment(open);
      const path = join(this.#dir, segmentName(batch.seq));
      this.#check(`create log segment ${segmentName(batch.seq)}`);
      try {
        const handle = await createSegment(path, batch.seq, this.#sync, this.#epoch, batch.seal);
        open = { seq: batch.seq, handle, size: FILE_HEADER_BYTES, allocated: FILE_HEADER_BYTES };
        this.#open = open;
        this.stats.segmentsCreated++;
        if (this.#sync) {
          this.stats.fileSyncs++;
          // The name must be durable before any record in the file is acknowledged.
          await this.#dirHandle.sync();
          this.stats.dirSyncs++;
        }
      } catch (err) {
        throw new LockIOError(`Cannot create log segment ${path}: ${message(err)}`, {
          cause: err,
        });
      }
    }
    if (batch.frames.length === 0) return;
    const data =
      batch.frames.length === 1 ? (batch.frames[0] as Buffer) : Buffer.concat(batch.frames);
    try {
      if (this.#sync && open.size + data.length > open.allocated) {
        await preallocate(open, open.size + data.length, this.#segmentBytes);
      }
      if (data.length <= SYNC_WRITE_MAX_BYTES) writeFullySync(open.handle, data, open.size);
      else await writeFully(open.handle, data, open.size);
      open.size += data.length;
      if (this.#sync) await this.#syncBatch(open.handle, batch.frames.length);
    } catch (err) {
      const path = join(this.#dir, segmentName(batch.seq));
      throw new LockIOError(`Cannot append to log segment ${path}: ${message(err)}`, {
        cause: err,
      });
    }
    this.stats.batches++;
    this.stats.records += batch.frames.length;
  }

  /** `fdatasync` of a written batch: from the loop or on the pool (see {@link INLINE_SYNC_MAX_RECORDS}). */
  async #syncBatch(handle: FileHandle, records: number): Promise<void> {
    const inline = records <= INLINE_SYNC_MAX_RECORDS && this.#syncLatencyMs < INLINE_SYNC_MAX_MS;
    const started = performance.now();
    if (inline) fdatasyncSync(handle.fd);
    else await handle.datasync();
    const took = performance.now() - started;
    this.#syncLatencyMs += (took - this.#syncLatencyMs) * SYNC_LATENCY_WEIGHT;
    this.stats.fileSyncs++;
    if (inline) this.stats.inlineSyncs++;
  }

  /**
   * With an epoch, a failure (a segment number taken, say) is first explained by a newer
   * master if there is one: a deposed writer hears `FENCED`, whatever broke first.
   */
  #fencedInstead(err: unknown): unknown {
    if (this.#fence === undefined || err instanceof FencedError) return err;
    try {
      this.#fence.check('go on after a failed write');
    } catch (fenced) {
      if (fenced instanceof FencedError) {
        return new FencedError(`${fenced.message} (the write failed: ${message(err)})`, {
          cause: err,
        });
      }
    }
    return err;
  }

  /** With an epoch: the fence's check. */
  #check(what: string): void {
    if (this.#fence === undefined) return;
    this.stats.fenceChecks++;
    this.#fence.check(what);
  }

  #fail(err: unknown, batch: Batch): void {
    const error =
      err instanceof LockIOError || err instanceof FencedError
        ? err
        : new LockIOError(message(err), { cause: err });
    this.#poison = error;
    this.#forming = undefined;
    batch.reject(error);
    for (const queued of this.#queue.splice(0)) queued.reject(error);
  }

  #poisoned(): LockIOError | FencedError {
    if (this.#poison instanceof FencedError) {
      return new FencedError(
        `Row storage log in ${this.#dir} refuses appends: a newer master owns it ` +
          `(${this.#poison.message})`,
        { cause: this.#poison },
      );
    }
    return new LockIOError(
      `Row storage log in ${this.#dir} is unusable after an earlier I/O error ` +
        `(${this.#poison?.message}); reopen it to recover`,
      { cause: this.#poison },
    );
  }
}

/**
 * Writes zeros after `open`'s records: up to {@link PREALLOCATE_BYTES} of them, no further
 * than where the segment rolls (`segmentBytes`), and only where the batch about to be written
 * (ending at `end`) fits in them (a large batch is appended as it is). Best effort: where the
 * zeros do not fit (a full disk, a file size limit) records are appended as before and the
 * segment stops preallocating (its `allocated` is then infinite, so closing it still
 * truncates whatever zeros were written).
 */
async function preallocate(open: OpenSegment, end: number, segmentBytes: number): Promise<void> {
  const from = Math.max(open.size, open.allocated);
  const to = Math.min(from + PREALLOCATE_BYTES, segmentBytes);
  if (to < end) return;
  try {
    await writeFully(open.handle, ZEROS.subarray(0, to - from), from);
    open.allocated = to;
  } catch {
    open.allocated = Number.POSITIVE_INFINITY;
  }
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
