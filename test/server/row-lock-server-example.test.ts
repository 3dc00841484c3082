// The seed's RowLockExample over the network: the shipped example runs as two client processes
// of a `locksmith serve` child process, and prints the seed's lines in the seed's order: the
// second client's put waited for the first client's explicit lock (~5 s), and in 0.90 mode
// (timestampOnArrival) the dump lists val2, val1, val3 with val3 about 5 s older.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { startServeProcess } from '../fixtures/serve-process.js';
import { repoRoot, run, tempDir } from '../helpers.js';

describe('examples/row-lock-server-example.ts', () => {
  it("prints the seed's lines in the seed's order, over the network", async () => {
    using data = tempDir('locksmith-example-');
    const server = await startServeProcess(data.path);
    try {
      // Twice: the example recreates its table, so a second run prints the same.
      for (let i = 0; i < 2; i++) {
        const { code, stdout, stderr } = await run(
          [join(repoRoot, 'dist-test/examples/row-lock-server-example.js'), server.url],
          { timeoutMs: 60_000 },
        );
        assert.equal(code, 0, stderr);
        const lines = stdout.trim().split('\n');
        assert.deepEqual(
          lines.slice(0, 5).map((l) => l.replace(/: .*/, ':')),
          [
            'Taking out lock...',
            'Lock ID:',
            'Sleeping 5secs in main()...',
            'Thread trying to put same row now...',
            'Releasing lock...',
          ],
          stdout,
        );
        const wait = /^Wait time: (\d+)ms$/.exec(lines[5] ?? '');
        assert.ok(wait, `no wait line: ${lines[5]}`);
        // The contract: the put waited for the 5 s sleep; the upper bound is only generous.
        assert.ok(Number(wait[1]) >= 4990 && Number(wait[1]) < 15_000, lines[5]);
        assert.equal(lines[6], 'After thread ended...');
        const kv = lines
          .slice(7)
          .map((l) => /^KV: row1\/colfam1:qual1\/(\d{13})\/Put\/vlen=4, Value: (val\d)$/.exec(l));
        assert.equal(kv.length, 3, stdout);
        const [v2, v1, v3] = kv.map((m) => {
          assert.ok(m, stdout);
          return { ts: Number(m[1]), value: m[2] };
        }) as [
          { ts: number; value: string },
          { ts: number; value: string },
          { ts: number; value: string },
        ];
        assert.deepEqual([v2.value, v1.value, v3.value], ['val2', 'val1', 'val3']);
        assert.ok(v2.ts > v1.ts);
        assert.ok(
          v1.ts - v3.ts >= 4990 && v1.ts - v3.ts < 15_000,
          `val1 - val3 = ${v1.ts - v3.ts}`,
        );
      }
    } finally {
      await server.kill9();
    }
  });
});
