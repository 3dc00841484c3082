import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  cliPath,
  collectOutput,
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

// ---- flock(1)'s -s, -E and a file by name (issue 20 §5) ----

/**
 * `locksmith lock <args> -- sh -c <script>`, its output collected. `done` resolves when it
 * exits; writing a line to (or ending) its stdin ends a script's `read`. Orphan-proof.
 */
function spawnLock(args: string[], script: string) {
  const child = orphanProof(
    spawn(process.execPath, [cliPath, 'lock', ...args, '--', 'sh', '-c', script], {
      stdio: ['pipe', 'pipe', 'pipe'],
    }),
  );
  const output = collectOutput(child);
  const done = exitOf(child).then(({ code, signal }) => ({
    code,
    signal,
    stdout: output.stdout(),
    stderr: output.stderr(),
  }));
  return { child, done, output: output.stdout };
}

/**
 * A `locksmith lock <args>` whose command runs (so it holds the lock) until `release()`: the
 * command prints `started <token or none>`, then on release appends `<tag> end` to `log`
 * (before it exits, so before the lock is freed) and exits 0. Disposing of it (`using`) ends
 * it too, so a failed test leaves no holder behind; one that exits or never starts fails.
 */
async function holder(args: string[], log: string, tag: string) {
  const lock = spawnLock(
    args,
    `echo "started \${LOCKSMITH_FENCING_TOKEN-none}"; read _; echo "${tag} end" >> '${log}'`,
  );
  const stop = () => {
    lock.child.stdin?.end();
    lock.child.kill('SIGTERM'); // forwarded to the command, or ends a wait
  };
  try {
    await eventually(
      () => {
        if (lock.child.exitCode !== null) throw new Error(`${tag} exited: ${lock.output()}`);
        return /^started /m.test(lock.output());
      },
      30_000,
      () => `${tag} to hold the lock (${lock.output()})`,
    );
  } catch (err) {
    stop();
    throw err;
  }
  const token = /^started (\S+)/m.exec(lock.output())?.[1];
  return {
    child: lock.child,
    token,
    release: () => {
      lock.child.stdin?.end();
      return lock.done;
    },
    [Symbol.dispose]: stop,
  };
}

/** Whether `pid` waits on kernel hints (its inotify descriptor exists only once it waits). */
function waitsOnHints(pid: number | undefined): boolean {
  return readdirSync(`/proc/${pid}/fd`).some((fd) => {
    try {
      return readlinkSync(`/proc/${pid}/fd/${fd}`) === 'anon_inode:inotify';
    } catch {
      return false;
    }
  });
}

function lines(path: string): string[] {
  return existsSync(path) ? readFileSync(path, 'utf8').trim().split('\n') : [];
}

const LINUX = process.platform === 'linux';

test('lock -s: shared holders coexist; an exclusive one fails (naming them) or waits until all are gone', {
  skip: !LINUX && 'checks holders and waiters through /proc',
}, async () => {
  using tmp = tempDir();
  const dir = join(tmp.path, 'd');
  const log = join(tmp.path, 'log');
  using first = await holder(['-s', dir], log, 'shared1');
  using second = await holder([dir, '--shared'], log, 'shared2'); // while the first holds
  assert.equal(first.token, 'none', 'a shared holder gets no fencing token');
  assert.equal(second.token, 'none');
  assert.ok(!existsSync(join(dir, 'write.lock.fence')), 'a shared lock issues no token');

  const busy = await run([cliPath, 'lock', dir, '--', 'true']);
  assert.equal(busy.code, 1);
  assert.match(
    busy.stderr,
    /^locksmith lock: \S+ is locked: write\.lock is held by pid [^\n]+\(LOCK_OBTAIN_FAILED\)\n$/,
  );
  for (const h of [first, second]) assert.match(busy.stderr, new RegExp(`\\b${h.child.pid}\\b`));

  const exclusive = spawnLock(
    [dir, '--wait', '60s'],
    `echo "exclusive $LOCKSMITH_FENCING_TOKEN" >> '${log}'`,
  );
  await eventually(() => waitsOnHints(exclusive.child.pid), 30_000, 'the exclusive lock to wait');
  await first.release();
  // A third shared holder may still come in while another shared one holds.
  const third = await run([
    cliPath,
    'lock',
    '-s',
    dir,
    '--',
    'sh',
    '-c',
    `echo "shared3 end" >> '${log}'`,
  ]);
  assert.equal(third.code, 0, third.stderr);
  await second.release();
  const done = await exclusive.done;
  assert.equal(done.code, 0, done.stderr);
  const order = lines(log);
  assert.deepEqual(order.slice(0, 3).sort(), ['shared1 end', 'shared2 end', 'shared3 end']);
  assert.match(
    order[3] ?? '',
    /^exclusive \d+$/,
    'the exclusive command ran only after every shared one',
  );
  assert.equal(order.length, 4);
});

