/**
 * Row storage recovery: what is on disk and what of it counts. {@link readState} reads a
 * storage directory back without changing it (the newest intact snapshot whose segments are
 * present, the segments that count by epoch and seal, and what a crash left behind);
 * {@link repair} then makes the directory match that read (temporary files, torn tails,
 * obsolete and void files removed); {@link refuseNewer} refuses a storage a newer master owns.
 * `RowStorage.open` runs them in that order; nothing here appends or checkpoints.
 */
import { constants } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import { FencedError, LockIOError } from '../core/errors.js';
import {
  parseSegmentName,
  readFileHeader,
  repairSegment,
  type ScannedSegment,
  scanSegment,
  segmentName,
} from './log-segment.js';
import { FILE_HEADER_BYTES, type FileHeader, SEGMENT_MAGIC, type Seal } from './record-codec.js';
import type { Recovered } from './region-storage.js';
import { parseSnapshotName, readSnapshot, snapshotName, TEMP_SUFFIX } from './snapshot-file.js';
import { type EpochFence, readDiskEpoch } from './storage-epoch.js';

/** Refuses (`FencedError`) a storage that carries an epoch larger than `epoch`. */
export async function refuseNewer(dir: string, epoch: number): Promise<void> {
  const onDisk = await readDiskEpoch(dir);
  if (onDisk > epoch) {
    throw new FencedError(
      `Row storage ${dir} carries epoch ${onDisk}, newer than ` +
        `${epoch === 0 ? 'a standalone open (no epoch)' : `epoch ${epoch}`}: refusing to open it`,
    );
  }
}

export interface RecoveredState {
  recovered: Recovered;
  coveredFrom: number;
  nextSeq: number;
  /** What {@link repair} has to do: temporary files, damaged last segments, obsolete files. */
  temps: string[];
  damaged: { path: string; seq: number; scanned: ScannedSegment; epoch: number }[];
  /** Valid length of each live segment. */
  ends: [number, number][];
  obsolete: string[];
  /** Where this read stopped: the last segment that counts and its valid length. */
  seal: Seal | undefined;
}

/**
 * Which segments count, from their headers (`undefined`: unreadable, judged when read):
 *  - a segment whose epoch is below that of a lower-numbered one does not count (a deposed
 *    writer created it after a newer master's segment);
 *  - the seal in a counting segment F (`sealSeq` P, `sealEnd` L), newest first: segments
 *    numbered between P and F do not count and may be missing, and P counts up to byte L.
 */
function judgeSegments(headers: Map<number, FileHeader | undefined>): {
  voids: Set<number>;
  gaps: [number, number][];
  caps: Map<number, number>;
} {
  const sorted = [...headers.keys()].sort((a, b) => a - b);
  const voids = new Set<number>();
  let top = 0;
  for (const seq of sorted) {
    const header = headers.get(seq);
    if (header === undefined) continue;
    if (header.epoch < top) voids.add(seq);
    else top = header.epoch;
  }
  const gaps: [number, number][] = [];
  const caps = new Map<number, number>();
  for (let i = sorted.length - 1; i >= 0; i--) {
    const seq = sorted[i] as number;
    const seal = voids.has(seq) ? undefined : headers.get(seq)?.seal;
    if (seal === undefined) continue;
    gaps.push([seal.seq, seq]);
    for (const other of sorted) if (other > seal.seq && other < seq) voids.add(other);
    caps.set(seal.seq, seal.end);
  }
  return { voids, gaps, caps };
}

/**
 * Finds the state on disk, changing nothing: the newest snapshot that reads back intact and
 * whose segments are all present (an older one only if a newer one is damaged and the older
 * one's segments still exist), then its segments in order, and what a crash left to repair.
 * Epochs and seals (see {@link judgeSegments}) decide which segments count; a snapshot counts
 * only if its own segment does and has its epoch (else a deposed writer published it late).
 */
