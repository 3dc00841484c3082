import { constants, statSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import { FencedError, isErrno, LockIOError } from '../core/errors.js';
import type { Lock } from '../directory/lock.js';
import { type FileIdentity, identityOf, sameIdentity } from '../directory/lock-file.js';
import { parseSegmentName, readFileHeader } from './log-segment.js';
import { SEGMENT_MAGIC, SNAPSHOT_MAGIC } from './record-codec.js';
import { parseSnapshotName, TEMP_SUFFIX } from './snapshot-file.js';

/**
 * Epochs: how a row storage fences a deposed writer.
 *
 * A master opens the storage with its mastership's fencing token as `epoch` (>= 1); a larger
 * epoch is a newer master. The epoch is kept in three places: the `epoch` file (the current
 * owner's; replaced atomically, temp + fsync + rename + directory fsync), the header of every
 * segment and snapshot the owner writes (format version 2, see `record-codec.ts`), and in the
 * first segment an open creates, a **seal**: the segment and byte length at which that open's
 * read of the log stopped.
 *
 * An open with epoch E, in this order:
 *  1. refuses (`FencedError`, nothing changed, not even `write.lock`) if the epoch file or any
 *     segment/snapshot header carries an epoch > E (read without the lock first, then again
 *     under it);
 *  2. takes `write.lock` with `takeOverLock`: a deposed holder's lock becomes invalid;
 *  3. records E in the `epoch` file, remembering the new file's identity (dev, inode, birth);
 *  4. checks 2 and 3 still hold (a racing opener with a larger epoch wins), then reads the
 *     state to replay;
 *  5. creates its first segment (number past every file present) with the seal of step 4's
 *     read, and checks again.
 * A writer with an epoch checks, synchronously, that its lock is valid and that the `epoch`
 * file is still the one it wrote ({@link EpochFence.check}): after every append batch is
 * written (and synced) and before any append of it resolves, and right before creating a
 * segment, publishing a snapshot or deleting a file. A failed check poisons the storage: that
 * batch and every later append reject with `FencedError` (`FENCED`).
 *
 * Why a deposed writer W (epoch e < E) cannot lose or add acknowledged data, even when paused
 * (SIGSTOP) at any instruction and resumed later:
 *  - W acknowledges a batch only after a check that passed, and the check follows the batch's
 *    write(2) in W's program order. If W's check passed, it ran before step 2 (the lock check
 *    fails from step 2 on, the epoch check from step 3 on), so the write completed before the
 *    new owner's read in step 4, and that read (the page cache, same machine) contains it. A
 *    batch whose check runs after step 2 is refused, though its bytes may be on disk: the
 *    seal decides whether they count.
 *  - W can append bytes after step 4 only to its active segment, which is the last segment the
 *    read saw (sealed at the length read: later bytes never count, torn or not) or a segment W
 *    created after the read (numbered between the sealed one and the new owner's first
 *    segment: such segments never count). W creates at most one such segment: it passed the
 *    check before the create before step 2; its next check fails. If W creates the number the
 *    new owner wanted, one `O_EXCL` create fails: W's poisons W; the new owner's makes it
 *    retry with the next number (the seal voids W's segment).
 *  - W publishing a snapshot late (check passed, then paused before the rename): its segment
 *    N was created before the check, so before the read, and every record the snapshot holds
 *    was written to segments below N before N was created: the read saw them all, and the
 *    snapshot equals what the new owner replayed. A snapshot whose epoch differs from its
 *    segment's, or whose segment does not count, is ignored.
 *  - W deleting files late: only files below its own published snapshot, which (above) holds
 *    the same records.
 *  - Segments of a lower epoch numbered after a segment of a higher one (a writer that was
 *    already deposed when it created them) never count, and are deleted at the next open.
 *  - Two openers racing (E and E' > E): the lock is taken by one after the other; whichever
 *    checks after the other's steps 2/3 refuses itself (`FencedError`). A refused opener may
 *    have replaced the `epoch` file (the file can then name a smaller epoch than a header: step
 *    1 reads both) and may have created a segment, which the rules above void. Such a race can
 *    fence both: a liveness cost, never a safety one; the mastership locker makes it rare.
 *
 * Standalone (no epoch): epoch 0, a plain lock obtain, no epoch file and no checks per batch
 * (today's costs); it still refuses a storage that carries an epoch > 0 (a stale side opened
 * without its epoch is detected there, at open).
 */

/** The file naming the epoch of the storage's current owner: decimal digits and a newline. */
export const EPOCH_FILE = 'epoch';
const EPOCH_TEMP = `${EPOCH_FILE}${TEMP_SUFFIX}`;

/** The epoch recorded in `dir`'s `epoch` file; 0 when there is none. */
export async function readEpochFile(dir: string): Promise<number> {
  const path = join(dir, EPOCH_FILE);
  let text: string;
  try {
    text = await fsp.readFile(path, 'latin1');
  } catch (err) {
    if (isErrno(err, 'ENOENT', 'ENOTDIR')) return 0;
    throw new LockIOError(`Cannot read ${path}: ${(err as Error).message}`, { cause: err });
  }
  const match = /^(\d{1,16})\n$/.exec(text);
  const epoch = match === null ? Number.NaN : Number(match[1]);
  if (!Number.isSafeInteger(epoch)) {
    throw new LockIOError(`${path} does not hold an epoch: ${JSON.stringify(text.slice(0, 40))}`);
  }
  return epoch;
}

/**
 * The largest epoch `dir` carries: its `epoch` file and the header of every segment and
 * snapshot (files whose header cannot be read are skipped: recovery judges them). 0 for a
 * missing directory.
 */
export async function readDiskEpoch(dir: string): Promise<number> {
  let names: string[];
  try {
    names = await fsp.readdir(dir);
  } catch (err) {
    if (isErrno(err, 'ENOENT', 'ENOTDIR')) return 0;
    throw new LockIOError(`Cannot list ${dir}: ${(err as Error).message}`, { cause: err });
  }
  let max = await readEpochFile(dir);
  for (const name of names) {
    const magic =
      parseSegmentName(name) !== undefined
        ? SEGMENT_MAGIC
        : parseSnapshotName(name) !== undefined
          ? SNAPSHOT_MAGIC
          : undefined;
    if (magic === undefined) continue;
    const epoch = (await readFileHeader(join(dir, name), magic))?.epoch ?? 0;
    if (epoch > max) max = epoch;
  }
  return max;
}

/**
 * Records `epoch` as `dir`'s current one: `epoch.tmp` written and fsynced, renamed over
 * `epoch`, directory fsynced. Returns the identity of the new file, which
 * {@link EpochFence.check} compares against.
 */
export async function writeEpochFile(
  dir: string,
  dirHandle: FileHandle,
  epoch: number,
): Promise<FileIdentity> {
  const temp = join(dir, EPOCH_TEMP);
  const path = join(dir, EPOCH_FILE);
  try {
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;
    const handle = await fsp.open(temp, flags, 0o644);
    try {
      await handle.writeFile(`${epoch}\n`, 'latin1');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await fsp.rename(temp, path);
    await dirHandle.sync();
    return identityOf(await fsp.stat(path));
  } catch (err) {
    throw new LockIOError(`Cannot record epoch ${epoch} in ${path}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/**
 * The check a writer with an epoch makes before anything it does counts: its guard lock is
 * still valid and the `epoch` file is still the one it wrote. Synchronous and cheap (the
 * lock's own checks, a few `fstat`/`lstat` calls, and one `stat`).
 */
export class EpochFence {
  readonly #dir: string;
  readonly #epoch: number;
  readonly #lock: Lock;
  readonly #path: string;
  readonly #identity: FileIdentity;
  constructor(dir: string, epoch: number, lock: Lock, identity: FileIdentity) {
    this.#dir = dir;
    this.#epoch = epoch;
    this.#lock = lock;
    this.#path = join(dir, EPOCH_FILE);
    this.#identity = identity;
  }

  get epoch(): number {
    return this.#epoch;
  }

  /** Throws {@link FencedError} (saying why, for `what`) when this writer has been deposed. */
  check(what: string): void {
    try {
      this.#lock.ensureValid();
    } catch (err) {
      throw new FencedError(
        `Row storage ${this.#dir} (epoch ${this.#epoch}) refused to ${what}: its guard lock ` +
          `write.lock is no longer held (taken over by a newer master?): ${(err as Error).message}`,
        { cause: err },
      );
    }
    let changed: string | undefined;
    try {
      const st = statSync(this.#path, { throwIfNoEntry: false });
      if (st === undefined) changed = 'it is gone';
      else if (!sameIdentity(identityOf(st), this.#identity)) changed = 'it was replaced';
    } catch (err) {
      changed = `it cannot be read (${(err as Error).message})`;
    }
    if (changed !== undefined) {
      throw new FencedError(
        `Row storage ${this.#dir} (epoch ${this.#epoch}) refused to ${what}: the epoch file ` +
          `is no longer the one it wrote (${changed}): a newer master opened the storage`,
      );
    }
  }
}
