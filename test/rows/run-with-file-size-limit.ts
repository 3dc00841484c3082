// Runs a fixture under `ulimit -f` (RLIMIT_FSIZE), so its writes past the limit fail with
// EFBIG: the one real way to make a write fail in a test. Not a test.
import { spawn } from 'node:child_process';
import { exitOf, fixture, orphanProof } from '../helpers.js';

/** Runs fixture `name` with `args` limited to `blocks` KiB per file; resolves with its output. */
export async function runWithFileSizeLimit(
  blocks: number,
  name: string,
  args: readonly string[],
): Promise<{ code: number | null; stdout: string }> {
  const child = orphanProof(
    spawn(
      '/bin/sh',
      ['-c', `ulimit -f ${blocks} && exec "$0" "$@"`, process.execPath, fixture(name), ...args],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    ),
  );
  let stdout = '';
  child.stdout?.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  const { code } = await exitOf(child);
  // Let the last 'data' event land.
  await new Promise((r) => setImmediate(r));
  return { code, stdout };
}