test('lock -s fails (naming the holder) or waits while an exclusive lock is held, across processes', {
  skip: !LINUX && 'checks waiters through /proc',
}, async () => {
  using tmp = tempDir();
  const log = join(tmp.path, 'log');
  using exclusive = await holder([tmp.path], log, 'exclusive');
  assert.match(exclusive.token ?? '', /^\d+$/);
  const busy = await run([cliPath, 'lock', '-s', tmp.path, '--', 'true']);
  assert.equal(busy.code, 1);
  assert.match(
    busy.stderr,
    new RegExp(
      `^locksmith lock: ${tmp.path} is locked: write\\.lock is held by pid ${exclusive.child.pid}\\b[^\\n]*\\(LOCK_OBTAIN_FAILED\\)\\n$`,
    ),
  );
  const shortForm = await run([cliPath, 'lock', '-s', '-E', '75', tmp.path, '--', 'true']);
  assert.equal(shortForm.code, 75);
  const shared = spawnLock(['-s', '--wait', '60s', tmp.path], `echo shared >> '${log}'`);
  await eventually(() => waitsOnHints(shared.child.pid), 30_000, 'the shared lock to wait');
  await exclusive.release();
  assert.equal((await shared.done).code, 0);
  assert.deepEqual(lines(log), ['exclusive end', 'shared']);
});

test('a shared lock neither gets nor disturbs fencing tokens: exclusive tokens keep increasing', async () => {
  using tmp = tempDir();
  const token = async () => {
    const r = await run([
      cliPath,
      'lock',
      tmp.path,
      '--',
      'sh',
      '-c',
      'echo "$LOCKSMITH_FENCING_TOKEN"',
    ]);
    assert.equal(r.code, 0, r.stderr);
    return Number(r.stdout);
  };
  const before = await token();
  const shared = await run(
    [cliPath, 'lock', '-s', tmp.path, '--', 'sh', '-c', `echo "\${LOCKSMITH_FENCING_TOKEN-unset}"`],
    { env: { ...process.env, LOCKSMITH_FENCING_TOKEN: '12345' } },
  );
  assert.equal(shared.code, 0, shared.stderr);
  assert.equal(
    shared.stdout,
    'unset\n',
    "an outer lock's token is not passed on as the shared lock's",
  );
  assert.ok((await token()) > before);
});

