import { constants } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import {
  AlreadyClosedError,
  FencedError,
  InvalidArgumentError,
  isErrno,
  LockIOError,
  LockObtainFailedError,
} from '../core/errors.js';
import { describeValue } from '../core/options.js';
import { WRITE_LOCK_NAME } from '../directory/acquire-lock.js';
import { FSDirectory } from '../directory/fs-directory.js';
import type { Lock } from '../directory/lock.js';
import { takeOverLock } from '../directory/take-over-lock.js';
import { type Durability, GroupCommitLog, type LogStats } from './group-commit.js';
import { parseSegmentName } from './log-segment.js';
import type { Recovered, RegionStorage } from './region-storage.js';
import { type RecoveredState, readState, refuseNewer, repair } from './row-storage-recovery.js';
import {
  parseSnapshotName,
  publishSnapshot,
  snapshotName,
  writeSnapshotTemp,
} from './snapshot-file.js';
import { EpochFence, writeEpochFile } from './storage-epoch.js';

export type { Durability, LogStats } from './group-commit.js';

export interface RowStorageOptions {
  /**
   * `'fsync'` (default): an append resolves after `fdatasync`, so it survives power loss.
   * `'none'`: after `write(2)`, so it survives the process being killed (`kill -9`: the data
   * is in the kernel's page cache) but not a power cut or kernel crash. Snapshots are fsynced
   * in both modes.
   */
  durability?: Durability;
  /** Roll to a new log segment once the current one reaches this size (default 64 MiB;
   * at least 4096, at most 1 GiB). */
  segmentBytes?: number;
  /** Largest record accepted by `append` and `checkpoint` (default 64 MiB, from 1 byte to
   * 512 MiB). Recovery reads any record the format can hold, whatever this is set to. */
  maxRecordBytes?: number;
  /**
   * The writer's epoch: a safe integer >= 1, the fencing token of its mastership (a larger
   * one is a newer master). With it the open takes `write.lock` over from a deposed holder,
   * refuses storage that carries a larger epoch (`FencedError`), records its own, and every
   * append batch, segment creation, snapshot publish and deletion first checks that no newer
   * master has opened the storage since (see `storage-epoch.ts`). Absent: standalone (epoch 0;
   * a plain lock, no checks; a storage that carries an epoch is refused).
   */
  epoch?: number;
}

export type { Recovered };

export interface RowStorageStats extends LogStats {
  checkpoints: number;
}

const MiB = 1 << 20;
const DEFAULT_SEGMENT_BYTES = 64 * MiB;
const DEFAULT_MAX_RECORD_BYTES = 64 * MiB;
const MAX_SEGMENT_BYTES = 1024 * MiB;
const MAX_MAX_RECORD_BYTES = 512 * MiB;

/**
 * The durable storage under the row store: a write-ahead log of opaque, checksummed records
 * with group commit, plus snapshot (checkpoint) files; the caller keeps all live data in
 * memory and gets it back from {@link RowStorage.open}'s `recovered`.
 *
 * Directory contents: `write.lock` (+ its `.fence`), `log-<seq>.wal` segments and at most one
 * `snapshot-<seq>.snap` (briefly two during a checkpoint), and with an epoch the `epoch` file.
 * The state is the newest valid snapshot plus every segment numbered from its `seq` on, which
 * must all be present; without a snapshot, every segment from 1 on. With epochs, only the
 * segments and snapshots that count (see `storage-epoch.ts`: seals and epoch order exclude
 * what a deposed writer added). See `record-codec.ts` for the byte layout (format version 2;
 * version 1 files are still read) and `log-segment.ts` for how a damaged record is judged
 * (torn tail dropped, anything else an error).
 */
