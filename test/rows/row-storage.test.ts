import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  appendFileSync,
  closeSync,
  copyFileSync,
  fdatasyncSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import * as zlib from 'node:zlib';
import { LockObtainFailedError } from '../../src/core/errors.js';
import { crc32, tableCrc32 } from '../../src/rows/crc32.js';
import { encodeFrame, FILE_HEADER_BYTES } from '../../src/rows/record-codec.js';
import { RowStorage } from '../../src/rows/row-storage.js';
import { eventually, exitOf, fixture, orphanProof, tempDir, waitForLine } from '../helpers.js';
import { runWithFileSizeLimit } from './run-with-file-size-limit.js';

const enc = (s: string) => Buffer.from(s);
const strings = (records: Uint8Array[]) => records.map((r) => Buffer.from(r).toString());
const files = (dir: string) =>
  readdirSync(dir)
    .filter((n) => !n.startsWith('write.lock'))
    .sort();
const segments = (dir: string) => files(dir).filter((n) => n.startsWith('log-'));
const lastSegment = (dir: string) => join(dir, segments(dir).at(-1) as string);

async function reopen(dir: string) {
  const opened = await RowStorage.open(dir);
  await opened.storage.close();
  return opened.recovered;
}

/** Writes records a..n in separate sessions so the *last* segment holds them, closes. */
async function storageWith(dir: string, records: string[], batches: 'one' | 'each' = 'each') {
  const { storage } = await RowStorage.open(dir);
  if (batches === 'one') await Promise.all(records.map((r) => storage.append(enc(r))));
  else for (const r of records) await storage.append(enc(r));
  await storage.close();
}

test('crc32: the table fallback matches zlib', () => {
  const data = Buffer.from('The quick brown fox jumps over the lazy dog');
  assert.equal(tableCrc32(data), 0x414fa339);
  assert.equal(crc32(data), 0x414fa339);
  if (typeof zlib.crc32 === 'function') {
    const random = Buffer.from(Array.from({ length: 5000 }, (_, i) => (i * 7919) & 0xff));
    assert.equal(
      tableCrc32(random.subarray(100), tableCrc32(random.subarray(0, 100))),
      zlib.crc32(random),
    );
  }
});

test('roundtrip: records come back in append order, byte for byte', async () => {
  using tmp = tempDir();
  const { storage, recovered } = await RowStorage.open(tmp.path);
  assert.deepEqual(recovered, { snapshot: [], log: [] });
  const records = [enc('one'), new Uint8Array(0), Buffer.alloc(100_000, 7), enc('four')];
  await Promise.all(records.map((r) => storage.append(r)));
  await storage.append(enc('five'));
  await storage.close();
  const again = await reopen(tmp.path);
  assert.deepEqual(again.snapshot, []);
  assert.deepEqual(
    again.log.map((r) => Buffer.from(r)),
    [...records, enc('five')].map((r) => Buffer.from(r)),
  );
  // The caller's buffer was copied when append returned.
  const { storage: s2 } = await RowStorage.open(tmp.path);
  const mutable = enc('before');
  const pending = s2.append(mutable);
  mutable.write('after!');
  await pending;
  await s2.close();
  assert.equal(strings((await reopen(tmp.path)).log).at(-1), 'before');
});

test('recovery gives the snapshot, then the log appended after it; old files are deleted', async () => {
  using tmp = tempDir();
  const { storage } = await RowStorage.open(tmp.path);
  await storage.append(enc('a'));
  const b = storage.append(enc('b'));
  let captured = false;
  const done = storage.checkpoint(() => {
    captured = true;
    return [enc('snap-a'), enc('snap-b')];
  });
  assert.ok(captured, 'capture runs synchronously inside checkpoint()');
  const c = storage.append(enc('c')); // after the roll: goes to the log, not the snapshot
  assert.ok(storage.logBytes > 0 && storage.logBytes < 100);
  await Promise.all([b, done, c]);
  assert.equal(storage.stats.checkpoints, 1);
  await storage.close();
  const names = files(tmp.path);
  assert.equal(names.filter((n) => n.endsWith('.snap')).length, 1);
  const snapSeq = (names.find((n) => n.endsWith('.snap')) as string).slice(9, 25);
  assert.ok(
    segments(tmp.path).every((n) => n.slice(4, 20) >= snapSeq),
    names.join(),
  );
  const recovered = await reopen(tmp.path);
  assert.deepEqual(strings(recovered.snapshot), ['snap-a', 'snap-b']);
  assert.deepEqual(strings(recovered.log), ['c']);
});

