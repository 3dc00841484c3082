import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  cliPath,
  exitOf,
  holdLockInChild,
  lockedSleep,
  orphanProof,
  run,
  tempDir,
} from '../helpers.js';

/** `locksmith status`'s documented exit codes. */
const FREE = 0;
const HELD = 1;
const USAGE = 2;
const CANNOT_LOCK = 3;

/** One line on stdout naming the path and the reason; nothing on stderr, no stack. */
function assertCannotLock(
  result: Awaited<ReturnType<typeof run>>,
  path: string,
  reason: RegExp,
): void {
  assert.equal(result.code, CANNOT_LOCK, `${result.stdout}${result.stderr}`);
  assert.equal(result.stderr, '');
  const lines = result.stdout.trim().split('\n');
  assert.equal(lines.length, 1, result.stdout);
  assert.ok(lines[0]?.startsWith(`${path}: cannot lock: `), lines[0]);
  assert.match(lines[0] as string, reason);
}

test('status reports free, then held with the holder pid, without creating anything', async () => {
  using tmp = tempDir();
  const missing = await run([cliPath, 'status', join(tmp.path, 'nope')]);
  assert.equal(missing.code, FREE);
  assert.match(missing.stdout, /free \(no such directory\)/);
  const free = await run([cliPath, 'status', tmp.path]);
  assert.equal(free.code, FREE);
  assert.match(free.stdout, /free \(no lock file\)/);
  assert.deepEqual(readdirSync(tmp.path), []);

  const { child, token } = await holdLockInChild(tmp.path);
  orphanProof(child);
  const held = await run([cliPath, 'status', tmp.path]);
  assert.equal(held.code, HELD);
  assert.match(held.stdout, new RegExp(`held by pid ${child.pid} \\[OFDLCK\\]`));
  const counter = Number(/fencing counter: (\d+)/.exec(held.stdout)?.[1]);
  assert.ok(counter > token, `the counter (${counter}) is above every token issued (${token})`);
  child.kill('SIGKILL');
  await exitOf(child);
  const after = await run([cliPath, 'status', tmp.path]);
  assert.equal(after.code, FREE);
  assert.match(after.stdout, /write\.lock: free$/m);
});

test('status with --factory simple reports an existing lock file as held or stale', async () => {
  using tmp = tempDir();
  const { child } = await holdLockInChild(tmp.path, 'simple');
  child.kill('SIGKILL');
  await exitOf(child);
  const stale = await run([cliPath, 'status', tmp.path, '--factory', 'simple']);
  assert.equal(stale.code, HELD);
  assert.match(stale.stdout, /held or stale/);
  const bad = await run([cliPath, 'status', tmp.path, '--name', '../etc']);
  assert.equal(bad.code, USAGE);
});

test('status: a directory that is a regular file cannot be locked (exit 3, one line, no stack)', async () => {
  using tmp = tempDir();
  const file = join(tmp.path, 'file');
  writeFileSync(file, 'data');
  assertCannotLock(
    await run([cliPath, 'status', file]),
    join(file, 'write.lock'),
    /is a file, not a directory/,
  );
  // Below a file (ENOTDIR), too.
  assertCannotLock(
    await run([cliPath, 'status', join(file, 'sub')]),
    join(file, 'sub', 'write.lock'),
    /not a directory/,
  );
  const lock = await run([cliPath, 'lock', file, '--', 'true']);
  assert.equal(lock.code, 1, 'lock fails on it as well');
});

test('status: a symlink at write.lock cannot be locked, whether it points to a file or nowhere', async () => {
  using tmp = tempDir();
  const target = join(tmp.path, 'target');
  writeFileSync(target, '');
  for (const [name, to] of [
    ['to-file', target],
    ['dangling', join(tmp.path, 'nothing')],
  ] as const) {
    const dir = join(tmp.path, name);
    mkdirSync(dir);
    symlinkSync(to, join(dir, 'write.lock'));
    assertCannotLock(await run([cliPath, 'status', dir]), join(dir, 'write.lock'), /symbolic link/);
    const lock = await run([cliPath, 'lock', dir, '--', 'true']);
    assert.equal(lock.code, 1, `lock fails on the ${name} symlink too`);
    assert.equal(lock.stderr.trim().split('\n').length, 1, lock.stderr);
  }
});

test('status: a directory at write.lock cannot be locked, for either factory, as lock finds', async () => {
  using tmp = tempDir();
  mkdirSync(join(tmp.path, 'write.lock'));
  for (const factory of ['native', 'simple']) {
    assertCannotLock(
      await run([cliPath, 'status', tmp.path, '--factory', factory]),
      join(tmp.path, 'write.lock'),
      /is a directory/,
    );
    const lock = await run([cliPath, 'lock', tmp.path, '--factory', factory, '--', 'true']);
    assert.equal(lock.code, 1, factory);
    assert.match(lock.stderr, /^locksmith lock: .*write\.lock is a directory.* \((IO_ERROR)\)\n$/);
  }
});

test('status: a symlink or a directory at write.lock.fence cannot be locked: a grant would fail', async () => {
  using tmp = tempDir();
  const target = join(tmp.path, 'target');
  writeFileSync(target, '');
  const viaLink = join(tmp.path, 'link');
  mkdirSync(viaLink);
  symlinkSync(target, join(viaLink, 'write.lock.fence'));
  const viaDir = join(tmp.path, 'dir');
  mkdirSync(join(viaDir, 'write.lock.fence'), { recursive: true });
  for (const [dir, reason] of [
    [viaLink, /fencing-token file .* is a symbolic link/],
    [viaDir, /fencing-token file .* is a directory/],
  ] as const) {
    assertCannotLock(await run([cliPath, 'status', dir]), join(dir, 'write.lock'), reason);
    const lock = await run([cliPath, 'lock', dir, '--', 'true']);
    assert.equal(lock.code, 1);
    assert.equal(lock.stderr.trim().split('\n').length, 1, lock.stderr);
  }
});