test('lock -E <n>: the exit status when the lock is held elsewhere, at once and after --wait; 1 otherwise', async () => {
  using tmp = tempDir();
  const held = await holdLockInChild(tmp.path);
  orphanProof(held.child);
  try {
    for (const args of [
      ['-E', '75'],
      ['--conflict-exit-code', '75'],
      ['--conflict-exit-code=75'],
    ]) {
      const busy = await run([cliPath, 'lock', ...args, tmp.path, '--', 'true']);
      assert.equal(busy.code, 75, args.join(' '));
      assert.match(
        busy.stderr,
        /^locksmith lock: [^\n]+ is locked: [^\n]+\(LOCK_OBTAIN_FAILED\)\n$/,
      );
    }
    const timedOut = await run([
      cliPath,
      'lock',
      tmp.path,
      '--wait',
      '100ms',
      '-E',
      '75',
      '--',
      'true',
    ]);
    assert.equal(timedOut.code, 75);
    assert.match(
      timedOut.stderr,
      /^locksmith lock: [^\n]+ is locked after waiting 100ms: [^\n]+\(LOCK_TIMEOUT\)\n$/,
    );
    const zero = await run([cliPath, 'lock', '-E', '0', tmp.path, '--', 'true']);
    assert.equal(zero.code, 0);
    assert.match(zero.stderr, /is locked/);
    const dflt = await run([cliPath, 'lock', tmp.path, '--', 'true']);
    assert.equal(dflt.code, 1);
  } finally {
    held.child.kill('SIGKILL');
    await exitOf(held.child);
  }
  // Obtained: the command's own code, whatever -E says.
  const ran = await run([cliPath, 'lock', '-E', '75', tmp.path, '--', 'sh', '-c', 'exit 3']);
  assert.equal(ran.code, 3);
  // A lock that cannot be taken at all is no conflict: exit 1.
  const file = join(tmp.path, 'a-file');
  writeFileSync(file, '');
  const cannot = await run([cliPath, 'lock', '-E', '75', file, '--', 'true']);
  assert.equal(cannot.code, 1);
  assert.match(cannot.stderr, /\(IO_ERROR\)\n$/);
});

test('lock --file: an exclusive kernel lock on the file named, with a token from <file>.fence', {
  skip: !LINUX && 'names holders through /proc',
}, async () => {
  using tmp = tempDir();
  const file = join(tmp.path, 'app.lock');
  const log = join(tmp.path, 'log');
  using first = await holder(['--file', file], log, 'first');
  assert.ok(existsSync(file), 'the file is created');
  assert.match(first.token ?? '', /^\d+$/);
  assert.ok(Number(readFileSync(`${file}.fence`, 'utf8')) > Number(first.token));
  const busy = await run([cliPath, 'lock', '--file', file, '-E', '9', '--', 'true']);
  assert.equal(busy.code, 9);
  assert.match(
    busy.stderr,
    new RegExp(
      `^locksmith lock: ${file} is locked: held by pid ${first.child.pid}\\b[^\\n]*\\(LOCK_OBTAIN_FAILED\\)\\n$`,
    ),
  );
  const shared = await run([cliPath, 'lock', '--file', file, '-s', '--', 'true']);
  assert.equal(shared.code, 1, 'a shared lock on the file waits for the exclusive one too');
  const second = spawnLock(
    ['--file', file, '--wait', '60s'],
    `echo "second $LOCKSMITH_FENCING_TOKEN" >> '${log}'`,
  );
  await eventually(() => waitsOnHints(second.child.pid), 30_000, 'the second lock to wait');
  await first.release();
  assert.equal((await second.done).code, 0);
  const [end, next] = lines(log);
  assert.equal(end, 'first end');
  assert.ok(Number(next?.split(' ')[1]) > Number(first.token), 'tokens increase');
});

test('lock --file -s: shared holders of a file coexist and exclude an exclusive one', async () => {
  using tmp = tempDir();
  const file = join(tmp.path, 'data.lock');
  const log = join(tmp.path, 'log');
  {
    using a = await holder(['--file', file, '-s'], log, 'a');
    using b = await holder(['-s', '--file', file], log, 'b');
    assert.equal(a.token, 'none');
    assert.ok(!existsSync(`${file}.fence`));
    const busy = await run([cliPath, 'lock', '--file', file, '-E', '75', '--', 'true']);
    assert.equal(busy.code, 75);
    const timedOut = await run([
      cliPath,
      'lock',
      '--file',
      file,
      '--wait',
      '50ms',
      '-E',
      '75',
      '--',
      'true',
    ]);
    assert.equal(timedOut.code, 75);
    assert.match(timedOut.stderr, /is locked after waiting 50ms: held by .*\(LOCK_TIMEOUT\)\n$/);
    await a.release();
    await b.release();
  }
  const free = await run([cliPath, 'lock', '--file', file, '--', 'true']);
  assert.equal(free.code, 0, free.stderr);
});