test('segments roll at segmentBytes; logBytes counts them until a checkpoint', async () => {
  using tmp = tempDir();
  const { storage } = await RowStorage.open(tmp.path, { segmentBytes: 4096 });
  const record = Buffer.alloc(1000, 1);
  for (let i = 0; i < 20; i++) await storage.append(record);
  assert.equal(segments(tmp.path).length, 4, segments(tmp.path).join()); // 5 records of 1012 B each
  const before = storage.logBytes;
  assert.ok(before >= 20 * 1012, String(before));
  await storage.checkpoint(() => [enc('s')]);
  assert.equal(storage.logBytes, FILE_HEADER_BYTES); // the new segment's header only
  assert.equal(segments(tmp.path).length, 1);
  await storage.append(enc('x'));
  await storage.close();
  const recovered = await reopen(tmp.path);
  assert.deepEqual(strings(recovered.snapshot), ['s']);
  assert.deepEqual(strings(recovered.log), ['x']);
  const fresh = await RowStorage.open(tmp.path, { segmentBytes: 4096 });
  assert.ok(fresh.storage.logBytes > FILE_HEADER_BYTES && fresh.storage.logBytes < 150);
  await fresh.storage.close();
});

test('with fsync, zeros are written ahead of the records, and a segment loses them when it closes', async () => {
  using tmp = tempDir();
  const segmentBytes = 8192;
  const { storage } = await RowStorage.open(tmp.path, { segmentBytes });
  const record = Buffer.alloc(1000, 1);
  for (let i = 0; i < 20; i++) await storage.append(record);
  const names = segments(tmp.path);
  // A segment rolls once it holds segmentBytes: 9 records of 1012 B each, then 9, then 2.
  assert.equal(names.length, 3, names.join());
  const size = (name: string) => statSync(join(tmp.path, name)).size;
  for (const name of names.slice(0, -1)) {
    assert.equal(size(name), FILE_HEADER_BYTES + 9 * 1012, `${name}: closed, truncated`);
  }
  const active = names.at(-1) as string;
  assert.equal(size(active), segmentBytes, `${active}: zeros written up to where it rolls`);
  await storage.close();
  assert.equal(size(active), FILE_HEADER_BYTES + 2 * 1012, `${active}: truncated by close`);
  assert.equal((await reopen(tmp.path)).log.length, 20);

  using none = tempDir();
  const unsynced = await RowStorage.open(none.path, { durability: 'none' });
  for (let i = 0; i < 3; i++) await unsynced.storage.append(record);
  assert.equal(statSync(lastSegment(none.path)).size, FILE_HEADER_BYTES + 3 * 1012);
  await unsynced.storage.close();
});

test('a torn tail (partial frame, zeros, garbage) is dropped and truncated on disk', async () => {
  for (const tail of [
    encodeFrame(enc('never acknowledged'), 0).subarray(0, 15),
    Buffer.alloc(4096),
    Buffer.from('garbage that is not a frame at all, honestly'),
  ]) {
    using tmp = tempDir();
    await storageWith(tmp.path, ['r1', 'r2', 'r3']);
    const path = lastSegment(tmp.path);
    await storageWith(tmp.path, ['r4', 'r5'], 'one');
    const last = lastSegment(tmp.path);
    assert.notEqual(path, last);
    const size = statSync(last).size;
    appendFileSync(last, tail);
    const recovered = await reopen(tmp.path);
    assert.deepEqual(strings(recovered.log), ['r1', 'r2', 'r3', 'r4', 'r5']);
    assert.equal(statSync(last).size, size, 'truncated to the last intact record');
  }
});

test('a power-loss hole inside the final batch drops that batch from the hole on', async () => {
  using tmp = tempDir();
  await storageWith(tmp.path, ['r1', 'r2']);
  const last = lastSegment(tmp.path);
  const size = statSync(last).size;
  // One batch of three frames (back = distance to the batch start), the middle one lost.
  const f1 = encodeFrame(enc('b1'), 0);
  const f2 = encodeFrame(enc('b2'), f1.length);
  const f3 = encodeFrame(enc('b3'), f1.length + f2.length);
  f2.fill(0, 0, f2.length);
  appendFileSync(last, Buffer.concat([f1, f2, f3]));
  const recovered = await reopen(tmp.path);
  assert.deepEqual(strings(recovered.log), ['r1', 'r2', 'b1']);
  assert.equal(statSync(last).size, size + f1.length);
});

