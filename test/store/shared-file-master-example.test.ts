// examples/shared-file-master.ts runs until SIGINT (no hidden run time), and SIGINT stops it
// at once: the service stops, the lock is given back, the process exits 0. Both as master and
// while still waiting as a slave.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { exitOf, orphanProof, repoRoot, sleep, tempDir, waitForLine } from '../helpers.js';

const example = join(repoRoot, 'dist-test/examples/shared-file-master.js');

function start(cwd: string) {
  return orphanProof(
    spawn(process.execPath, [example], { cwd, stdio: ['ignore', 'pipe', 'inherit'] }),
  );
}

describe('examples/shared-file-master.ts', () => {
  it('keeps running as master until SIGINT, then stops and exits 0; a slave then takes over', async () => {
    using dir = tempDir();
    const master = start(dir.path);
    let out = '';
    master.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
    });
    await waitForLine(master, /^master now, fencing token \d+/, 30_000);
    const slave = start(dir.path);
    await waitForLine(slave, /^slave: waiting for the lock/, 30_000);
    // Well past the 3 s the example used to stop by itself after: still master, still working.
    await sleep(4_000);
    assert.equal(master.exitCode, null, 'the master ended on its own');
    const exited = exitOf(master);
    const took = waitForLine(slave, /^master now, fencing token \d+/, 30_000);
    master.kill('SIGINT');
    const { code, signal } = await exited;
    assert.deepEqual({ code, signal }, { code: 0, signal: null });
    assert.match(out, /SIGINT: stopping\nstopped being master\nstopped\n/);
    await took;
    const slaveExit = exitOf(slave);
    slave.kill('SIGINT');
    assert.deepEqual(await slaveExit, { code: 0, signal: null });
  });

  it('SIGINT while still a slave exits 0 without an error', async () => {
    using dir = tempDir();
    const master = start(dir.path);
    await waitForLine(master, /^master now/, 30_000);
    const slave = start(dir.path);
    await waitForLine(slave, /^slave: waiting for the lock/, 30_000);
    const slaveExit = exitOf(slave);
    slave.kill('SIGINT');
    assert.deepEqual(await slaveExit, { code: 0, signal: null });
    const masterExit = exitOf(master);
    master.kill('SIGINT');
    assert.deepEqual(await masterExit, { code: 0, signal: null });
  });
});
