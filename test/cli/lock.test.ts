import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  cliPath,
  eventually,
  exitOf,
  holdLockInChild,
  lockedSleep,
  orphanProof,
  run,
  sleep,
  tempDir,
} from '../helpers.js';

test('lock runs the command under the lock and passes its exit code and the fencing token', async () => {
  using tmp = tempDir();
  const result = await run([
    cliPath,
    'lock',
    tmp.path,
    '--',
    'sh',
    '-c',
    'echo "token=$LOCKSMITH_FENCING_TOKEN"; exit 7',
  ]);
  assert.equal(result.code, 7);
  const token = Number(/token=(\d+)/.exec(result.stdout)?.[1]);
  assert.ok(token > 0);
  // The fence file holds the counter's reservation: never below an issued token.
  assert.ok(Number(readFileSync(join(tmp.path, 'write.lock.fence'), 'utf8')) > token);
  const killed = await run([cliPath, 'lock', tmp.path, '--', 'sh', '-c', 'kill -TERM $$']);
  assert.equal(killed.code, 128 + 15);
});

test('lock fails with one line naming the directory when held elsewhere, or waits with --wait', async () => {
  using tmp = tempDir();
  const holder = await holdLockInChild(tmp.path);
  orphanProof(holder.child); // a failed assertion must not leave the run waiting for it
  const busy = await run([cliPath, 'lock', tmp.path, '--', 'true']);
  assert.equal(busy.code, 1);
  assert.equal(busy.stderr.trim().split('\n').length, 1);
  assert.match(busy.stderr, new RegExp(`^locksmith lock: ${tmp.path}.* is locked`));
  assert.match(
    busy.stderr,
    new RegExp(`held by pid ${holder.child.pid}\\b.*\\(LOCK_OBTAIN_FAILED\\)\n$`),
  );

  const timedOut = await run([cliPath, 'lock', tmp.path, '--wait', '200ms', '--', 'true']);
  assert.equal(timedOut.code, 1);
  assert.match(timedOut.stderr, /is locked after waiting 200ms: .*\(LOCK_TIMEOUT\)\n$/);

  const waiting = run([cliPath, 'lock', tmp.path, '--wait', '30s', '--', 'sh', '-c', 'echo ran']);
  await sleep(300);
  holder.child.stdin?.write('release\n');
  const waited = await waiting;
  assert.equal(waited.code, 0);
  assert.equal(waited.stdout.trim(), 'ran');
});

test('lock: the command keeps the lock even if locksmith is killed with SIGKILL', async () => {
  using tmp = tempDir();
  const child = await lockedSleep(tmp.path, 2);
  child.kill('SIGKILL');
  await exitOf(child);
  const busy = await run([cliPath, 'lock', tmp.path, '--', 'true']);
  assert.equal(busy.code, 1, 'the orphaned command still holds the lock');
  // When the orphaned command ends, the kernel frees the lock.
  await eventually(
    async () => (await run([cliPath, 'lock', tmp.path, '--', 'true'])).code === 0,
    10_000,
    'the lock to be free',
    50,
  );
});

test('lock usage errors exit 2 with one line `locksmith lock: … (INVALID_ARGUMENT)`, before anything is created', async () => {
  using tmp = tempDir();
  const dir = join(tmp.path, 'not-yet');
  for (const args of [
    ['lock'],
    ['lock', dir],
    ['lock', dir, '--'],
    ['lock', '', '--', 'true'],
    ['lock', dir, '--factory', 'bogus', '--', 'true'],
    ['lock', dir, '--factory', 'none', '--', 'true'],
    ['lock', dir, '--factory', '-h', '--', 'true'],
    ['lock', dir, '--wait', '-h', '--', 'true'],
    ['lock', dir, '--wait', 'soon', '--', 'true'],
    ['lock', dir, '--wait', '-1s', '--', 'true'],
    ['lock', dir, '--wait', '--', 'true'],
    ['lock', dir, '--nope', '--', 'true'],
  ]) {
    const result = await run([cliPath, ...args]);
    assert.equal(result.code, 2, args.join(' '));
    assert.match(result.stderr, /^locksmith lock: [^\n]+ \(INVALID_ARGUMENT\)\n$/, args.join(' '));
    if (args[3] === '--factory') {
      assert.match(result.stderr, /Unknown lock factory "[^"]+": expected one of native, simple/);
    }
  }
  assert.ok(!existsSync(dir), 'the directory was not created');
  const missing = await run([cliPath, 'lock', tmp.path, '--', '/no/such/program']);
  assert.equal(missing.code, 127);
  assert.equal(missing.stderr, 'locksmith lock: cannot run /no/such/program (ENOENT)\n');
});

