/**
 * The largest request the server's limits allow is served without freezing the server
 *: a put of MAX_CELLS_PER_CALL cells of one column that fills a frame, sent
 * while another session's scanner pins an old read point (so no version can be pruned), is
 * applied whole while a third client's pings keep being answered. The ping client runs in a
 * worker thread, so only the server's event loop is measured, not this test's encoding.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Worker } from 'node:worker_threads';
import { connect } from '../../src/client/locksmith-client.js';
import { Get, MAX_CELLS_PER_CALL, Put, Scan } from '../../src/rows/index.js';
import { encode } from '../../src/wire/codec.js';
import { DEFAULT_MAX_FRAME_BYTES } from '../../src/wire/frame.js';
import { encodePut } from '../../src/wire/rows-codec.js';
import { startServeProcess } from '../fixtures/serve-process.js';
import { fixture, sleep, tempDir } from '../helpers.js';

/** `locksmith serve`'s session lease (the server's default), which the bounds derive from. */
const SESSION_LEASE_MS = 10_000;
/** The documented bound (docs/server.md, "Limits"): p99 of pings within a tenth of a lease. */
const P99_BOUND_MS = SESSION_LEASE_MS / 10;

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] as number;
}

describe('the largest request the limits allow', () => {
  it('a frame-filling put of MAX_CELLS_PER_CALL cells of one column, with a scanner open, is applied whole while other clients are answered', async (t) => {
    using dir = tempDir();
    const server = await startServeProcess(dir.path);
    const holder = await connect(server.url);
    const writer = await connect(server.url);
    let worker: Worker | undefined;
    try {
      await holder.createTable('t', ['f']);
      // More rows than one page of a scan (1 000), so the scanner stays open on the server.
      const rowKeys = Array.from({ length: 1500 }, (_, i) => `r${String(i).padStart(4, '0')}`);
      await holder.table('t').batch(rowKeys.map((r) => new Put(r).add('f', 'q', 'v')));
      // An open scanner on the server: its read point is older than the put, so the put's
      // versions of one column can none of them be pruned until it closes.
      const scan = holder.table('t').scan(new Scan())[Symbol.asyncIterator]();
      assert.equal((await scan.next()).done, false);
      assert.equal((await holder.status()).scanners, 1, 'the scanner is open on the server');

      const valueBytes = Math.floor((DEFAULT_MAX_FRAME_BYTES - 65_536) / MAX_CELLS_PER_CALL) - 12;
      const big = new Put('zz-big');
      for (let i = 0; i < MAX_CELLS_PER_CALL; i++) {
        const value = Buffer.alloc(valueBytes, 97);
        value.writeUInt32BE(i);
        big.add('f', 'q', value);
      }
      const encoded = encode(encodePut(big)).length;
      assert.ok(encoded <= DEFAULT_MAX_FRAME_BYTES - 1024, `the put fits a frame (${encoded})`);
      assert.ok(encoded >= 0.95 * DEFAULT_MAX_FRAME_BYTES, `the put nearly fills one (${encoded})`);

      worker = new Worker(fixture('ping-worker'), {
        workerData: { url: server.url, gapMs: 5, timeoutMs: SESSION_LEASE_MS / 2 },
      });
      const ready = new Promise((resolve) => worker?.once('message', resolve));
      await ready;
      await sleep(200);
      // Generous: the put takes about a second here; the old server took hours.
      const deadline = Symbol('deadline');
      let timer: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([
        writer
          .table('t')
          .put(big)
          .then(() => 'applied'),
        new Promise((resolve) => {
          timer = setTimeout(() => resolve(deadline), 60_000);
        }),
      ]);
      clearTimeout(timer);
      await sleep(200);
      const rtts = new Promise<number[]>((resolve) => worker?.once('message', resolve));
      worker.postMessage('stop');
      const sorted = (await rtts).sort((a, b) => a - b);
      assert.equal(outcome, 'applied', 'the put is applied within a minute');
      assert.ok(sorted.length >= 10, `pings went on during the put (${sorted.length})`);
      const p99 = percentile(sorted, 0.99);
      const max = sorted.at(-1) as number;
      t.diagnostic(
        `put ${MAX_CELLS_PER_CALL} cells, ${encoded} bytes: pings n=${sorted.length} p50 ${percentile(sorted, 0.5).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${max.toFixed(1)} ms`,
      );
      assert.ok(
        max < SESSION_LEASE_MS / 2,
        `every ping answered within half a session lease (slowest ${max.toFixed(0)} ms)`,
      );
      assert.ok(
        p99 <= P99_BOUND_MS,
        `p99 of pings ${p99.toFixed(0)} ms <= ${P99_BOUND_MS} ms (n=${sorted.length}, max ${max.toFixed(0)} ms)`,
      );

      // Whole and in order: the cell added last is the newest version; the scanner still
      // reads the rows as of its read point, without the put (its row sorts last).
      const got = await writer.table('t').get(new Get('zz-big').addColumn('f', 'q'));
      assert.equal(got.cells.length, 1);
      assert.equal(got.cells[0]?.value.readUInt32BE(0), MAX_CELLS_PER_CALL - 1);
      const rows: string[] = [];
      for (let r = await scan.next(); !r.done; r = await scan.next())
        rows.push(r.value.row.toString());
      assert.deepEqual(rows, rowKeys.slice(1));

      // One cell more than the limit is refused, by code, and nothing of it is written.
      const over = new Put('over');
      for (let i = 0; i <= MAX_CELLS_PER_CALL; i++) over.add('f', 'q', 'x');
      await assert.rejects(writer.table('t').put(over), (err: Error & { code?: string }) => {
        assert.equal(err.code, 'INVALID_ARGUMENT');
        assert.match(err.message, /100001 cells; one call may write at most 100000/);
        return true;
      });
      assert.equal((await writer.table('t').get(new Get('over'))).cells.length, 0);
    } finally {
      await worker?.terminate();
      await server.kill9();
      holder.close().catch(() => undefined);
      writer.close().catch(() => undefined);
    }
  });
});