export class RowStorage implements RegionStorage {
  readonly #dir: string;
  readonly #lock: Lock;
  readonly #dirHandle: FileHandle;
  readonly #log: GroupCommitLog;
  readonly #maxRecordBytes: number;
  readonly #fence: EpochFence | undefined;
  /** The first segment not covered by the newest (possibly still being written) snapshot. */
  #coveredFrom: number;
  #checkpoints = 0;
  #checkpointTail: Promise<void> = Promise.resolve();
  /** Checkpoints called and not yet settled (running or queued). */
  #checkpointsInFlight = 0;
  #closed = false;
  #closing: Promise<void> | undefined;

  private constructor(
    dir: string,
    lock: Lock,
    dirHandle: FileHandle,
    log: GroupCommitLog,
    maxRecordBytes: number,
    coveredFrom: number,
    fence: EpochFence | undefined,
  ) {
    this.#dir = dir;
    this.#lock = lock;
    this.#dirHandle = dirHandle;
    this.#log = log;
    this.#maxRecordBytes = maxRecordBytes;
    this.#coveredFrom = coveredFrom;
    this.#fence = fence;
    if (fence === undefined) {
      // Without an epoch no check runs per batch: a write.lock deleted or replaced under the
      // storage (its directory removed or moved away) stops every later write, which would
      // otherwise be acknowledged into files no open will read again.
      lock.once('lost', (reason) =>
        log.poisonWith(
          new LockIOError(`Row storage ${dir} refuses writes: ${reason.message}`, {
            cause: reason,
          }),
        ),
      );
    }
  }

  /**
   * Opens or creates `dir`: obtains `NativeFSLockFactory`'s `write.lock` there first (held by
   * another process, or already open in this one: {@link LockObtainFailedError}, code
   * `LOCK_OBTAIN_FAILED`, naming the directory), deletes temporary files left by a crash,
   * recovers (truncating a torn tail of the last segment, deleting files a finished
   * checkpoint made obsolete), and starts a new log segment for this session's appends.
   * Damage a crash cannot explain rejects with an `IO_ERROR` naming the file and offset.
   *
   * With `options.epoch` (see {@link RowStorageOptions.epoch} and `storage-epoch.ts`): refuses
   * with `FencedError` (`FENCED`) before changing anything if the storage carries a larger
   * epoch, takes `write.lock` over from a deposed holder instead of failing, records the epoch
   * before reading the state, and seals what it read in the header of its first segment.
   * Without one, a storage that carries any epoch is refused the same way.
   *
   * `accept`, when given, judges the recovered records before anything on disk changes: if
   * it throws, the open is refused with that error and the directory is left exactly as it
   * was (no lock taken, no repair, no new segment). It first runs on a read made without the
   * lock (so a refusal does not even advance `write.lock`'s fencing token), then again on the
   * read made under the lock, which is the one that counts (with an epoch, that read follows
   * the takeover, so the epoch is recorded by then).
   */
  static async open(
    dir: string,
    options: RowStorageOptions = {},
    accept?: (recovered: Recovered) => void,
  ): Promise<{ storage: RowStorage; recovered: Recovered }> {
    const { durability, segmentBytes, maxRecordBytes, epoch } = validateOptions(dir, options);
    // A newer master's storage is refused before anything changes, write.lock included.
    await refuseNewer(dir, epoch);
    if (accept !== undefined) {
      let early: RecoveredState | undefined;
      try {
        early = await readState(dir);
      } catch {
        // Missing, damaged, or changing under another process's hands: the read under the
        // lock below decides (and reports) instead.
      }
      if (early !== undefined) accept(early.recovered);
    }
    const directory = await FSDirectory.open(dir);
    let lock: Lock;
    try {
      lock =
        epoch > 0
          ? await takeOverLock(directory.path)
          : await directory.obtainLock(WRITE_LOCK_NAME);
    } catch (err) {
      if (!(err instanceof LockObtainFailedError)) throw err;
      throw new LockObtainFailedError(
        `Row storage ${directory.path} is already open (in this or another process): ${err.message}`,
        { cause: err },
      );
    }
    let dirHandle: FileHandle | undefined;
    let log: GroupCommitLog | undefined;
    try {
      dirHandle = await fsp.open(directory.path, constants.O_RDONLY | constants.O_DIRECTORY);
      await refuseNewer(directory.path, epoch); // the check that counts: under the lock
      let fence: EpochFence | undefined;
      if (epoch > 0) {
        // Recorded before the state is read: from here on a deposed writer acknowledges
        // nothing, so nothing acknowledged can be missing from the read below.
        const identity = await writeEpochFile(directory.path, dirHandle, epoch);
        fence = new EpochFence(directory.path, epoch, lock, identity);
        fence.check('open');
      }
      const wrap = (err: unknown): never => {
        if (err instanceof LockIOError || err instanceof FencedError) throw err;
        throw new LockIOError(
          `Cannot recover row storage ${directory.path}: ${(err as Error).message}`,
          { cause: err },
        );
      };
      const state = await readState(directory.path).catch(wrap);
      accept?.(state.recovered);
      await repair(state, dirHandle, fence).catch(wrap);
      // With an epoch, the first segment carries the seal (standalone: no deposed writer can
      // append behind it, and damage past a segment's end stays an error). A deposed writer
      // may take its number meanwhile (O_EXCL: one create fails); then the next number, the
      // seal voiding the deposed one's.
      const seal = fence === undefined ? undefined : state.seal;
      for (let next = state.nextSeq, attempt = 1; ; next++, attempt++) {
        log = new GroupCommitLog(directory.path, dirHandle, durability, segmentBytes, fence);
        for (const [seq, end] of state.ends) log.noteExisting(seq, end);
        log.startAt(next);
        try {
          await log.roll(seal).created;
          break;
        } catch (err) {
          const taken = isErrno((err as Error).cause, 'EEXIST');
          if (fence === undefined || !taken || attempt >= 3) throw err;
          await log.close().catch(() => {});
          log = undefined;
        }
      }
      fence?.check('open');
      const storage = new RowStorage(
        directory.path,
        lock,
        dirHandle,
        log,
        maxRecordBytes,
        state.coveredFrom,
        fence,
      );
      return { storage, recovered: state.recovered };
    } catch (err) {
      await log?.close().catch(() => {});
      await dirHandle?.close().catch(() => {});
      await lock.close().catch(() => {});
      throw err;
    }
  }