test('corruption before a later intact batch is an IO_ERROR naming file and offset', async () => {
  using tmp = tempDir();
  const { storage } = await RowStorage.open(tmp.path);
  for (const r of ['first', 'second', 'third']) await storage.append(enc(r)); // three batches
  await storage.close();
  const last = lastSegment(tmp.path);
  const data = readFileSync(last);
  const at = data.indexOf('second');
  data[at] = 'S'.charCodeAt(0);
  writeFileSync(last, data);
  const frameOffset = at - 12;
  await assert.rejects(RowStorage.open(tmp.path), (err: Error & { code?: string }) => {
    assert.equal(err.code, 'IO_ERROR');
    assert.ok(err.message.includes(last), err.message);
    assert.match(err.message, new RegExp(`offset ${frameOffset}\\b`));
    return true;
  });
  // Nothing was truncated, and the lock was released.
  assert.equal(readFileSync(last).length, data.length);
  await assert.rejects(RowStorage.open(tmp.path), /offset/);
});

test('damage in a segment that is not the last one is an IO_ERROR, even at its end', async () => {
  using tmp = tempDir();
  await storageWith(tmp.path, ['a', 'b']);
  const first = lastSegment(tmp.path);
  await storageWith(tmp.path, ['c']);
  appendFileSync(first, Buffer.from('x'));
  await assert.rejects(RowStorage.open(tmp.path), (err: Error & { code?: string }) => {
    assert.equal(err.code, 'IO_ERROR');
    assert.ok(err.message.includes(first) && err.message.includes('not the last'), err.message);
    return true;
  });
});

test('a last segment left without its header by a crash is rewritten empty', async () => {
  for (const content of [Buffer.alloc(0), Buffer.from('LSWL\x01\x00'), Buffer.alloc(4096)]) {
    using tmp = tempDir();
    await storageWith(tmp.path, ['a', 'b']);
    const next = `log-${(segments(tmp.path).length + 1).toString(16).padStart(16, '0')}.wal`;
    writeFileSync(join(tmp.path, next), content);
    const recovered = await reopen(tmp.path);
    assert.deepEqual(strings(recovered.log), ['a', 'b']);
    assert.equal(statSync(join(tmp.path, next)).size, FILE_HEADER_BYTES);
    assert.deepEqual(strings((await reopen(tmp.path)).log), ['a', 'b']);
  }
});

test('a missing segment is reported, not skipped', async () => {
  using tmp = tempDir();
  await storageWith(tmp.path, ['a']);
  const first = segments(tmp.path)[0] as string;
  await storageWith(tmp.path, ['b']);
  await storageWith(tmp.path, ['c']);
  const middle = segments(tmp.path)[1] as string;
  const { rmSync } = await import('node:fs');
  rmSync(join(tmp.path, middle));
  await assert.rejects(RowStorage.open(tmp.path), new RegExp(`${middle}.*missing`));
  rmSync(join(tmp.path, first));
  assert.ok(first.startsWith('log-0000000000000001'));
});

test('crash states of a checkpoint recover correctly', async () => {
  using tmp = tempDir();
  using save = tempDir();
  await storageWith(tmp.path, ['a', 'b']);
  const { storage } = await RowStorage.open(tmp.path);
  await storage.checkpoint(() => [enc('snap1')]);
  await storage.append(enc('c'));
  await storage.close();
  for (const n of readdirSync(tmp.path)) copyFileSync(join(tmp.path, n), join(save.path, n));
  const oldFiles = files(save.path);

  // A new checkpoint, then put back the old snapshot and segments as if the deletions after
  // the rename never happened, plus a half-written temp file of a third checkpoint.
  const second = await RowStorage.open(tmp.path);
  assert.deepEqual(strings(second.recovered.snapshot), ['snap1']);
  await second.storage.append(enc('d'));
  await second.storage.checkpoint(() => [enc('snap2')]);
  await second.storage.append(enc('e'));
  await second.storage.close();
  for (const n of oldFiles) copyFileSync(join(save.path, n), join(tmp.path, n));
  writeFileSync(join(tmp.path, 'snapshot-00000000000000ff.snap.tmp'), 'half');
  const recovered = await reopen(tmp.path);
  assert.deepEqual(strings(recovered.snapshot), ['snap2']);
  assert.deepEqual(strings(recovered.log), ['e']);
  assert.ok(
    !files(tmp.path).some((n) => n.endsWith('.tmp') || oldFiles.includes(n)),
    files(tmp.path).join(),
  );

  // Crash before the rename: only the temp file of the new snapshot exists: the old state.
  using t2 = tempDir();
  for (const n of readdirSync(save.path)) copyFileSync(join(save.path, n), join(t2.path, n));
  writeFileSync(
    join(t2.path, 'snapshot-0000000000000009.snap.tmp'),
    readFileSync(join(save.path, oldFiles.find((n) => n.endsWith('.snap')) as string)),
  );
  const old = await reopen(t2.path);
  assert.deepEqual(strings(old.snapshot), ['snap1']);
  assert.deepEqual(strings(old.log), ['c']);
});