test('status: held by `locksmith lock DIR -- sleep` names the processes, free once it ends', async () => {
  using tmp = tempDir();
  const holder = await lockedSleep(tmp.path, 30);
  const held = await run([cliPath, 'status', tmp.path]);
  assert.equal(held.code, HELD, held.stdout);
  assert.match(held.stdout, new RegExp(`held by pid ${holder.pid} \\[OFDLCK\\]`));
  assert.match(held.stdout, /held by pid \d+ \[OFDLCK\] sleep 30/, 'the command inherits it');
  assert.equal(held.stderr, '');
  holder.kill('SIGTERM'); // forwarded to the command
  await exitOf(holder);
  const free = await run([cliPath, 'status', tmp.path]);
  assert.equal(free.code, FREE, free.stdout);
});

test('status: usage errors exit 2 with one line `locksmith status: … (INVALID_ARGUMENT)`, no stack', async () => {
  using tmp = tempDir();
  const missing = join(tmp.path, 'missing');
  for (const args of [
    ['status'],
    ['status', missing, missing],
    ['status', missing, '--name'],
    ['status', missing, '--name', ''],
    ['status', missing, '--name', 'a/b'],
    ['status', missing, '--factory', 'bogus'],
    ['status', missing, '--nope'],
    ['status', missing, '--', 'x'],
  ]) {
    const result = await run([cliPath, ...args]);
    assert.equal(result.code, USAGE, args.join(' '));
    assert.match(
      result.stderr,
      /^locksmith status: [^\n]+ \(INVALID_ARGUMENT\)\n$/,
      args.join(' '),
    );
    assert.equal(result.stdout, '');
  }
  assert.ok(!existsSync(missing), 'nothing was created');
  const debug = await run([cliPath, 'status', missing, '--name', ''], {
    env: { ...process.env, LOCKSMITH_DEBUG: '1' },
  });
  assert.equal(debug.code, USAGE);
  assert.match(debug.stderr, /^locksmith status: .*\n.*InvalidArgumentError.*\n\s+at /);
});

test('status: a FIFO at write.lock cannot be locked, and status does not block opening it', async () => {
  using tmp = tempDir();
  execFileSync('mkfifo', [join(tmp.path, 'write.lock')]);
  // A generous bound that only a blocked open (waiting for a writer forever) can reach.
  const result = await run([cliPath, 'status', tmp.path], { timeoutMs: 20_000 });
  assertCannotLock(result, join(tmp.path, 'write.lock'), /not a regular file/);
  const lock = await run([cliPath, 'lock', tmp.path, '--', 'true'], { timeoutMs: 20_000 });
  assert.equal(lock.code, 1);
});

test('status: a directory the OS will not create (/proc/x) cannot be locked, with the OS reason (exit 3)', async () => {
  // As root, /proc passes every permission check; only mkdir says no (ENOENT). As another
  // user the permission check already refuses (EACCES). Either way: exit 3, never "free".
  const result = await run([cliPath, 'status', '/proc/x']);
  assertCannotLock(
    result,
    '/proc/x/write.lock',
    /\/proc\/x cannot be created in \/proc: (ENOENT|EACCES|EPERM)$/,
  );
  // A directory that can be created is still free, and is not created.
  using tmp = tempDir();
  const missing = join(tmp.path, 'a', 'b');
  const free = await run([cliPath, 'status', missing]);
  assert.equal(free.code, FREE, free.stdout);
  assert.match(free.stdout, /free \(no such directory\)/);
  assert.deepEqual(readdirSync(tmp.path), [], 'nothing stays behind');
});

test('status: a value after an option that takes one is that value, even -h or --help-like', async () => {
  using tmp = tempDir();
  const named = await run([cliPath, 'status', tmp.path, '--name', '-h']);
  assert.equal(named.code, FREE, `${named.stdout}${named.stderr}`);
  assert.equal(named.stdout, `${join(tmp.path, '-h')}: free (no lock file)\n`);
  const factory = await run([cliPath, 'status', tmp.path, '--factory', '-h']);
  assert.equal(factory.code, USAGE);
  assert.match(
    factory.stderr,
    /^locksmith status: Unknown lock factory "-h": expected one of native, simple \(INVALID_ARGUMENT\)\n$/,
  );
  // -h anywhere else is still help.
  const help = await run([cliPath, 'status', tmp.path, '-h']);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /^Usage: locksmith status /);
});

test('status --json: what was found as one JSON object, with the same exit code', async () => {
  using tmp = tempDir();
  const free = await run([cliPath, 'status', tmp.path, '--json']);
  assert.equal(free.code, FREE, free.stderr);
  const freeJson = JSON.parse(free.stdout) as { state: string; path: string };
  assert.equal(freeJson.state, 'free');
  assert.equal(freeJson.path, join(tmp.path, 'write.lock'));
  const holder = await holdLockInChild(tmp.path, 'native');
  try {
    const held = await run([cliPath, 'status', tmp.path, '--json']);
    assert.equal(held.code, HELD, held.stderr);
    const heldJson = JSON.parse(held.stdout) as { state: string; holders: { pid: number }[] };
    assert.equal(heldJson.state, 'held');
    assert.deepEqual(
      heldJson.holders.map((h) => h.pid),
      [holder.child.pid],
    );
  } finally {
    holder.child.stdin?.write('release\n');
    await exitOf(holder.child);
  }
});