test('a misspelled option is named unknown, with the nearest option the command has', async () => {
  using tmp = tempDir();
  const typo = await run([cliPath, 'lock', tmp.path, '--wiat', '2s', '--', 'true']);
  assert.equal(typo.code, 2);
  assert.equal(
    typo.stderr,
    'locksmith lock: unknown option --wiat (did you mean --wait?) (INVALID_ARGUMENT)\n',
  );
  const far = await run([cliPath, 'status', tmp.path, '--zzzzzz']);
  assert.equal(far.code, 2);
  assert.equal(far.stderr, 'locksmith status: unknown option --zzzzzz (INVALID_ARGUMENT)\n');
  const rows = await run([cliPath, 'rows', 'get', 't', 'r', '--valeus']);
  assert.equal(rows.code, 2);
  assert.match(rows.stderr, /unknown option --valeus \(did you mean --values\?\)/);
});

test('lock --wait refuses a bare number (ms or s?) and shows the option with a unit', async () => {
  using tmp = tempDir();
  const dir = join(tmp.path, 'not-yet');
  for (const [value, example] of [
    ['2', '--wait 2s'],
    ['0.5', '--wait 0.5s'],
  ] as const) {
    const result = await run([cliPath, 'lock', dir, '--wait', value, '--', 'true']);
    assert.equal(result.code, 2, result.stderr);
    assert.ok(result.stderr.includes(example), result.stderr);
    assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
  }
  assert.ok(!existsSync(dir), 'nothing was taken or created');
});

test('lock --wait -1s names the negative duration in one line, not "argument is ambiguous"', async () => {
  using tmp = tempDir();
  for (const args of [['--wait', '-1s'], ['--wait', '-2'], ['--wait=-1s']]) {
    const result = await run([cliPath, 'lock', tmp.path, ...args, '--', 'true']);
    assert.equal(result.code, 2, args.join(' '));
    assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
    assert.match(result.stderr, /^locksmith lock: --wait "-\S+" is negative/);
    assert.doesNotMatch(result.stderr, /ambiguous/);
  }
  assert.deepEqual(readdirSync(tmp.path), [], 'no lock file was created');
});

test('lock errors are one line with their code, the stack only with LOCKSMITH_DEBUG=1', async () => {
  using tmp = tempDir();
  const file = join(tmp.path, 'file');
  writeFileSync(file, '');
  const plain = await run([cliPath, 'lock', file, '--', 'true']);
  assert.equal(plain.code, 1);
  assert.match(plain.stderr, /^locksmith lock: [^\n]*file[^\n]* \(IO_ERROR\)\n$/);
  const debug = await run([cliPath, 'lock', file, '--', 'true'], {
    env: { ...process.env, LOCKSMITH_DEBUG: '1' },
  });
  assert.equal(debug.code, 1);
  assert.match(debug.stderr, /^locksmith lock: .*\(IO_ERROR\)\n/);
  assert.match(debug.stderr, /\n\s+at /, 'a stack follows');
});

test('lock --factory simple removes its lock file afterwards', async () => {
  using tmp = tempDir();
  const result = await run([cliPath, 'lock', tmp.path, '--factory', 'simple', '--', 'true']);
  assert.equal(result.code, 0);
  const again = await run([cliPath, 'lock', tmp.path, '--factory', 'simple', '--', 'true']);
  assert.equal(again.code, 0);
});

