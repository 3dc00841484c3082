// The shipped example prints the seed's output: the blocked put waited ~5 s, and in 0.90
// mode the dump lists val2, val1, val3 with val3 about 5 s older.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { repoRoot, run } from '../helpers.js';

describe('examples/row-lock-example.ts', () => {
  it("prints the seed's lines in the seed's order", async () => {
    const { code, stdout } = await run([join(repoRoot, 'dist-test/examples/row-lock-example.js')]);
    assert.equal(code, 0);
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
    );
    const wait = /^Wait time: (\d+)ms$/.exec(lines[5] ?? '');
    assert.ok(wait, `no wait line: ${lines[5]}`);
    assert.ok(Number(wait[1]) >= 4990 && Number(wait[1]) < 7000, lines[5]);
    assert.equal(lines[6], 'After thread ended...');
    const kv = lines
      .slice(7)
      .map((l) => /^KV: row1\/colfam1:qual1\/(\d{13})\/Put\/vlen=4, Value: (val\d)$/.exec(l));
    assert.equal(kv.length, 3);
    const [v2, v1, v3] = kv.map((m) => {
      assert.ok(m);
      return { ts: Number(m[1]), value: m[2] };
    }) as [
      { ts: number; value: string },
      { ts: number; value: string },
      { ts: number; value: string },
    ];
    assert.deepEqual([v2.value, v1.value, v3.value], ['val2', 'val1', 'val3']);
    assert.ok(v2.ts > v1.ts);
    assert.ok(v1.ts - v3.ts >= 4990 && v1.ts - v3.ts < 6000, `val1 - val3 = ${v1.ts - v3.ts} ms`);
  });
});