test('a damaged newest snapshot falls back to an older one only when its segments remain', async () => {
  using tmp = tempDir();
  await storageWith(tmp.path, ['a']);
  const { storage } = await RowStorage.open(tmp.path);
  await storage.checkpoint(() => [enc('snap1')]);
  await storage.append(enc('b'));
  await storage.close();
  const snap1 = files(tmp.path).find((n) => n.endsWith('.snap')) as string;
  const second = await RowStorage.open(tmp.path);
  // What a crash between the second snapshot's rename and the deletions would leave.
  const keep = new Map(files(tmp.path).map((n) => [n, readFileSync(join(tmp.path, n))]));
  await second.storage.checkpoint(() => [enc('snap2-is-longer')]);
  await second.storage.close();
  const snap2 = files(tmp.path).find((n) => n.endsWith('.snap')) as string;
  const data = readFileSync(join(tmp.path, snap2));
  data[data.indexOf('snap2')] = 0;
  writeFileSync(join(tmp.path, snap2), data);
  await assert.rejects(RowStorage.open(tmp.path), (err: Error & { code?: string }) => {
    assert.equal(err.code, 'IO_ERROR');
    assert.match(err.message, /Corrupt snapshot .*offset \d+: record checksum mismatch/);
    return true;
  });
  for (const [n, d] of keep) writeFileSync(join(tmp.path, n), d);
  const recovered = await reopen(tmp.path);
  assert.deepEqual(strings(recovered.snapshot), ['snap1']);
  assert.deepEqual(strings(recovered.log), ['b']);
  assert.ok(snap1 < snap2);
});

test('checkpoints run one at a time; a second call waits and then captures', async () => {
  using tmp = tempDir();
  const { storage } = await RowStorage.open(tmp.path);
  const order: string[] = [];
  await storage.append(enc('a'));
  const first = storage.checkpoint(() => {
    order.push('capture1');
    return [enc('s1')];
  });
  assert.equal(storage.checkpointing, true);
  const second = storage.checkpoint(() => {
    order.push('capture2');
    return [enc('s2')];
  });
  assert.deepEqual(order, ['capture1']);
  await storage.append(enc('b'));
  await first;
  order.push('first done');
  await second;
  assert.deepEqual(order, ['capture1', 'first done', 'capture2']);
  await storage.append(enc('b2'));
  const before = storage.logBytes;
  await assert.rejects(
    storage.checkpoint(() => {
      throw new Error('capture failed');
    }),
    /capture failed/,
  );
  // The failed checkpoint covers nothing: its log bytes count again (plus a new header).
  assert.equal(storage.logBytes, before + FILE_HEADER_BYTES);
  await storage.append(enc('c'));
  await storage.close();
  const recovered = await reopen(tmp.path);
  assert.deepEqual(strings(recovered.snapshot), ['s2']);
  assert.deepEqual(strings(recovered.log), ['b2', 'c']);
});

test('group commit: appends queued during a write+sync go out together', async () => {
  using tmp = tempDir();
  const { storage } = await RowStorage.open(tmp.path);
  const base = storage.stats;
  // 100 appends in one tick: one batch, one write, one fdatasync.
  await Promise.all(Array.from({ length: 100 }, (_, i) => storage.append(enc(`t${i}`))));
  const one = storage.stats;
  assert.equal(one.batches - base.batches, 1);
  assert.equal(one.fileSyncs - base.fileSyncs, 1);
  // A batch this large syncs on libuv's pool, never from the event loop.
  assert.equal(one.inlineSyncs - base.inlineSyncs, 0);
  // 64 concurrent appenders x 20 appends each.
  await Promise.all(
    Array.from({ length: 64 }, async (_, w) => {
      for (let i = 0; i < 20; i++) await storage.append(enc(`w${w}-${i}`));
    }),
  );
  const after = storage.stats;
  assert.equal(after.records - one.records, 1280);
  const batches = after.batches - one.batches;
  assert.ok(batches <= 60, `1280 records took ${batches} batches`);
  assert.equal(after.fileSyncs - one.fileSyncs, batches);
  await storage.close();
  const recovered = await reopen(tmp.path);
  assert.equal(recovered.log.length, 1380);
  for (let w = 0; w < 64; w++) {
    const mine = strings(recovered.log).filter((r) => r.startsWith(`w${w}-`));
    assert.deepEqual(
      mine,
      Array.from({ length: 20 }, (_, i) => `w${w}-${i}`),
    );
  }
});

