/**
 * Epochs in the row storage, in one process: the format (version 1 files still read, version 2
 * headers with epoch and seal), refusals that change nothing, what recovery ignores (bytes a
 * deposed writer appended after the seal, its segments and snapshots), the checks made per
 * batch, and the options. The multi-process takeover is in storage-epoch-takeover.test.ts.
 */
import assert from 'node:assert/strict';
import {
  appendFileSync,
  existsSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { crc32 } from '../../src/rows/crc32.js';
import { Get, Put, Region } from '../../src/rows/index.js';
import { scanSegment, segmentName } from '../../src/rows/log-segment.js';
import {
  encodeFileHeader,
  encodeFrame,
  encodeSnapshotTrailer,
  FILE_HEADER_BYTES,
  parseFileHeader,
  SEGMENT_MAGIC,
  SNAPSHOT_MAGIC,
} from '../../src/rows/record-codec.js';
import { RowStorage } from '../../src/rows/row-storage.js';
import { snapshotName, writeSnapshotTemp } from '../../src/rows/snapshot-file.js';
import { EPOCH_FILE } from '../../src/rows/storage-epoch.js';
import { tempDir } from '../helpers.js';

const enc = (s: string) => Buffer.from(s);
const strings = (records: Uint8Array[]) => records.map((r) => Buffer.from(r).toString());
const segmentFiles = (dir: string) =>
  readdirSync(dir)
    .filter((n) => n.startsWith('log-'))
    .sort();

/** Every file in `dir` with its bytes (hex) and inode, sorted by name. */
function fingerprint(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    out[name] = `${statSync(path).ino}:${readFileSync(path).toString('hex')}`;
  }
  return out;
}

/** A format version 1 header, written by hand in the old layout (20 bytes). */
function v1Header(magic: string, seq: number): Buffer {
  const buf = Buffer.alloc(20);
  buf.write(magic, 0, 4, 'latin1');
  buf.writeUInt32LE(1, 4);
  buf.writeBigUInt64LE(BigInt(seq), 8);
  buf.writeUInt32LE(crc32(buf.subarray(0, 16)), 16);
  return buf;
}

/** Frames of one write batch (each frame's `back` points at the batch's first frame). */
function batch(records: string[]): Buffer {
  const frames: Buffer[] = [];
  let at = 0;
  for (const r of records) {
    const frame = encodeFrame(enc(r), at);
    frames.push(frame);
    at += frame.length;
  }
  return Buffer.concat(frames);
}

function headerOf(path: string, magic = SEGMENT_MAGIC) {
  const header = parseFileHeader(readFileSync(path), magic);
  assert.ok(!('error' in header), JSON.stringify(header));
  return header;
}

async function opened(dir: string, epoch?: number) {
  return RowStorage.open(dir, epoch === undefined ? {} : { epoch });
}

async function reopen(dir: string, epoch?: number) {
  const { storage, recovered } = await opened(dir, epoch);
  await storage.close();
  return { snapshot: strings(recovered.snapshot), log: strings(recovered.log) };
}

/** What a newer master does to the epoch file, without the lock takeover. */
function replaceEpochFile(dir: string, epoch: number): void {
  writeFileSync(join(dir, 'epoch.other'), `${epoch}\n`);
  renameSync(join(dir, 'epoch.other'), join(dir, EPOCH_FILE));
}

