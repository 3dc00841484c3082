// Crash safety of the row store with real processes: a writer is `kill -9`ed at random
// moments, many times; after each restart every acknowledged mutation is there, whole, and no
// row is torn (a mutation not acknowledged may be there or not, but never in part).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { Get, Region, Scan } from '../../src/rows/index.js';
import { exitOf, fixture, orphanProof, sleep, tempDir, waitForLine } from '../helpers.js';
import { runWithFileSizeLimit } from './run-with-file-size-limit.js';

function wholeValue(cells: readonly { value: Buffer }[]): string | undefined {
  const first = cells[0]?.value;
  if (cells.length !== 10 || first === undefined || !cells.every((c) => c.value.equals(first)))
    return undefined;
  return first.toString();
}

async function crashRounds(durability: 'fsync' | 'none', rounds: number): Promise<number> {
  using dir = tempDir();
  const acked = new Set<number>();
  let first = 1;
  let seed = 7;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  for (let round = 0; round < rounds; round++) {
    const child = orphanProof(
      spawn(
        process.execPath,
        [fixture('rows-region-writer'), dir.path, String(first), durability],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      ),
    );
    const exited = exitOf(child);
    let buffer = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
      const lines = buffer.split('\n');
      buffer = lines.pop() ?? '';
      for (const line of lines) {
        const m = /^ack (\d+)$/.exec(line);
        if (m) acked.add(Number(m[1]));
      }
    });
    await waitForLine(child, /^ready$/, 20_000);
    await sleep(50 + random() * 400);
    child.kill('SIGKILL');
    await exited;

    await using region = await Region.open({ families: ['A', 'B'], dir: dir.path });
    const present = new Set<number>();
    for await (const row of region.scan(new Scan())) {
      const key = row.row.toString();
      const value = wholeValue(row.cells);
      assert.ok(
        value !== undefined,
        `round ${round}: row ${key} is torn (${row.cells.length} cells)`,
      );
      const n = Number(value.split(':')[0]);
      if (key !== 'hot') {
        assert.equal(key, `m${n}`, `round ${round}: row ${key} holds mutation ${n}`);
        present.add(n);
      }
    }
    const missing = [...acked].filter((n) => !present.has(n));
    assert.deepEqual(
      missing.slice(0, 10),
      [],
      `round ${round}: ${missing.length} acknowledged mutations lost`,
    );
    const hot = await region.get(new Get('hot'));
    if (acked.size > 0) assert.ok(!hot.isEmpty, 'the shared row vanished');
    first = Math.max(first, ...present, ...acked) + 1;
  }
  return acked.size;
}

describe('row store: kill -9 at random moments', () => {
  it('durability fsync: 12 rounds, no acknowledged mutation lost, no torn row', async () => {
    const acked = await crashRounds('fsync', 12);
    assert.ok(acked > 100, `only ${acked} mutations were acknowledged in all rounds`);
  });

  it('durability none (write(2) only): kill -9 loses nothing acknowledged either', async () => {
    const acked = await crashRounds('none', 6);
    assert.ok(acked > 100, `only ${acked} mutations were acknowledged`);
  });
});

describe('row store: the disk refuses a write (RLIMIT_FSIZE: EFBIG)', () => {
  it('the failed put is refused and absent, reads go on, later writes fail, nothing acknowledged is lost', async () => {
    using dir = tempDir();
    const { code, stdout } = await runWithFileSizeLimit(2048, 'rows-region-filler', [dir.path]);
    assert.equal(code, 0, stdout.slice(-500));
    const lines = stdout.trim().split('\n');
    const acked = lines.filter((l) => l.startsWith('ack ')).map((l) => Number(l.slice(4)));
    const failed = /^failed IO_ERROR r(\d+)$/.exec(lines.find((l) => l.startsWith('failed')) ?? '');
    assert.ok(failed, stdout.slice(-500));
    assert.ok(acked.length > 20, `only ${acked.length} puts before the limit`);
    assert.ok(lines.includes('read ok 2'), 'reads must go on after a storage failure');
    assert.ok(lines.includes('write IO_ERROR'), 'writes must stop after a storage failure');
    await using region = await Region.open({ families: ['f'], dir: dir.path });
    for (const n of acked) {
      const row = await region.get(new Get(`r${n}`));
      assert.equal(
        row.cells.length,
        2,
        `acknowledged r${n} is ${row.cells.length ? 'torn' : 'lost'}`,
      );
    }
    const refused = await region.get(new Get(`r${failed[1]}`));
    assert.ok(refused.cells.length === 0 || refused.cells.length === 2, 'the refused put is torn');
  });
});
