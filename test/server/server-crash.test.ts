/**
 * The server killed with SIGKILL under write load from several client processes: after a
 * restart on the same data directory, every write a client saw acknowledged is there, and no
 * row is torn (each write set 3 cells of a row to one value with mutateRow, so a row shows one
 * value in all 3 cells or is absent). No time bound: only what survived is asserted.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { connect } from '../../src/client/locksmith-client.js';
import { Get, Scan } from '../../src/rows/index.js';
import { type FixtureProcess, spawnFixture } from '../fixtures/fixture-process.js';
import { startServeProcess } from '../fixtures/serve-process.js';
import { eventually, exitOf, tempDir } from '../helpers.js';

const WRITERS = 3;
const CELLS = ['a', 'b', 'c'];

const acks = (w: FixtureProcess) =>
  w.lines.filter((l) => l.startsWith('ack ')).map((l) => l.split(' ') as [string, string, string]);

describe('server killed with SIGKILL under write load', () => {
  it('keeps every acknowledged write, and no row is torn, after a restart (conformance V15)', async () => {
    using data = tempDir('locksmith-server-crash-');
    const first = await startServeProcess(data.path);
    {
      await using admin = await connect(first.url);
      await admin.createTable('w', ['f']);
    }
    const writers = Array.from({ length: WRITERS }, (_, i) =>
      spawnFixture('server-writer', [first.url, 'w', String(i)]),
    );
    try {
      // Under load: every writer has had writes acknowledged, and is still writing.
      await eventually(
        () => writers.every((w) => acks(w).length >= 300),
        60_000,
        () => `acknowledged writes (${writers.map((w) => acks(w).length).join(', ')})`,
      );
      await first.kill9();
      // Each writer stops at its first failed write; then its acknowledgements are complete.
      await eventually(
        () => writers.every((w) => w.line(/^failed /) !== undefined),
        30_000,
        'every writer to see the server gone',
      );
      const acknowledged = writers.flatMap(acks);
      const inFlight = writers.map(
        (w) => w.line(/^failed /)?.split(' ') as [string, string, string],
      );

      const second = await startServeProcess(data.path);
      try {
        await using reader = await connect(second.url);
        const table = reader.table('w');
        const values = async (row: string) => {
          const result = await table.get(new Get(row));
          return CELLS.map((q) => result.getValue('f', q)?.toString());
        };
        // Every acknowledged write to a writer's own row is there, whole.
        let own = 0;
        for (const [, row, value] of acknowledged) {
          if (!row.startsWith('own-')) continue;
          own++;
          assert.deepEqual(
            await values(row),
            [value, value, value],
            `acknowledged ${row}=${value}`,
          );
        }
        assert.ok(own >= (300 / 2) * WRITERS);
        // A shared row holds one write whole: the last one acknowledged or one in flight.
        const written = new Map<string, Set<string>>();
        for (const [, row, value] of [...acknowledged, ...inFlight]) {
          if (!written.has(row)) written.set(row, new Set());
          written.get(row)?.add(value);
        }
        let rows = 0;
        for await (const result of table.scan(new Scan())) {
          rows++;
          const row = result.row.toString();
          const cells = CELLS.map((q) => result.getValue('f', q)?.toString());
          assert.ok(
            cells.every((v) => v !== undefined && v === cells[0]),
            `row ${row} is torn: ${cells.join(', ')}`,
          );
          assert.ok(
            written.get(row)?.has(cells[0] as string),
            `row ${row} has ${cells[0]}, never written`,
          );
        }
        // Every row written and acknowledged exists; only in-flight rows may be missing.
        const acknowledgedRows = new Set(acknowledged.map(([, row]) => row));
        assert.ok(
          rows >= acknowledgedRows.size,
          `${rows} rows, ${acknowledgedRows.size} acknowledged`,
        );
      } finally {
        await second.kill9();
      }
    } finally {
      for (const w of writers) {
        const exited = exitOf(w.proc);
        w.proc.kill('SIGKILL');
        await exited;
      }
    }
  });
});