test('format version 1 files (written by hand in the old layout) are still read', async () => {
  for (const epoch of [undefined, 7]) {
    using tmp = tempDir();
    // Snapshot 2 (covers segment 1, deleted), segment 2 (two batches), segment 3 with a torn
    // tail: what the old code leaves after a checkpoint and a crash.
    writeFileSync(
      join(tmp.path, snapshotName(2)),
      Buffer.concat([
        v1Header(SNAPSHOT_MAGIC, 2),
        encodeFrame(enc('s1'), 0),
        encodeFrame(enc('s2'), 0),
        encodeSnapshotTrailer(2),
      ]),
    );
    writeFileSync(
      join(tmp.path, segmentName(2)),
      Buffer.concat([v1Header(SEGMENT_MAGIC, 2), batch(['a', 'b']), batch(['c'])]),
    );
    const torn = batch(['never acknowledged']).subarray(0, 15);
    writeFileSync(
      join(tmp.path, segmentName(3)),
      Buffer.concat([v1Header(SEGMENT_MAGIC, 3), batch(['d']), torn]),
    );
    const { storage, recovered } = await opened(tmp.path, epoch);
    assert.deepEqual(strings(recovered.snapshot), ['s1', 's2']);
    assert.deepEqual(strings(recovered.log), ['a', 'b', 'c', 'd']);
    await storage.append(enc('e'));
    // Every file written since is version 2, with the epoch (and the takeover's seal).
    const segment4 = headerOf(join(tmp.path, segmentName(4)));
    assert.equal(segment4.version, 2);
    assert.equal(segment4.epoch, epoch ?? 0);
    assert.deepEqual(
      segment4.seal,
      epoch === undefined ? undefined : { seq: 3, end: 20 + batch(['d']).length },
    );
    await storage.checkpoint(() => [enc('s3')]);
    await storage.append(enc('f'));
    await storage.close();
    const snapshot = headerOf(join(tmp.path, snapshotName(5)), SNAPSHOT_MAGIC);
    assert.equal(snapshot.version, 2);
    assert.equal(snapshot.epoch, epoch ?? 0);
    assert.deepEqual(await reopen(tmp.path, epoch), { snapshot: ['s3'], log: ['f'] });
  }
});

test('an open with a smaller epoch (or none) is refused with FENCED and changes nothing (conformance M4)', async () => {
  using tmp = tempDir();
  const first = await opened(tmp.path, 5);
  await first.storage.append(enc('a'));
  await first.storage.close();
  assert.equal(readFileSync(join(tmp.path, EPOCH_FILE), 'latin1'), '5\n');
  const refuse = async (open: () => Promise<unknown>, what: string) => {
    const before = fingerprint(tmp.path);
    await assert.rejects(open(), (err: Error & { code?: string }) => {
      assert.equal(err.code, 'FENCED', `${what}: ${err.message}`);
      assert.match(err.message, /carries epoch 5/);
      return true;
    });
    assert.deepEqual(fingerprint(tmp.path), before, `${what} changed the directory`);
  };
  await refuse(() => opened(tmp.path, 4), 'epoch 4');
  await refuse(() => opened(tmp.path), 'a standalone open');
  await refuse(() => Region.open({ families: ['f'], dir: tmp.path, epoch: 3 }), 'Region epoch 3');
  await refuse(() => Region.open({ families: ['f'], dir: tmp.path }), 'a standalone Region');
  // The headers carry the epoch too: an epoch file that went back does not let an older in.
  replaceEpochFile(tmp.path, 1);
  await refuse(() => opened(tmp.path, 4), 'epoch 4 with the epoch file saying 1');
  // The same epoch (the master restarting) and a larger one open.
  assert.deepEqual(await reopen(tmp.path, 5), { snapshot: [], log: ['a'] });
  assert.deepEqual(await reopen(tmp.path, 6), { snapshot: [], log: ['a'] });
  assert.equal(readFileSync(join(tmp.path, EPOCH_FILE), 'latin1'), '6\n');
});

test('recovery ignores what a deposed writer added after the seal: bytes, segments, snapshots (conformance M4)', async () => {
  using tmp = tempDir();
  const one = await opened(tmp.path, 1);
  await one.storage.append(enc('a'));
  await one.storage.append(enc('b'));
  await one.storage.close();
  const two = await opened(tmp.path, 2);
  await two.storage.append(enc('c'));
  await two.storage.close();
  // Segment 2 (epoch 2) seals segment 1 at the length read.
  const sealed = join(tmp.path, segmentName(1));
  assert.deepEqual(headerOf(join(tmp.path, segmentName(2))).seal, {
    seq: 1,
    end: statSync(sealed).size,
  });
  // The deposed epoch-1 writer resumes: a whole batch appended to its sealed segment, a new
  // segment 3 of epoch 1 (numbered after epoch 2's), and a snapshot 2 of epoch 1.
  appendFileSync(sealed, batch(['late-1', 'late-2']));
  writeFileSync(
    join(tmp.path, segmentName(3)),
    Buffer.concat([encodeFileHeader(SEGMENT_MAGIC, 3, 1), batch(['stale'])]),
  );
  const temp = await writeSnapshotTemp(join(tmp.path, snapshotName(2)), 2, 1, [enc('bogus')]);
  renameSync(temp, join(tmp.path, snapshotName(2)));

  const { storage, recovered } = await opened(tmp.path, 3);
  assert.deepEqual(strings(recovered.snapshot), []);
  assert.deepEqual(strings(recovered.log), ['a', 'b', 'c']);
  // The stale segment and snapshot are deleted; the sealed segment stays as it is.
  assert.ok(!existsSync(join(tmp.path, segmentName(3))), 'stale segment kept');
  assert.ok(!existsSync(join(tmp.path, snapshotName(2))), 'stale snapshot kept');
  await storage.append(enc('d'));
  await storage.close();
  // The new segment 4 seals segment 2; segment 3's number lies in the gap it leaves.
  assert.deepEqual(headerOf(join(tmp.path, segmentName(4))).seal?.seq, 2);
  assert.deepEqual(await reopen(tmp.path, 3), { snapshot: [], log: ['a', 'b', 'c', 'd'] });
});