  /** The epoch this storage was opened with (0: standalone). */
  get epoch(): number {
    return this.#fence?.epoch ?? 0;
  }

  /** The real path of the storage directory. */
  get directory(): string {
    return this.#dir;
  }

  /**
   * Bytes (headers and frames, queued or written) in log segments not covered by the newest
   * snapshot; a checkpoint that has started counts as covering (it drops back to 0 when it
   * starts, and the old bytes come back if it fails).
   */
  get logBytes(): number {
    return this.#log.bytesFrom(this.#coveredFrom);
  }

  /** True from a `checkpoint()` call until it (and any queued after it) settled. */
  get checkpointing(): boolean {
    return this.#checkpointsInFlight > 0;
  }

  /** Counters (copied) for tests and benchmarks. */
  get stats(): RowStorageStats {
    return { ...this.#log.stats, checkpoints: this.#checkpoints };
  }

  /**
   * Queues one record. Synchronously, before this returns, the record is validated, copied
   * and queued, so call order is log order. Resolves once the record is durable per
   * `durability`; after a crash it is then entirely present, and a record whose append did
   * not resolve is entirely present or entirely absent (never part of one), with every
   * record appended before it present if it is.
   *
   * Rejects with `InvalidArgumentError` (nothing queued) for a non-`Uint8Array` or a record
   * over `maxRecordBytes`, `AlreadyClosedError` once `close()` was called, and `LockIOError`
   * (`IO_ERROR`) when its batch could not be written or synced — after which the storage is
   * poisoned: every later append and checkpoint rejects too, and it has to be reopened. With
   * an epoch, `FencedError` (`FENCED`) when a newer master opened the storage before the
   * batch was checked (the record may be on disk, but counts only if that master read it when
   * it took over); poisoned the same way, for good: this writer is deposed.
   */
  append(record: Uint8Array): Promise<void> {
    if (this.#closed) return Promise.reject(this.#closedError());
    try {
      this.#checkRecord(record, 'append');
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#log.append(record);
  }

  /**
   * Writes a checkpoint. When it starts it synchronously (in one tick) rolls appends over to a
   * new segment N and calls `capture()`, which must return records representing everything
   * appended before this point; the iterable is consumed at once, and the arrays it yields
   * must not be modified afterwards (they are written later, not copied). Then the records go
   * to `snapshot-N.snap` (temporary file, fsync, rename after segment N exists, fsync of the
   * directory), and only then are the older segments and snapshot deleted. A crash at any
   * point recovers either the old snapshot and every segment, or the new snapshot and the
   * segments from N: an acknowledged record is never lost.
   *
   * One checkpoint runs at a time: a call made while one runs waits for it, then starts its
   * own (so its `capture` is called later, not during the call; see {@link checkpointing}).
   * Rejects with `IO_ERROR` if the snapshot could not be written (the log is unaffected: the
   * old snapshot and segments stay, and `logBytes` counts them again), with whatever
   * `capture` threw, and with `AlreadyClosedError` if `close()` was called before this call.
   */
  checkpoint(capture: () => Iterable<Uint8Array>): Promise<void> {
    if (this.#closed) return Promise.reject(this.#closedError());
    if (typeof capture !== 'function') {
      return Promise.reject(new InvalidArgumentError('checkpoint needs a capture function'));
    }
    // Idle: start now, so the roll and `capture()` happen inside this call. Busy: queue.
    const run =
      this.#checkpointsInFlight === 0
        ? this.#checkpoint(capture)
        : this.#checkpointTail.then(() => this.#checkpoint(capture));
    this.#checkpointsInFlight++;
    this.#checkpointTail = run.then(
      () => {
        this.#checkpointsInFlight--;
      },
      () => {
        this.#checkpointsInFlight--;
      },
    );
    return run;
  }

  async #checkpoint(capture: () => Iterable<Uint8Array>): Promise<void> {
    const poison = this.#log.poison;
    if (poison instanceof FencedError) {
      throw new FencedError(`Row storage ${this.#dir} is owned by a newer master`, {
        cause: poison,
      });
    }
    if (poison !== undefined) {
      throw new LockIOError(`Row storage ${this.#dir} is unusable after an I/O error`, {
        cause: poison,
      });
    }
    // Synchronous part: the roll and the capture happen in the same tick.
    const previous = this.#coveredFrom;
    const { seq, created } = this.#log.roll();
    this.#coveredFrom = seq;
    let records: Uint8Array[];
    try {
      records = Array.from(capture());
      for (const record of records) this.#checkRecord(record, 'checkpoint');
    } catch (err) {
      this.#coveredFrom = previous;
      throw err;
    }
    const path = join(this.#dir, snapshotName(seq));
    try {
      const temp = await writeSnapshotTemp(path, seq, this.epoch, records);
      try {
        // The snapshot may only appear once segment `seq` exists: recovery requires every
        // segment from the snapshot's number on.
        await created;
        this.#checkFence(`publish ${snapshotName(seq)}`);
      } catch (err) {
        await fsp.rm(temp, { force: true }).catch(() => {});
        throw err;
      }
      await publishSnapshot(temp, path, this.#dirHandle);
    } catch (err) {
      this.#coveredFrom = previous;
      throw err;
    }
    this.#checkpoints++;
    await this.#deleteBelow(seq);
  }

  /** Deletes segments and snapshots numbered below `seq` (now covered by snapshot `seq`). */
  async #deleteBelow(seq: number): Promise<void> {
    this.#log.forgetBelow(seq);
    this.#checkFence(`delete the files ${snapshotName(seq)} replaces`);
    try {
      const names = await fsp.readdir(this.#dir);
      const doomed = names.filter((name) => {
        const n = parseSegmentName(name) ?? parseSnapshotName(name);
        return n !== undefined && n < seq;
      });
      // Segments first (oldest first), then snapshots: a crash in between leaves a state
      // recovery reads correctly from the new snapshot and deletes the rest.
      const ordered = [
        ...doomed.filter((name) => name.startsWith('log-')).sort(),
        ...doomed.filter((name) => name.startsWith('snapshot-')).sort(),
      ];
      for (const name of ordered) {
        this.#checkFence(`delete ${name}`);
        await fsp.rm(join(this.#dir, name), { force: true });
      }
      if (doomed.length > 0) await this.#dirHandle.sync();
    } catch (err) {
      if (err instanceof FencedError) throw err;
      throw new LockIOError(
        `Snapshot ${snapshotName(seq)} in ${this.#dir} is in place, but deleting the files it ` +
          `replaces failed (they are deleted at the next open): ${(err as Error).message}`,
        { cause: err },
      );
    }
  }

  /**
   * Waits for every queued append and a running checkpoint, closes the files and releases
   * `write.lock`. Idempotent: later calls return the same promise. Appends and checkpoints
   * called after it reject with `AlreadyClosedError`.
   */
  close(): Promise<void> {
    this.#closed = true;
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    await this.#checkpointTail;
    const errors: unknown[] = [];
    await this.#log.close().catch((err: unknown) => errors.push(err));
    await this.#dirHandle.close().catch((err: unknown) => errors.push(err));
    await this.#lock.close().catch((err: unknown) => errors.push(err));
    if (errors.length > 0) {
      throw new LockIOError(`Closing row storage ${this.#dir} failed`, { cause: errors[0] });
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** With an epoch: throws `FencedError` (poisoning the log) once this writer is deposed. */
  #checkFence(what: string): void {
    if (this.#fence === undefined) return;
    try {
      this.#fence.check(what);
    } catch (err) {
      if (err instanceof FencedError) this.#log.poisonWith(err);
      throw err;
    }
  }

  #checkRecord(record: Uint8Array, what: string): void {
    if (!(record instanceof Uint8Array)) {
      throw new InvalidArgumentError(
        `${what}: a record must be a Uint8Array, got ${typeof record}`,
      );
    }
    if (record.length > this.#maxRecordBytes) {
      throw new InvalidArgumentError(
        `${what}: record of ${record.length} bytes exceeds maxRecordBytes ${this.#maxRecordBytes} (${this.#dir})`,
      );
    }
  }

  #closedError(): AlreadyClosedError {
    return new AlreadyClosedError(`Row storage ${this.#dir} is closed`);
  }
}

function validateOptions(
  dir: string,
  options: RowStorageOptions,
): { durability: Durability; segmentBytes: number; maxRecordBytes: number; epoch: number } {
  if (typeof dir !== 'string' || dir.length === 0) {
    throw new InvalidArgumentError(`Row storage directory must be a non-empty string`);
  }
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError(`Row storage options for ${dir} must be an object`);
  }
  const durability = options.durability ?? 'fsync';
  if (durability !== 'fsync' && durability !== 'none') {
    throw new InvalidArgumentError(
      `durability must be 'fsync' or 'none', got ${describeValue(durability)} (${dir})`,
    );
  }
  const int = (name: string, value: unknown, fallback: number, min: number, max: number) => {
    if (value === undefined) return fallback;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      throw new InvalidArgumentError(
        `${name} must be an integer from ${min} to ${max}, got ${describeValue(value)} (${dir})`,
      );
    }
    return value;
  };
  return {
    durability,
    segmentBytes: int(
      'segmentBytes',
      options.segmentBytes,
      DEFAULT_SEGMENT_BYTES,
      4096,
      MAX_SEGMENT_BYTES,
    ),
    maxRecordBytes: int(
      'maxRecordBytes',
      options.maxRecordBytes,
      DEFAULT_MAX_RECORD_BYTES,
      1,
      MAX_MAX_RECORD_BYTES,
    ),
    epoch: int('epoch', options.epoch, 0, 1, Number.MAX_SAFE_INTEGER),
  };
}
