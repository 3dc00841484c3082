/**
 * What `locksmith serve` says when it starts, run as a real command: the dashboard's URL in
 * its listening line; a second standalone server on the same --data names the process that
 * holds it (another `locksmith serve`, with its pid) and what to do; a lone `serve --ha` says it
 * is trying to become master, not that it waits as a slave, and a second one says it is a
 * slave only once it has found the master, naming it.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { startServeProcess } from '../fixtures/serve-process.js';
import { cliPath, eventually, run, tempDir } from '../helpers.js';

test('the listening line gives the dashboard URL; a second server on the same --data names the first', async () => {
  using dir = tempDir();
  const data = join(dir.path, 'data');
  const first = await startServeProcess(data, ['--http-port', '0']);
  try {
    const listening = first.line(/listening on /) as string;
    assert.match(
      listening,
      /, dashboard on http:\/\/127\.0\.0\.1:\d+\/ \(\/status, \/metrics\)\)$/,
    );
    const second = await run([cliPath, 'serve', '--data', data, '--port', '0']);
    assert.equal(second.code, 1, second.stderr);
    const lines = second.stderr.trim().split('\n');
    assert.equal(lines.length, 1, second.stderr);
    assert.match(
      lines[0] as string,
      new RegExp(
        `^locksmith serve: Data directory .*data is in use: its write\\.lock is held by another locksmith serve \\(pid ${first.proc.pid}: .*serve --data .*\\)\\. One server per data directory: stop that one, pass another --data, or run both with --ha \\(master/slave\\) \\(LOCK_OBTAIN_FAILED\\)$`,
      ),
    );
  } finally {
    await first.stop();
  }
});

test('serve --ha: alone it tries to become master (no slave line); a second says slave only once it found the master', async () => {
  using dir = tempDir();
  const data = join(dir.path, 'data');
  const ha = ['--ha', 'shared-file', '--acquire-interval', '200ms', '--renew', '500ms'];
  const first = await startServeProcess(data, ha);
  let second: Awaited<ReturnType<typeof startServeProcess>> | undefined;
  try {
    await eventually(() => first.line(/: master \(token \d+\) on /), 20_000, 'the first master');
    assert.equal(first.line(/slave/), undefined, first.lines.join('\n'));
    assert.match(first.lines.join('\n'), /: trying to become master of /);
    second = await startServeProcess(data, ha);
    const s = second;
    const slaveLine = await eventually(
      () => s.line(/: slave: waiting for /),
      20_000,
      'the second server to find the master',
    );
    assert.match(slaveLine, /: slave: waiting for .+: .*locked by/);
    assert.equal(second.line(/: master /), undefined);
  } finally {
    await second?.stop();
    await first.stop();
  }
});