test('segments in a seal gap, and a sealed segment cut short, are judged as they must be (conformance M4)', async () => {
  // Hand-made: segment 1 (epoch 1: a, b, then a late batch), segment 2 (epoch 1, created by
  // the deposed writer after the takeover read), segment 3 (epoch 2, sealing 1 at a, b).
  using tmp = tempDir();
  const s1 = Buffer.concat([encodeFileHeader(SEGMENT_MAGIC, 1, 1), batch(['a', 'b'])]);
  writeFileSync(join(tmp.path, segmentName(1)), Buffer.concat([s1, batch(['late'])]));
  writeFileSync(
    join(tmp.path, segmentName(2)),
    Buffer.concat([encodeFileHeader(SEGMENT_MAGIC, 2, 1), batch(['gap'])]),
  );
  const s3 = Buffer.concat([
    encodeFileHeader(SEGMENT_MAGIC, 3, 2, { seq: 1, end: s1.length }),
    batch(['c']),
  ]);
  writeFileSync(join(tmp.path, segmentName(3)), s3);
  assert.deepEqual(await reopen(tmp.path, 2), { snapshot: [], log: ['a', 'b', 'c'] });
  assert.deepEqual(segmentFiles(tmp.path), [segmentName(1), segmentName(3), segmentName(4)]);
  assert.deepEqual(await reopen(tmp.path, 2), { snapshot: [], log: ['a', 'b', 'c'] });
  // Bytes an open replayed that are gone: an IO_ERROR, not a silent loss.
  writeFileSync(join(tmp.path, segmentName(1)), s1.subarray(0, s1.length - 3));
  await assert.rejects(opened(tmp.path, 2), (err: Error & { code?: string }) => {
    assert.equal(err.code, 'IO_ERROR');
    assert.match(err.message, /shorter than the \d+ bytes a later segment sealed it at/);
    return true;
  });
});

test('every append batch is checked: a replaced epoch file or a lost lock fences, for good (conformance M5)', async () => {
  for (const how of ['epoch file replaced', 'write.lock deleted']) {
    using tmp = tempDir();
    const { storage } = await opened(tmp.path, 1);
    await Promise.all([storage.append(enc('a')), storage.append(enc('b'))]);
    const checks = storage.stats.fenceChecks;
    assert.ok(checks >= 2, `checks: ${checks}`); // the segment's creation and its batches
    if (how === 'write.lock deleted') rmSync(join(tmp.path, 'write.lock'));
    else replaceEpochFile(tmp.path, 2);
    const fenced = (err: Error & { code?: string }) => {
      assert.equal(err.code, 'FENCED', `${how}: ${err.message}`);
      return true;
    };
    await Promise.all([
      assert.rejects(storage.append(enc('c')), fenced),
      assert.rejects(storage.append(enc('d')), fenced),
    ]);
    await assert.rejects(storage.append(enc('e')), fenced);
    await assert.rejects(
      storage.checkpoint(() => [enc('s')]),
      fenced,
    );
    await storage.close();
    const present = await reopen(tmp.path, 3);
    // c and d were written before their check failed: present or absent, never acknowledged.
    assert.deepEqual(present.log.slice(0, 2), ['a', 'b']);
    assert.ok(!present.log.includes('e'), present.log.join());
  }
});

