// The shipped example prints the seed's output: the blocked put waited ~5 s, and in 0.90
// mode the dump lists val2, val1, val3 with val3 about 5 s older.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { assertSeedOutput } from '../fixtures/row-lock-example-output.js';
import { repoRoot, run } from '../helpers.js';

describe('examples/row-lock-example.ts', () => {
  it("prints the seed's lines in the seed's order (conformance R10)", async () => {
    const { code, stdout } = await run([join(repoRoot, 'dist-test/examples/row-lock-example.js')]);
    assert.equal(code, 0);
    assertSeedOutput(stdout, 7000, 6000);
  });
});