export async function readState(dir: string): Promise<RecoveredState> {
  const names = await fsp.readdir(dir);
  const temps: string[] = [];
  const damaged: RecoveredState['damaged'] = [];
  const ends: [number, number][] = [];
  const obsolete: string[] = [];
  const segments = new Set<number>();
  const snapshots: number[] = [];
  let maxSeq = 0;
  for (const name of names) {
    if (name.endsWith(TEMP_SUFFIX) && (name.startsWith('snapshot-') || name.startsWith('log-'))) {
      temps.push(join(dir, name));
      continue;
    }
    const seg = parseSegmentName(name);
    if (seg !== undefined) segments.add(seg);
    const snap = parseSnapshotName(name);
    if (snap !== undefined) snapshots.push(snap);
    maxSeq = Math.max(maxSeq, seg ?? 0, snap ?? 0);
  }
  const headers = new Map<number, FileHeader | undefined>();
  for (const seq of segments)
    headers.set(seq, await readFileHeader(join(dir, segmentName(seq)), SEGMENT_MAGIC));
  const { voids, gaps, caps } = judgeSegments(headers);
  const counts = (seq: number) => segments.has(seq) && !voids.has(seq);
  const inGap = (seq: number) => gaps.some(([p, f]) => seq > p && seq < f);
  const lastSegment = Math.max(0, ...[...segments].filter(counts));
  /** The first missing segment from `from` to the last one, if any. */
  const missingFrom = (from: number): number | undefined => {
    if (segments.size === 0) return from === 1 ? undefined : from;
    if (!segments.has(from)) return from;
    for (let s = from + 1; s <= lastSegment; s++) if (!segments.has(s) && !inGap(s)) return s;
    return undefined;
  };

  snapshots.sort((a, b) => b - a);
  const voidSnapshots: number[] = [];
  let chosen: { seq: number; records: Buffer[]; epoch: number } | undefined;
  let firstError: unknown;
  for (const seq of snapshots) {
    if (segments.has(seq) && voids.has(seq)) {
      voidSnapshots.push(seq);
      continue;
    }
    const missing = missingFrom(seq);
    if (missing !== undefined) {
      firstError ??= new LockIOError(
        `Row storage ${dir}: log segment ${segmentName(missing)} is missing (needed after ${snapshotName(seq)})`,
      );
      continue;
    }
    try {
      const snapshot = await readSnapshot(join(dir, snapshotName(seq)), seq);
      const segmentEpoch = headers.get(seq)?.epoch;
      if (segmentEpoch !== undefined && segmentEpoch !== snapshot.epoch) {
        voidSnapshots.push(seq);
        continue;
      }
      chosen = { seq, records: snapshot.records, epoch: snapshot.epoch };
      break;
    } catch (err) {
      firstError ??= err;
    }
  }
  if (chosen === undefined && firstError !== undefined) throw firstError;
  const from = chosen?.seq ?? 1;
  if (chosen === undefined) {
    const missing = missingFrom(1);
    if (missing !== undefined) {
      throw new LockIOError(
        `Row storage ${dir}: log segment ${segmentName(missing)} is missing and there is no snapshot`,
      );
    }
  }

  const log_: Uint8Array[] = [];
  let seal: Seal | undefined;
  let epochSoFar = chosen?.epoch ?? 0;
  for (let seq = from; seq <= lastSegment; seq++) {
    if (!counts(seq)) continue; // in a sealed gap, or void
    const path = join(dir, segmentName(seq));
    let buf: Buffer;
    try {
      buf = await fsp.readFile(path, { flag: constants.O_RDONLY | constants.O_NOFOLLOW });
    } catch (err) {
      throw new LockIOError(`Cannot read log segment ${path}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    const cap = caps.get(seq);
    if (cap !== undefined) {
      if (buf.length < cap) {
        throw new LockIOError(
          `Log segment ${path} is ${buf.length} bytes, shorter than the ${cap} bytes a later ` +
            'segment sealed it at: records an open replayed are gone',
        );
      }
      buf = buf.subarray(0, cap); // what a later writer appended after the seal never counts
    }
    const scanned = scanSegment(buf, path, seq, seq === lastSegment && cap === undefined);
    if (scanned.torn || scanned.headerless) {
      damaged.push({ path, seq, scanned, epoch: epochSoFar });
    }
    for (const record of scanned.records) log_.push(record);
    const end = scanned.headerless ? FILE_HEADER_BYTES : scanned.end;
    ends.push([seq, end]);
    seal = { seq, end };
    epochSoFar = Math.max(epochSoFar, scanned.header?.epoch ?? 0);
  }

  // Files the newest checkpoint made obsolete (a crash interrupted its deletions), and files
  // that never count: segments voided by a seal or above the last one that counts, snapshots
  // of a deposed writer.
  for (const seq of segments) {
    if (seq < from || (voids.has(seq) && (inGap(seq) || seq > lastSegment))) {
      obsolete.push(join(dir, segmentName(seq)));
    }
  }
  for (const seq of snapshots) {
    if (seq < from || voidSnapshots.includes(seq)) obsolete.push(join(dir, snapshotName(seq)));
  }
  return {
    recovered: { snapshot: chosen?.records ?? [], log: log_ },
    coveredFrom: from,
    nextSeq: maxSeq + 1,
    temps,
    damaged,
    ends,
    obsolete,
    seal,
  };
}

/**
 * Repairs what {@link readState} found a crash left (temporary files, a torn tail, a
 * headerless last segment, files an interrupted checkpoint should have deleted, files that
 * never count), fsyncs the directory after. With an epoch, each change is preceded by the
 * fence's check (a newer master may have opened the storage meanwhile).
 */
export async function repair(
  state: RecoveredState,
  dirHandle: FileHandle,
  fence: EpochFence | undefined,
) {
  let changed = false;
  for (const path of state.temps) {
    fence?.check(`delete ${path}`);
    await fsp.rm(path, { force: true });
    changed = true;
  }
  for (const { path, seq, scanned, epoch } of state.damaged) {
    fence?.check(`repair ${path}`);
    await repairSegment(path, seq, scanned, epoch);
    changed = true;
  }
  for (const path of state.obsolete) {
    fence?.check(`delete ${path}`);
    await fsp.rm(path, { force: true });
    changed = true;
  }
  if (changed) await dirHandle.sync();
}
