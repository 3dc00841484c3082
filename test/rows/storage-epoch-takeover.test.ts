import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { RowStorage } from '../../src/rows/row-storage.js';
import { recordFor, snapshotChunk } from '../fixtures/rows-storage-writer.js';
import { eventually, exitOf, fixture, orphanProof, sleep, tempDir } from '../helpers.js';

// A master deposed while paused: a child process opens the storage with epoch e and appends
// from 8 loops (checkpointing in some rounds); it is stopped with SIGSTOP at a random moment,
// this process opens the storage with epoch e+1 (taking write.lock over), reads, appends its
// own records (and checkpoints in some rounds), then lets the child go on with SIGCONT. The
// child's appends from then on must reject with FENCED; a reopen with epoch e+2 must recover
// exactly the child records the takeover read (which include every record the child ever
// acknowledged) plus the new master's, and nothing the child wrote after.

const ROUNDS = 8;
const SEGMENT_BYTES = 64 * 1024;

interface Contents {
  child: Set<number>;
  master: string[];
}

/** The child numbers and master records in `recovered`, each checked intact and unique. */
function contents(recovered: { snapshot: Uint8Array[]; log: Uint8Array[] }, what: string) {
  const out: Contents = { child: new Set(), master: [] };
  const add = (n: number) => {
    assert.ok(!out.child.has(n), `${what}: child record ${n} appears twice`);
    out.child.add(n);
  };
  for (const record of [...recovered.snapshot, ...recovered.log]) {
    const buf = Buffer.from(record);
    const [kind, a, b] = buf.toString().split(':');
    if (kind === 's') {
      assert.ok(buf.equals(snapshotChunk(Number(a), Number(b))), `${what}: damaged chunk`);
      for (let n = Number(a); n <= Number(b); n++) add(n);
    } else if (kind === 'r') {
      assert.ok(buf.equals(recordFor(Number(a))), `${what}: damaged record ${a}`);
      add(Number(a));
    } else {
      assert.equal(kind, 'm', `${what}: unknown record ${buf.toString().slice(0, 40)}`);
      out.master.push(buf.toString());
    }
  }
  return out;
}

interface ChildOutput {
  acked: number[];
  failed: { n: number; code: string }[];
  lines: string[];
  text: string;
}

function watchOutput(child: ChildProcess): ChildOutput {
  const output: ChildOutput = { acked: [], failed: [], lines: [], text: '' };
  let partial = '';
  child.stdout?.on('data', (d: Buffer) => {
    output.text += d.toString();
    partial += d.toString();
    const lines = partial.split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      output.lines.push(line);
      if (line.startsWith('a ')) for (const n of line.slice(2).split(' ')) output.acked.push(+n);
      const f = /^f (\d+) (\S+)/.exec(line);
      if (f !== null) output.failed.push({ n: Number(f[1]), code: f[2] as string });
    }
  });
  return output;
}

function spawnWriter(dir: string, epoch: number | 'none', durability: string, ckpt: boolean) {
  const args = [dir, String(epoch), durability, '8', ckpt ? '1' : '0'];
  return orphanProof(
    spawn(process.execPath, [fixture('rows-epoch-writer'), ...args], {
      stdio: ['pipe', 'pipe', 'inherit'],
    }),
  );
}

/** Bytes of every log segment, concatenated (to look for records written after takeover). */
function allSegmentBytes(dir: string): Buffer {
  const names = readdirSync(dir).filter((n) => n.endsWith('.wal'));
  return Buffer.concat(names.map((n) => readFileSync(join(dir, n))));
}