test('a lone record is synced from the event loop while the device syncs fast, and is durable', async () => {
  using tmp = tempDir();
  const { storage } = await RowStorage.open(tmp.path);
  const base = storage.stats;
  for (let i = 0; i < 50; i++) await storage.append(enc(`s${i}`));
  const after = storage.stats;
  assert.equal(after.records - base.records, 50);
  assert.equal(after.fileSyncs - base.fileSyncs, 50);
  // How fast this machine's device syncs, measured the same way: where it is well under the
  // log's 2 ms bound most lone records must have been synced inline.
  const probe = join(tmp.path, 'probe');
  const fd = openSync(probe, 'w');
  const took: number[] = [];
  for (let i = 0; i < 20; i++) {
    writeSync(fd, 'x');
    const t0 = performance.now();
    fdatasyncSync(fd);
    took.push(performance.now() - t0);
  }
  closeSync(fd);
  took.sort((a, b) => a - b);
  if ((took[15] as number) < 0.5) {
    const inline = after.inlineSyncs - base.inlineSyncs;
    assert.ok(inline >= 25, `${inline} of 50 lone records synced inline`);
  }
  await storage.close();
  assert.deepEqual(
    strings((await reopen(tmp.path)).log),
    Array.from({ length: 50 }, (_, i) => `s${i}`),
  );
});

test("durability 'none' never syncs the log", async () => {
  using tmp = tempDir();
  const { storage } = await RowStorage.open(tmp.path, { durability: 'none' });
  await Promise.all(Array.from({ length: 10 }, () => storage.append(enc('x'))));
  await storage.append(enc('y'));
  assert.equal(storage.stats.fileSyncs, 0);
  assert.equal(storage.stats.records, 11);
  await storage.close();
  assert.equal((await reopen(tmp.path)).log.length, 11);
});

test('a second open fails with LOCK_OBTAIN_FAILED, in this process and from another', async () => {
  using tmp = tempDir();
  const { storage } = await RowStorage.open(tmp.path);
  await assert.rejects(RowStorage.open(tmp.path), (err: Error & { code?: string }) => {
    assert.ok(err instanceof LockObtainFailedError);
    assert.equal(err.code, 'LOCK_OBTAIN_FAILED');
    assert.ok(err.message.includes(storage.directory), err.message);
    return true;
  });
  const child = orphanProof(
    spawn(process.execPath, [fixture('rows-storage-writer'), 'open', tmp.path], {
      stdio: ['pipe', 'pipe', 'inherit'],
    }),
  );
  const line = await waitForLine(child, /^(error|opened)/);
  assert.match(line, /^error LOCK_OBTAIN_FAILED Row storage .* is already open/);
  assert.ok(line.includes(storage.directory));
  await exitOf(child);
  await storage.close();

  // And the other way round: a child holds it, this process is refused.
  const holder = orphanProof(
    spawn(process.execPath, [fixture('rows-storage-writer'), 'open', tmp.path], {
      stdio: ['pipe', 'pipe', 'inherit'],
    }),
  );
  await waitForLine(holder, /^opened/);
  await assert.rejects(RowStorage.open(tmp.path), { code: 'LOCK_OBTAIN_FAILED' });
  holder.stdin?.write('close\n');
  assert.equal((await exitOf(holder)).code, 0);
  await (await RowStorage.open(tmp.path)).storage.close();
});

test('a failed write poisons the storage (RLIMIT_FSIZE in a child: EFBIG)', async () => {
  using tmp = tempDir();
  const { code, stdout: output } = await runWithFileSizeLimit(2048, 'rows-storage-writer', [
    'fill',
    tmp.path,
  ]);
  assert.equal(code, 0);
  const lines = output.trim().split('\n');
  const failed = lines.find((l) => l.startsWith('failed')) ?? '';
  assert.match(failed, /^failed IO_ERROR Cannot append to log segment .*log-.*\.wal: .*EFBIG/);
  assert.ok(lines.includes('after IO_ERROR'), output.slice(-500));
  assert.ok(lines.includes('closed'));
  const acked = lines.filter((l) => l.startsWith('a ')).map((l) => Number(l.slice(2)));
  assert.ok(acked.length > 20, String(acked.length));
  // Everything acknowledged before the failure is there; the partial batch was truncated.
  const recovered = await reopen(tmp.path);
  const present = new Set(
    recovered.log.map((r) => Number(Buffer.from(r).toString().split(':')[1])),
  );
  for (const n of acked) assert.ok(present.has(n), `acknowledged ${n} lost`);
});