test("lock --file <dir>/write.lock is the very lock of lock <dir>, and the directory factory's", async () => {
  using tmp = tempDir();
  const held = await holdLockInChild(tmp.path); // NativeFSLockFactory, in another process
  try {
    for (const mode of [[], ['-s']]) {
      const r = await run([
        cliPath,
        'lock',
        ...mode,
        '--file',
        join(tmp.path, 'write.lock'),
        '--',
        'true',
      ]);
      assert.equal(r.code, 1, mode.join(' '));
    }
    const other = await run([
      cliPath,
      'lock',
      '--file',
      join(tmp.path, 'other.lock'),
      '--',
      'true',
    ]);
    assert.equal(other.code, 0);
  } finally {
    held.child.kill('SIGKILL');
    await exitOf(held.child);
  }
  const log = join(tmp.path, 'log');
  {
    using viaFile = await holder(['--file', join(tmp.path, 'write.lock')], log, 'file');
    const viaDir = await run([cliPath, 'lock', tmp.path, '--', 'true']);
    assert.equal(viaDir.code, 1);
    await viaFile.release();
  }
});

test('lock --file takes an OFD lock: it does not exclude flock(1) on Linux (documented)', {
  skip: (!LINUX || !existsSync('/usr/bin/flock')) && 'needs Linux and flock(1)',
}, async () => {
  using tmp = tempDir();
  const file = join(tmp.path, 'x.lock');
  const r = await run([
    cliPath,
    'lock',
    '--file',
    file,
    '--',
    '/usr/bin/flock',
    '--nonblock',
    file,
    'true',
  ]);
  assert.equal(r.code, 0, `flock(2) and OFD locks do not conflict on Linux: ${r.stderr}`);
});

test('lock --file, -s and -E usage errors exit 2 with one line, before anything is created', async () => {
  using tmp = tempDir();
  const file = join(tmp.path, 'f.lock');
  const dir = join(tmp.path, 'not-yet');
  for (const [args, message] of [
    [['--file', tmp.path], /--file \S+ is a directory/],
    [['--file', join(tmp.path, 'no', 'such', 'x.lock')], /its directory \S+ does not exist/],
    [['--file', ''], /--file is empty/],
    [['--file', file, dir], /not both/],
    [['--file', file, '--name', 'x.lock'], /--name and --factory are for a directory/],
    [['--file', file, '--factory', 'native'], /--name and --factory are for a directory/],
    [['--file'], /--file needs a value/],
    [['-s', '--factory', 'simple', dir], /--shared .*--factory simple/],
    [
      ['--shared', '--factory', 'simple', '--file', file],
      /--name and --factory are for a directory/,
    ],
    [['-E', '256', dir], /--conflict-exit-code \(-E\) "256" is not an exit status/],
    [['-E', '-1', dir], /"-1" is not an exit status/],
    [['-E', 'abc', dir], /"abc" is not an exit status/],
    [['--conflict-exit-code', '1.5', dir], /"1.5" is not an exit status/],
    [['--conflict-exit-code=', dir], /"" is not an exit status/],
    [['-E', '-h', dir], /"-h" is not an exit status/],
    [[dir, '-E'], /-E needs a value/],
    [['-E75', dir], /unknown option -E75/],
    [['-x', dir], /unknown option -x/],
    [['--file', file], /then -- and a command/],
  ] as const) {
    const withCommand = args.at(-1) === file && args.length === 2 ? args : [...args, '--', 'true'];
    const result = await run([cliPath, 'lock', ...withCommand]);
    assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
    assert.match(result.stderr, /^locksmith lock: [^\n]+ \(INVALID_ARGUMENT\)\n$/, args.join(' '));
    assert.match(result.stderr, message, args.join(' '));
  }
  assert.ok(!existsSync(dir), 'no directory was created');
  assert.ok(!existsSync(file), 'no lock file was created');
  // -h after an option that takes a value is that value; after a boolean one, help.
  const help = await run([cliPath, 'lock', '-s', '-h']);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /-s, --shared/);
  assert.match(help.stdout, /-E, --conflict-exit-code <n>/);
});