test('checks happen before publishing a snapshot and before deleting the files it covers', async () => {
  using tmp = tempDir();
  const { storage } = await opened(tmp.path, 1);
  await storage.append(enc('a'));
  // The capture runs in the checkpoint's first tick, before the publish: replace there.
  await assert.rejects(
    storage.checkpoint(() => {
      replaceEpochFile(tmp.path, 2);
      return [enc('snap')];
    }),
    { code: 'FENCED' },
  );
  await storage.close();
  assert.deepEqual(
    readdirSync(tmp.path).filter((n) => n.startsWith('snapshot-')),
    [],
    'a fenced checkpoint published its snapshot',
  );
  assert.deepEqual(await reopen(tmp.path, 2), { snapshot: [], log: ['a'] });
});

test('standalone storage makes no checks and writes no epoch file', async () => {
  using tmp = tempDir();
  const { storage } = await opened(tmp.path);
  await Promise.all([storage.append(enc('a')), storage.append(enc('b'))]);
  assert.equal(storage.stats.fenceChecks, 0);
  assert.equal(storage.epoch, 0);
  await storage.close();
  assert.ok(!existsSync(join(tmp.path, EPOCH_FILE)));
  assert.equal(headerOf(join(tmp.path, segmentName(1))).epoch, 0);
  assert.equal(readFileSync(join(tmp.path, segmentName(1))).length, FILE_HEADER_BYTES + 26);
});

test('epoch options are checked', async () => {
  using tmp = tempDir();
  for (const epoch of [0, -1, 1.5, 2 ** 53, '3', Number.NaN, null]) {
    await assert.rejects(
      RowStorage.open(tmp.path, { epoch } as unknown as { epoch: number }),
      (err: Error & { code?: string }) => {
        assert.equal(err.code, 'INVALID_ARGUMENT', String(epoch));
        assert.match(err.message, /epoch/);
        return true;
      },
    );
    await assert.rejects(
      Region.open({ families: ['f'], dir: tmp.path, epoch } as unknown as { families: ['f'] }),
      { code: 'INVALID_ARGUMENT' },
    );
  }
  await assert.rejects(Region.open({ families: ['f'], epoch: 1 }), /epoch needs dir/);
  assert.deepEqual(readdirSync(tmp.path), []);
});

test('a region passes FENCED through: the write, every later one, and the deposed epoch at open (conformance M4, M5)', async () => {
  using tmp = tempDir();
  const region = await Region.open({ families: ['f'], dir: tmp.path, epoch: 1 });
  await region.put(new Put('r').add('f', 'q', 'before'));
  replaceEpochFile(tmp.path, 2);
  await assert.rejects(region.put(new Put('r').add('f', 'q', 'after')), { code: 'FENCED' });
  await assert.rejects(region.put(new Put('s').add('f', 'q', 'later')), { code: 'FENCED' });
  // Reads go on: what they see was acknowledged.
  const seen = await region.get(new Get('r'));
  assert.equal(seen.getValue('f', 'q')?.toString(), 'before');
  await region.close();
  await assert.rejects(Region.open({ families: ['f'], dir: tmp.path, epoch: 1 }), {
    code: 'FENCED',
  });
  const next = await Region.open({ families: ['f'], dir: tmp.path, epoch: 2 });
  // 'after' was written before its check failed, and this open read it: present or absent,
  // it was refused, never acknowledged. 'later' never reached the log (poisoned).
  const r = (await next.get(new Get('r'))).getValue('f', 'q')?.toString();
  assert.ok(r === 'before' || r === 'after', String(r));
  assert.equal((await next.get(new Get('s'))).isEmpty, true);
  await next.close();
});

test('scanSegment reads version 1 and 2 headers alike', () => {
  const v1 = Buffer.concat([v1Header(SEGMENT_MAGIC, 9), batch(['x', 'y'])]);
  const v2 = Buffer.concat([encodeFileHeader(SEGMENT_MAGIC, 9, 4), batch(['x', 'y'])]);
  for (const buf of [v1, v2]) {
    const scanned = scanSegment(buf, 'test', 9, true);
    assert.deepEqual(strings(scanned.records), ['x', 'y']);
    assert.equal(scanned.end, buf.length);
  }
  assert.equal(scanSegment(v2, 'test', 9, true).header?.epoch, 4);
  // A version 2 header cut short by a crash is headerless, like a version 1 one.
  assert.equal(scanSegment(v2.subarray(0, 30), 'test', 9, true).headerless, true);
});
