// A port of HBase's TestAcidGuarantees: writers put one value into all 150 cells of a row
// (families A, B, C × col0..col49) while Get and Scan readers check that every row they see
// holds one value throughout, and a flusher checkpoints (snapshot + compaction) non-stop.
// Writers yield between cell inserts at seeded random points, so a reader really can land in
// the middle of a mutation: only MVCC keeps it from seeing one. It runs against a Region and
// against a RemoteTable (the hooks and the flusher act on the server's region).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { type Cell, formatCell, Get, Put, Scan } from '../../src/rows/index.js';
import { rowsInternals } from '../../src/rows/internals.js';
import { seeded } from '../helpers.js';
import { type TableVariant, tableVariants } from './table-variants.js';

const FAMILIES = ['A', 'B', 'C'];
const QUALIFIERS = Array.from({ length: 50 }, (_, i) => `col${i}`);
const ROWS = ['test_row_0', 'test_row_1', 'test_row_2'];
const CELLS_PER_ROW = FAMILIES.length * QUALIFIERS.length;

const tick = () => new Promise<void>((r) => setImmediate(r));

/** Throws with a dump of the row unless it is complete and holds one value throughout. */
function checkRow(row: string, cells: readonly Cell[], lastTs: Map<string, number>): void {
  const first = cells[0];
  const consistent =
    cells.length === CELLS_PER_ROW &&
    first !== undefined &&
    cells.every((c) => c.value.equals(first.value));
  if (!consistent) {
    throw new Error(
      `row ${row} is torn (${cells.length} cells):\n${cells.map((c) => `${formatCell(c)} ${c.value.toString('hex')}`).join('\n')}`,
    );
  }
  const ts = Math.max(...cells.map((c) => c.timestamp));
  const previous = lastTs.get(row) ?? 0;
  if (ts < previous) throw new Error(`row ${row} went back in time: ${ts} after ${previous}`);
  lastTs.set(row, ts);
}

interface Run {
  writers: number;
  getters: number;
  scanners: number;
  millis: number;
  seed: number;
  broken?: boolean;
  durability?: 'fsync' | 'none';
}

async function runAcid(
  variant: TableVariant,
  run: Run,
): Promise<{ writes: number; reads: number; flushes: number; violation: Error | undefined }> {
  await using region = await variant.open({
    families: FAMILIES.map((name) => ({ name, maxVersions: 1 })),
    durability: run.durability ?? 'none',
  });
  const random = seeded(run.seed);
  region.backing[rowsInternals].insertYield = () => (random() < 0.05 ? tick() : undefined);
  region.backing[rowsInternals].readAll = run.broken === true;
  const deadline = Date.now() + run.millis;
  let violation: Error | undefined;
  let writes = 0;
  let reads = 0;
  let flushes = 0;
  const going = () => violation === undefined && Date.now() < deadline;
  const guard = (task: () => Promise<void>) =>
    task().catch((err: unknown) => {
      violation ??= err instanceof Error ? err : new Error(String(err));
    });

  const writer = async () => {
    while (going()) {
      const row = ROWS[Math.floor(random() * ROWS.length)] as string;
      const value = randomBytes(10);
      const put = new Put(row);
      for (const family of FAMILIES) for (const q of QUALIFIERS) put.add(family, q, value);
      await region.put(put);
      writes++;
    }
  };
  const getter = async (i: number) => {
    const lastTs = new Map<string, number>();
    const row = ROWS[i % ROWS.length] as string;
    while (going()) {
      const result = await region.get(new Get(row));
      if (!result.isEmpty) checkRow(row, result.cells, lastTs);
      reads++;
      await tick();
    }
  };
  const scanner = async () => {
    const lastTs = new Map<string, number>();
    while (going()) {
      for await (const result of region.scan(new Scan())) {
        checkRow(result.row.toString('latin1'), result.cells, lastTs);
        reads++;
        await tick();
      }
      // An empty table scans without a macrotask: yield, or the writers never run.
      await tick();
    }
  };
  const flusher = async () => {
    while (going()) {
      await region.backing.flush();
      flushes++;
      await tick();
    }
  };
  await Promise.all([
    ...Array.from({ length: run.writers }, () => guard(writer)),
    ...Array.from({ length: run.getters }, (_, i) => guard(() => getter(i))),
    ...Array.from({ length: run.scanners }, () => guard(scanner)),
    guard(flusher),
  ]);
  return { writes, reads, flushes, violation };
}

for (const variant of tableVariants)
  describe(`TestAcidGuarantees port (${variant.name})`, () => {
    const runs: [string, Run][] = [
      [
        'gets (5 writers, 5 getters)',
        { writers: 5, getters: 5, scanners: 0, millis: 2000, seed: 1 },
      ],
      [
        'scans (5 writers, 5 scanners)',
        { writers: 5, getters: 0, scanners: 5, millis: 2000, seed: 2 },
      ],
      [
        'mixed (5/2/2), fsync',
        { writers: 5, getters: 2, scanners: 2, millis: 2000, seed: 3, durability: 'fsync' },
      ],
    ];
    for (const [name, run] of runs) {
      it(`${name}: no reader ever sees a torn row (conformance R13, R14)`, async () => {
        const { writes, reads, flushes, violation } = await runAcid(variant, run);
        assert.equal(violation, undefined, violation?.message);
        assert.ok(writes > 20, `only ${writes} writes`);
        assert.ok(reads > 20, `only ${reads} reads`);
        assert.ok(flushes > 2, `only ${flushes} checkpoints`);
      });
    }

    it('with the read path broken on purpose (MVCC bypassed), the same checks fail', async () => {
      const { violation } = await runAcid(variant, {
        writers: 5,
        getters: 2,
        scanners: 2,
        millis: 3000,
        seed: 4,
        broken: true,
      });
      assert.ok(violation, 'a torn row must be seen when reads ignore the read point');
      assert.match(violation.message, /torn/);
    });
  });