test(`a paused master deposed by a larger epoch: its later appends are FENCED and never count (${ROUNDS} rounds) (conformance M4, M5)`, async (t) => {
  using tmp = tempDir();
  let writtenAfterTakeover = 0;
  let ackedAfterStop = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const epoch = 3 * round + 1;
    const durability = round % 2 === 0 ? 'fsync' : 'none';
    const checkpoints = round % 4 >= 2;
    const child = spawnWriter(tmp.path, epoch, durability, checkpoints);
    const output = watchOutput(child);
    await eventually(() => output.lines.some((l) => l.startsWith('ready')), 20_000, 'ready');
    const target = 100 + Math.floor(Math.random() * 400);
    await eventually(
      () => output.acked.length >= target,
      20_000,
      () => output.text.slice(-200),
    );
    await sleep(Math.random() * 20);
    child.kill('SIGSTOP');
    await sleep(50); // what the child wrote to the pipe before the stop
    const ackedAtStop = output.acked.length;

    const { storage, recovered } = await RowStorage.open(tmp.path, {
      epoch: epoch + 1,
      segmentBytes: SEGMENT_BYTES,
    });
    const taken = contents(recovered, `round ${round} takeover`);
    const mine: string[] = [];
    const write = async (k: number) => {
      const text = `m:${round}:${k}`;
      mine.push(text);
      await storage.append(Buffer.from(text));
    };
    for (let k = 0; k < 20; k++) await write(k);
    if (checkpoints) {
      await storage.checkpoint(() => [
        ...recovered.snapshot,
        ...recovered.log,
        ...mine.map((m) => Buffer.from(m)),
      ]);
    }
    await Promise.all(Array.from({ length: 20 }, (_, k) => write(20 + k)));

    child.kill('SIGCONT');
    await eventually(
      () => output.lines.includes('done'),
      20_000,
      () => output.text.slice(-300),
    );
    ackedAfterStop += output.acked.length - ackedAtStop;
    // Every loop of the child was refused with FENCED, and so was everything after.
    assert.equal(output.failed.length, 8, output.text.slice(-500));
    for (const { n, code } of output.failed) assert.equal(code, 'FENCED', `round ${round}: ${n}`);
    assert.ok(output.lines.includes('after FENCED'), output.text.slice(-300));
    assert.ok(output.lines.includes('checkpoint FENCED'), output.text.slice(-300));
    // Everything the child acknowledged (even after SIGCONT) was in the takeover's read.
    for (const n of output.acked) {
      assert.ok(taken.child.has(n), `round ${round}: acknowledged ${n} missing at takeover`);
    }
    const disk = allSegmentBytes(tmp.path);
    for (const { n } of output.failed) {
      if (!taken.child.has(n) && disk.includes(recordFor(n))) writtenAfterTakeover++;
    }
    await storage.close();
    child.stdin?.write('close\n');
    await exitOf(child);

    const again = await RowStorage.open(tmp.path, { epoch: epoch + 2 });
    try {
      const now = contents(again.recovered, `round ${round} reopen`);
      assert.deepEqual(
        [...now.child].sort((a, b) => a - b),
        [...taken.child].sort((a, b) => a - b),
        `round ${round}: the child records differ from those the takeover read`,
      );
      assert.deepEqual(now.master, [...taken.master, ...mine], `round ${round}: master records`);
      t.diagnostic(
        `round ${round} (${durability}${checkpoints ? ', checkpoints' : ''}): ` +
          `${output.acked.length} acknowledged by the child, ${taken.child.size} child records ` +
          `at takeover, ${output.failed.length} appends FENCED`,
      );
    } finally {
      await again.storage.close();
    }
  }
  t.diagnostic(
    `${writtenAfterTakeover} refused child records found on disk, not counted; ` +
      `${ackedAfterStop} acknowledgements printed after SIGSTOP (all in the takeover read)`,
  );
});

test('the broken check: a stale writer opened without its epoch keeps acknowledging after a takeover, and those records are lost', async () => {
  // What the epoch checks prevent, shown by disabling them: the stale side's appends are not
  // checked. (A standalone open of a storage that already carries an epoch is refused: see
  // storage-epoch.test.ts. Here the stale side opened first.)
  using tmp = tempDir();
  const child = spawnWriter(tmp.path, 'none', 'fsync', false);
  const output = watchOutput(child);
  await eventually(() => output.lines.some((l) => l.startsWith('ready')), 20_000, 'ready');
  await eventually(() => output.acked.length >= 100, 20_000, 'acks');
  child.kill('SIGSTOP');
  await sleep(50);
  const { storage, recovered } = await RowStorage.open(tmp.path, { epoch: 2 });
  const taken = contents(recovered, 'takeover');
  await storage.append(Buffer.from('m:0:0'));
  child.kill('SIGCONT');
  const acked = output.acked.length;
  // The unchecked writer goes on acknowledging (until it runs into the new master's segment).
  await eventually(() => output.acked.length >= acked + 50 || output.failed.length > 0, 20_000);
  child.kill('SIGKILL');
  await exitOf(child);
  await storage.close();
  const lostAcks = output.acked.filter((n) => !taken.child.has(n));
  assert.ok(lostAcks.length > 0, 'the unchecked writer acknowledged nothing after the takeover');
  const again = await RowStorage.open(tmp.path, { epoch: 3 });
  try {
    const now = contents(again.recovered, 'reopen');
    // A checker comparing acknowledgements with the data finds the loss.
    assert.ok(lostAcks.every((n) => !now.child.has(n)));
    assert.deepEqual(now.master, ['m:0:0']);
  } finally {
    await again.storage.close();
  }
});
