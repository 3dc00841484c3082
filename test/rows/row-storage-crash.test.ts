import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { RowStorage } from '../../src/rows/row-storage.js';
import { recordFor, snapshotChunk } from '../fixtures/rows-storage-writer.js';
import { fixture, orphanProof, sleep, tempDir, waitForLine } from '../helpers.js';

// Real crashes: a child appends numbered records from 16 concurrent loops (so group commit
// batches them), checkpointing now and then, and prints each number once its append
// resolved. It is killed with SIGKILL at a random moment; then this process opens the
// storage itself and checks that every number ever acknowledged is present, each record is
// intact, none appears twice, and the numbers present are exactly 1..max (a prefix of the
// call order: nothing in the middle was dropped). The same directory carries over from
// round to round, so recovery after recovery (and torn tails on top of truncated ones) is
// exercised too.

const ROUNDS = 20;
const NONE_ROUNDS = 4; // the last rounds use durability 'none' (kill -9 keeps the page cache)

function closed(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      if (child.stdout?.readableEnded ?? true) {
        resolve();
        return;
      }
    }
    const keepAlive = setInterval(() => {}, 1000);
    child.once('close', () => {
      clearInterval(keepAlive);
      resolve();
    });
  });
}

function segmentSizes(dir: string): Map<string, number> {
  const sizes = new Map<string, number>();
  for (const name of readdirSync(dir)) {
    if (name.endsWith('.wal')) sizes.set(name, statSync(join(dir, name)).size);
  }
  return sizes;
}

/**
 * Runs the writer fixture on `dir` (16 appending loops) and kills it with SIGKILL `killAfterMs`
 * after it is ready: the numbers it acknowledged, and whether its output was cut mid-line.
 */
async function killedWriter(
  dir: string,
  durability: 'fsync' | 'none',
  segmentBytes: number,
  killAfterMs: number,
): Promise<{ acked: number[]; outputCut: boolean }> {
  const child = orphanProof(
    spawn(
      process.execPath,
      [fixture('rows-storage-writer'), 'write', dir, durability, String(segmentBytes), '16'],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    ),
  );
  let output = '';
  child.stdout?.on('data', (d: Buffer) => {
    output += d.toString();
  });
  await waitForLine(child, /^ready \d+/, 20_000);
  await sleep(killAfterMs);
  child.kill('SIGKILL');
  await closed(child);
  const complete = output.slice(0, output.lastIndexOf('\n') + 1);
  const acked: number[] = [];
  for (const line of complete.split('\n')) {
    if (line.startsWith('a ')) for (const n of line.slice(2).split(' ')) acked.push(Number(n));
  }
  return { acked, outputCut: complete.length < output.length };
}

/** Checks the recovered records, returning the numbers present (1..max). */
function verify(recovered: { snapshot: Uint8Array[]; log: Uint8Array[] }, round: number): number {
  const seen = new Set<number>();
  const add = (n: number, where: string) => {
    assert.ok(!seen.has(n), `round ${round}: number ${n} appears twice (${where})`);
    seen.add(n);
  };
  for (const record of recovered.snapshot) {
    const [kind, lo, hi] = Buffer.from(record).toString().split(':');
    assert.equal(kind, 's', `round ${round}: bad snapshot record`);
    assert.ok(
      Buffer.from(record).equals(snapshotChunk(Number(lo), Number(hi))),
      `round ${round}: damaged snapshot record ${Buffer.from(record).toString()}`,
    );
    for (let n = Number(lo); n <= Number(hi); n++) add(n, 'snapshot');
  }
  for (const record of recovered.log) {
    const n = Number(Buffer.from(record).toString().split(':')[1]);
    assert.ok(
      Buffer.from(record).equals(recordFor(n)),
      `round ${round}: damaged log record ${Buffer.from(record).toString().slice(0, 80)}`,
    );
    add(n, 'log');
  }
  const max = seen.size;
  for (let n = 1; n <= max; n++) {
    assert.ok(seen.has(n), `round ${round}: ${n} missing while ${max} records are present`);
  }
  return max;
}

test(`kill -9 of a writer at random moments, ${ROUNDS} rounds: no acknowledged record lost`, async (t) => {
  using tmp = tempDir();
  const acked = new Set<number>();
  let checkpointsSeen = 0;
  let tornRounds = 0;
  let truncatedRounds = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const durability = round < ROUNDS - NONE_ROUNDS ? 'fsync' : 'none';
    const killed = await killedWriter(tmp.path, durability, 65536, 100 + Math.random() * 600);
    if (killed.outputCut) tornRounds++;
    const ackedThisRound = killed.acked.length;
    for (const n of killed.acked) acked.add(n);
    const snapshotsOnDisk = readdirSync(tmp.path).filter((n) => n.endsWith('.snap')).length;
    const before = segmentSizes(tmp.path);
    const { storage, recovered } = await RowStorage.open(tmp.path);
    const after = segmentSizes(tmp.path);
    const truncated = [...before].some(([name, size]) => (after.get(name) ?? size) < size);
    if (truncated) truncatedRounds++;
    try {
      checkpointsSeen += recovered.snapshot.length > 0 ? 1 : 0;
      const max = verify(recovered, round);
      for (const n of acked)
        assert.ok(n <= max, `round ${round}: acknowledged ${n} lost (max ${max})`);
      t.diagnostic(
        `round ${round} (${durability}): ${ackedThisRound} acknowledged, ${max} present ` +
          `(${recovered.snapshot.length} snapshot chunks, ${recovered.log.length} log records, ` +
          `${snapshotsOnDisk} snapshot file(s)${truncated ? ', torn tail truncated' : ''})`,
      );
      assert.ok(ackedThisRound > 0, `round ${round}: the writer acknowledged nothing`);
    } finally {
      await storage.close();
    }
  }
  t.diagnostic(
    `${acked.size} acknowledged in all; ${checkpointsSeen} rounds recovered from a snapshot, ` +
      `${truncatedRounds} truncated a torn tail, ${tornRounds} cut an output line`,
  );
  assert.ok(checkpointsSeen > 0, 'no round recovered from a snapshot');
});

test('kill -9 of a writer leaves the zeros it wrote ahead of its records: recovery keeps every acknowledged record and drops them', async () => {
  using tmp = tempDir();
  const segmentBytes = 4 << 20; // room for a whole stretch of zeros ahead of the records
  const killed = await killedWriter(tmp.path, 'fsync', segmentBytes, 400);
  assert.ok(killed.acked.length > 0, 'the writer acknowledged nothing');
  const [last] = [...segmentSizes(tmp.path)].sort().reverse() as [[string, number]];
  const bytes = readFileSync(join(tmp.path, last[0]));
  assert.equal(bytes.at(-1), 0, `${last[0]} (${bytes.length} B) does not end in zeros`);
  const { storage, recovered } = await RowStorage.open(tmp.path, { segmentBytes });
  try {
    const max = verify(recovered, 0);
    for (const n of killed.acked) assert.ok(n <= max, `acknowledged ${n} lost (max ${max})`);
    const after = readFileSync(join(tmp.path, last[0]));
    assert.ok(after.length < bytes.length, 'the zeros were not truncated');
    assert.notEqual(after.at(-1), 0, `${last[0]} still ends in a zero after recovery`);
  } finally {
    await storage.close();
  }
  // What recovery left reads the same a second time (no segment but the last may end in zeros).
  const again = await RowStorage.open(tmp.path, { segmentBytes });
  await again.storage.close();
  verify(again.recovered, 1);
});