test('lock fails at once, with the OS reason, on a directory that cannot be created (/proc/x)', {
  skip: !existsSync('/proc/self') && 'needs /proc',
}, async () => {
  // Node's recursive mkdir spins forever at 100% CPU here; the run is killed after the
  // timeout, so the old behaviour fails the exit-code assertion instead of hanging.
  const result = await run([cliPath, 'lock', '/proc/locksmith-no-such-dir', '--', 'true'], {
    timeoutMs: 20_000,
  });
  assert.equal(result.signal, null, 'killed after the timeout: mkdir did not fail at once');
  assert.equal(result.code, 1);
  assert.equal(result.stderr.trim().split('\n').length, 1);
  assert.match(
    result.stderr,
    /^locksmith lock: Cannot use \/proc\/locksmith-no-such-dir as a directory: it cannot be created \(ENOENT: .*\) \(IO_ERROR\)\n$/,
  );
});

test('lock --factory simple on a write.lock a native lock left behind says it may be a leftover and how to check', async () => {
  using tmp = tempDir();
  // A native lock, taken and released: its write.lock stays, a plain file nobody holds.
  const native = await run([cliPath, 'lock', tmp.path, '--', 'true']);
  assert.equal(native.code, 0);
  for (const wait of [[], ['--wait', '100ms']]) {
    const result = await run([
      cliPath,
      'lock',
      '--factory',
      'simple',
      ...wait,
      tmp.path,
      '--',
      'true',
    ]);
    assert.equal(result.code, 1);
    assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
    assert.match(result.stderr, /write\.lock exists \(created [^)]+\); it may be a leftover/);
    assert.match(result.stderr, /locksmith status /);
    assert.doesNotMatch(result.stderr, /held by another process/);
    assert.match(
      result.stderr,
      wait.length === 0 ? /\(LOCK_OBTAIN_FAILED\)\n$/ : /\(LOCK_TIMEOUT\)\n$/,
    );
  }
});

test('Ctrl-C while lock --wait waits: "interrupted", exit 130, nothing run, nothing left held', async () => {
  using tmp = tempDir();
  const holder = await holdLockInChild(tmp.path);
  try {
    const marker = join(tmp.path, 'ran');
    const waiter = orphanProof(
      spawn(process.execPath, [cliPath, 'lock', tmp.path, '--wait', '10m', '--', 'touch', marker], {
        stdio: ['ignore', 'ignore', 'pipe'],
      }),
    );
    let stderr = '';
    waiter.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    // It waits: its wait watches the directory (an inotify descriptor), which it sets up only
    // after its signal handlers (SigCgt cannot tell: Node catches SIGINT from the start to
    // restore the terminal).
    await eventually(
      () =>
        readdirSync(`/proc/${waiter.pid}/fd`).some((fd) => {
          try {
            return readlinkSync(`/proc/${waiter.pid}/fd/${fd}`) === 'anon_inode:inotify';
          } catch {
            return false;
          }
        }),
      30_000,
      'the lock to wait',
    );
    waiter.kill('SIGINT');
    assert.deepEqual(await exitOf(waiter), { code: 130, signal: null });
    assert.equal(stderr, `locksmith lock: interrupted (SIGINT) while waiting for ${tmp.path}\n`);
    assert.ok(!existsSync(marker), 'the command never ran');
  } finally {
    holder.child.kill('SIGKILL');
    await exitOf(holder.child);
  }
});

test('lock --name holds another lock file of the directory, as status --name reads it', async () => {
  using tmp = tempDir();
  const holder = await holdLockInChild(tmp.path);
  try {
    const other = await run([
      cliPath,
      'lock',
      tmp.path,
      '--name',
      'other.lock',
      '--',
      'sh',
      '-c',
      'echo "$LOCKSMITH_FENCING_TOKEN"',
    ]);
    assert.equal(other.code, 0, other.stderr);
    assert.match(other.stdout, /^\d+\n$/);
    const busy = await run([cliPath, 'lock', tmp.path, '--name', 'write.lock', '--', 'true']);
    assert.equal(busy.code, 1);
    assert.match(busy.stderr, /write\.lock is held/);
    const bad = await run([cliPath, 'lock', tmp.path, '--name', '../escape', '--', 'true']);
    assert.equal(bad.code, 2);
  } finally {
    holder.child.kill('SIGKILL');
    await exitOf(holder.child);
  }
});
