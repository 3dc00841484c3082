// The seed's RowLockExample over the network: the shipped example runs as two client processes
// of a `locksmith serve` child process, and prints the seed's lines in the seed's order: the
// second client's put waited for the first client's explicit lock (~5 s), and in 0.90 mode
// (timestampOnArrival) the dump lists val2, val1, val3 with val3 about 5 s older.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { assertSeedOutput } from '../fixtures/row-lock-example-output.js';
import { startServeProcess } from '../fixtures/serve-process.js';
import { repoRoot, run, tempDir } from '../helpers.js';

describe('examples/row-lock-server-example.ts', () => {
  it("prints the seed's lines in the seed's order, over the network (conformance R10)", async () => {
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
        // The contract: the put waited for the 5 s sleep; the upper bounds are only generous.
        assertSeedOutput(stdout, 15_000, 15_000);
      }
    } finally {
      await server.kill9();
    }
  });
});