test('a write.lock deleted, replaced, or its directory moved away under the storage: every later write fails with IO_ERROR', async () => {
  const attacks: [string, (dir: string) => void][] = [
    ['directory removed', (dir) => rmSync(dir, { recursive: true, force: true })],
    ['directory moved away', (dir) => renameSync(dir, `${dir}.moved`)],
    ['write.lock deleted', (dir) => rmSync(join(dir, 'write.lock'))],
    [
      'write.lock replaced',
      (dir) => {
        rmSync(join(dir, 'write.lock'));
        writeFileSync(join(dir, 'write.lock'), '');
      },
    ],
  ];
  for (const [what, attack] of attacks) {
    using tmp = tempDir();
    const dir = join(tmp.path, 'storage');
    const { storage } = await RowStorage.open(dir);
    try {
      await storage.append(enc('before'));
      attack(dir);
      // The lock is watched (events, and a poll every second): the refusal comes soon after.
      const refused = await eventually(
        () =>
          storage.append(enc('after')).then(
            () => undefined,
            (err: unknown) => err,
          ),
        10_000,
        `a refused append after: ${what}`,
        50,
      );
      assert.equal((refused as { code?: string }).code, 'IO_ERROR', what);
      assert.match((refused as Error).message, /refuses writes/, what);
      await assert.rejects(storage.append(enc('later')), { code: 'IO_ERROR' }, what);
    } finally {
      await storage.close().catch(() => undefined);
    }
  }
});

test('close is idempotent; afterwards append and checkpoint reject with ALREADY_CLOSED', async () => {
  using tmp = tempDir();
  const { storage } = await RowStorage.open(tmp.path);
  const pending = storage.append(enc('flushed by close'));
  const c1 = storage.close();
  const c2 = storage.close();
  assert.equal(c1, c2);
  await Promise.all([pending, c1]);
  await storage.close();
  await assert.rejects(storage.append(enc('late')), { code: 'ALREADY_CLOSED' });
  await assert.rejects(
    storage.checkpoint(() => []),
    { code: 'ALREADY_CLOSED' },
  );
  const recovered = await reopen(tmp.path); // the lock was released
  assert.deepEqual(strings(recovered.log), ['flushed by close']);
});

test('bad options and records are rejected with INVALID_ARGUMENT', async () => {
  using tmp = tempDir();
  for (const options of [
    { durability: 'always' },
    { segmentBytes: 0 },
    { segmentBytes: 1.5 },
    { segmentBytes: -4096 },
    { segmentBytes: '65536' },
    { segmentBytes: 2 ** 40 },
    { maxRecordBytes: 0 },
    { maxRecordBytes: Number.NaN },
  ]) {
    await assert.rejects(
      RowStorage.open(tmp.path, options as never),
      { code: 'INVALID_ARGUMENT' },
      JSON.stringify(options),
    );
  }
  assert.deepEqual(files(tmp.path), []); // nothing was touched
  const { storage } = await RowStorage.open(tmp.path, { maxRecordBytes: 10 });
  await assert.rejects(storage.append(Buffer.alloc(11)), (err: Error & { code?: string }) => {
    assert.equal(err.code, 'INVALID_ARGUMENT');
    assert.match(err.message, /11 bytes exceeds maxRecordBytes 10/);
    return true;
  });
  await assert.rejects(storage.append('text' as never), { code: 'INVALID_ARGUMENT' });
  const defaults = await RowStorage.open(join(tmp.path, 'defaults'));
  await assert.rejects(defaults.storage.append(Buffer.alloc(64 * 2 ** 20 + 1)), {
    code: 'INVALID_ARGUMENT',
  });
  await defaults.storage.close();
  await assert.rejects(
    storage.checkpoint(() => [Buffer.alloc(11)]),
    { code: 'INVALID_ARGUMENT' },
  );
  await storage.append(Buffer.alloc(10));
  await storage.close();
  assert.equal((await reopen(tmp.path)).log.length, 1);
});
