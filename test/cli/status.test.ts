import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { cliPath, exitOf, holdLockInChild, run, tempDir } from '../helpers.js';

test('status reports free, then held with the holder pid, without creating anything', async () => {
  using tmp = tempDir();
  const missing = await run([cliPath, 'status', join(tmp.path, 'nope')]);
  assert.equal(missing.code, 0);
  assert.match(missing.stdout, /free \(no such directory\)/);
  const free = await run([cliPath, 'status', tmp.path]);
  assert.equal(free.code, 0);
  assert.match(free.stdout, /free \(no lock file\)/);
  assert.deepEqual(readdirSync(tmp.path), []);

  const { child, token } = await holdLockInChild(tmp.path);
  const held = await run([cliPath, 'status', tmp.path]);
  assert.equal(held.code, 1);
  assert.match(held.stdout, new RegExp(`held by pid ${child.pid} \\[OFDLCK\\]`));
  const counter = Number(/fencing counter: (\d+)/.exec(held.stdout)?.[1]);
  assert.ok(counter > token, `the counter (${counter}) is above every token issued (${token})`);
  child.kill('SIGKILL');
  await exitOf(child);
  const after = await run([cliPath, 'status', tmp.path]);
  assert.equal(after.code, 0);
  assert.match(after.stdout, /write\.lock: free$/m);
});

test('status with --factory simple reports an existing lock file as held or stale', async () => {
  using tmp = tempDir();
  const { child } = await holdLockInChild(tmp.path, 'simple');
  child.kill('SIGKILL');
  await exitOf(child);
  const stale = await run([cliPath, 'status', tmp.path, '--factory', 'simple']);
  assert.equal(stale.code, 1);
  assert.match(stale.stdout, /held or stale/);
  const bad = await run([cliPath, 'status', tmp.path, '--name', '../etc']);
  assert.equal(bad.code, 2);
});
