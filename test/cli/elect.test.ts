import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  type Elect,
  electedPair,
  isDead,
  killMaster,
  readLines,
  recordingCommand,
  runElect,
  spawnElect,
  terminate,
  tokenOf,
} from '../fixtures/elect-process.js';
import { cliPath, eventually, exitOf, run, sleep, tempDir } from '../helpers.js';

// Fast timings so that failovers take well under a second: keep-alive (and the post-acquire
// pause) 300 ms, acquire retry 200 ms (inotify hints usually wake the waiter sooner).
const FAST = ['--renew', '300ms', '--acquire-interval', '200ms'];

const sharedFile = (dir: string) => ['--locker', 'shared-file', '--dir', dir];

function elect(dir: string, id: string, command: string[], extra: string[] = FAST): Elect {
  return spawnElect(sharedFile(dir), id, command, extra);
}

/** Waits for `e` to be master and its command to write its pid to `pidFile`; returns the pid. */
async function commandPid(e: Elect, pidFile: string): Promise<number> {
  await e.line(/became master/);
  return Number(await eventually(() => readLines(pidFile)[0], 20_000, 'pid'));
}

test('elect: one master at a time; kill -9 of the master kills its command and the slave takes over with a larger token', async () => {
  using tmp = tempDir();
  const log = join(tmp.path, 'runs.log');
  const command = recordingCommand(log);
  const a = elect(join(tmp.path, 'store'), 'a', command);
  const b = elect(join(tmp.path, 'store'), 'b', command);
  try {
    // 800 ms: several keep-alives and acquire retries of the slave.
    const { first, second, command: run1 } = await electedPair(a, b, log, 800);
    const { command: run2 } = await killMaster(first, second, log, run1);
    await terminate(second, run2);
    assert.match(second.lines.at(-1) ?? '', /stopped \(received SIGTERM\)/);
  } finally {
    a.child.kill('SIGKILL');
    b.child.kill('SIGKILL');
  }
});

test('elect: the command exiting on its own ends elect with its status, one stderr line per role change', async () => {
  using tmp = tempDir();
  const exits = elect(tmp.path, 'x', ['sh', '-c', 'exit 7']);
  assert.deepEqual(await exitOf(exits.child), { code: 7, signal: null });
  assert.equal(exits.lines.length, 3, JSON.stringify(exits.lines));
  // A first contender has not found another master: it never says it waits as a slave.
  assert.match(exits.lines[0] ?? '', /^locksmith elect \[x\]: trying to become master of /);
  assert.match(exits.lines[1] ?? '', /^locksmith elect \[x\]: became master with token \d+/);
  assert.match(
    exits.lines[2] ?? '',
    /^locksmith elect \[x\]: stopped \(command exited with status 7\)/,
  );

  const killed = elect(tmp.path, 'y', ['sh', '-c', 'kill -TERM $$']);
  assert.deepEqual(await exitOf(killed.child), { code: 128 + 15, signal: null });

  const missing = elect(tmp.path, 'z', ['/no/such/program']);
  assert.deepEqual(await exitOf(missing.child), { code: 127, signal: null });
  // One format for every one-line error: `locksmith <command>: <message> (<CODE>)`.
  assert.equal(
    await missing.line(/cannot run/),
    'locksmith elect: cannot run /no/such/program (ENOENT)',
  );

  // The lock was released each time: a fresh elect becomes master at once.
  const again = await runElect(sharedFile(tmp.path), 'w', ['true']);
  assert.equal(again.code, 0);
});

test('elect: SIGTERM/SIGINT stop the command (SIGKILL after --grace) and exit 128+signal', async () => {
  using tmp = tempDir();
  const marks = join(tmp.path, 'marks');
  const polite = elect(join(tmp.path, 's1'), 'polite', [
    'sh',
    '-c',
    `trap 'echo term >> ${marks}; exit 0' TERM; echo ready >> ${marks}; while :; do sleep 0.05; done`,
  ]);
  await polite.line(/became master/);
  await eventually(
    () => readLines(marks).includes('ready'),
    20_000,
    () => 'ready',
  );
  polite.child.kill('SIGTERM');
  assert.deepEqual(await exitOf(polite.child), { code: 143, signal: null });
  assert.ok(readLines(marks).includes('term'), 'the command got SIGTERM');

  const pidFile = join(tmp.path, 'pid');
  const stubborn = elect(
    join(tmp.path, 's2'),
    'stubborn',
    ['sh', '-c', `trap '' TERM; echo $$ > ${pidFile}; while :; do sleep 0.05; done`],
    [...FAST, '--grace', '300ms'],
  );
  const pid = await commandPid(stubborn, pidFile);
  const t0 = Date.now();
  stubborn.child.kill('SIGINT');
  assert.deepEqual(await exitOf(stubborn.child), { code: 130, signal: null });
  const took = Date.now() - t0;
  // Order, not speed: the SIGKILL waited for the grace.
  assert.ok(took >= 250, `stopped only after the grace: ${took} ms`);
  assert.ok(isDead(pid));
  assert.match(stubborn.lines.at(-1) ?? '', /stopped \(received SIGINT\)/);
});

test('elect: a stolen lock (file rewritten, then deleted) stops the command; elect waits again and becomes master again', async () => {
  using tmp = tempDir();
  const log = join(tmp.path, 'log');
  const store = join(tmp.path, 'store');
  const e = elect(store, 'victim', [
    'sh',
    '-c',
    `trap 'echo "term $LOCKSMITH_FENCING_TOKEN" >> ${log}; exit 0' TERM; echo "start $LOCKSMITH_FENCING_TOKEN" >> ${log}; while :; do sleep 0.05; done`,
  ]);
  try {
    const token1 = tokenOf(await e.line(/became master/));
    await eventually(
      () => readLines(log)[0],
      20_000,
      () => 'start',
    );

    // Someone else rewrites the lock file (no kernel lock needed: it is advisory).
    writeFileSync(join(store, 'lock'), Buffer.alloc(32));
    assert.match(await e.line(/lost mastership/), /no longer the lock owner/);
    const token2 = tokenOf(await e.line(/became master/, 2));
    assert.ok(token2 > token1, `${token2} > ${token1}`);
    await e.line(/trying to become master/, 2);
    // The command must have started (trap set) before its lock goes: the locker notices a
    // deleted lock file within milliseconds now, not at the next keep-alive.
    await eventually(
      () => readLines(log)[2],
      5000,
      () => 'second start',
    );

    rmSync(join(store, 'lock'));
    await e.line(/lost mastership/, 2);
    const token3 = tokenOf(await e.line(/became master/, 3));
    assert.ok(token3 > token2, `${token3} > ${token2}`);
    await eventually(
      () => readLines(log)[4],
      30_000,
      () => 'third start',
    );
    assert.deepEqual(readLines(log), [
      `start ${token1}`,
      `term ${token1}`,
      `start ${token2}`,
      `term ${token2}`,
      `start ${token3}`,
    ]);
    e.child.kill('SIGTERM');
    assert.deepEqual(await exitOf(e.child), { code: 143, signal: null });
  } finally {
    e.child.kill('SIGKILL');
  }
});

test('elect --fail-if-locked exits 1 while another process is master; a waiting slave stops on SIGINT', async () => {
  using tmp = tempDir();
  const master = elect(tmp.path, 'm', ['sleep', '1000']);
  try {
    await master.line(/became master/);
    const busy = await runElect(sharedFile(tmp.path), 'f', ['true'], ['--fail-if-locked']);
    assert.equal(busy.code, 1);
    // Who holds it (as far as the store says), and no claim to wait.
    assert.deepEqual(
      busy.stderr
        .trim()
        .split('\n')
        .map((l) => l.replace(/^locksmith elect \[f\]: /, '')),
      [
        `trying to become master of ${tmp.path} (--fail-if-locked: exiting if another process is master)`,
        `stopped: another process is master (--fail-if-locked): Lock held by another process: ${join(tmp.path, 'lock')} (${tmp.path})`,
      ],
    );

    // A slave interrupted while it waits exits 130 without ever running its command.
    const slave = elect(tmp.path, 's', ['sh', '-c', 'echo ran >&2']);
    await slave.line(/waiting as slave/);
    await sleep(300);
    slave.child.kill('SIGINT');
    assert.deepEqual(await exitOf(slave.child), { code: 130, signal: null });
    assert.deepEqual(
      slave.lines.map((l) => l.replace(/^locksmith elect \[s\]: /, '').split(/:| of /)[0]),
      ['trying to become master', 'waiting as slave', 'stopped (received SIGINT)'],
    );
  } finally {
    master.child.kill('SIGTERM');
    await exitOf(master.child);
  }
});

test('elect usage errors exit 2 with a clear one-line message', async () => {
  using tmp = tempDir();
  const sf = ['--locker', 'shared-file', '--dir', tmp.path, '--id', 'u'];
  // Every case fails before connecting: the database file must never appear.
  const neverDb = `sqlite:${join(tmp.path, 'never.db')}`;
  const ld = ['--locker', 'lease-database', '--db', neverDb, '--id', 'u'];
  const cases: [string[], RegExp][] = [
    [['--id', 'u', '--', 'true'], /--locker is required/],
    [['--locker', 'zookeeper', '--id', 'u', '--', 'true'], /unknown locker "zookeeper"/],
    [['--locker', 'shared-file', '--id', 'u', '--', 'true'], /needs --dir/],
    [['--locker', 'shared-file', '--dir', tmp.path, '--', 'true'], /--id <name> is required/],
    [['--locker', 'lease-database', '--id', 'u', '--', 'true'], /needs --db <url>/],
    [
      ['--locker', 'database', '--db', neverDb, '--id', 'u', '--lease', '1s', '--', 'true'],
      /--lease applies only/,
    ],
    [[...sf], /expected -- and a command/],
    [[...sf, '--'], /expected -- and a command/],
    [[...sf, 'extra', '--', 'true'], /unexpected argument "extra"/],
    [[...sf, '--renew', '-1s', '--', 'true'], /--renew "-1s": durations cannot be negative/],
    [[...sf, '--renew=-1s', '--', 'true'], /Invalid --renew/],
    [[...sf, '--acquire-interval', 'soon', '--', 'true'], /Invalid --acquire-interval "soon"/],
    [[...sf, '--grace', '5 parsecs', '--', 'true'], /Invalid --grace/],
    [[...sf, '--renew', '0s', '--', 'true'], /must be greater than 0/],
    [[...sf, '--lease', '10s', '--', 'true'], /--lease does not apply to --locker shared-file/],
    [[...sf, '--db', neverDb, '--', 'true'], /--db does not apply/],
    [[...sf, '--nope', '--', 'true'], /unknown option --nope/],
    [
      [...ld, '--renew', '12s', '--', 'true'],
      /--renew \(12s\) must be shorter than --lease \(10000ms, the default\)/,
    ],
    [
      [...ld, '--lease', '4s', '--renew', '1600ms', '--', 'true'],
      /--renew \(1600ms\) must be at most 3\/8 of --lease \(4s\), e\.g\. --renew 1000ms/,
    ],
    [
      [...ld, '--renew', '4s', '--', 'true'],
      /--renew \(4s\) must be at most 3\/8 of --lease \(10000ms, the default\)/,
    ],
    [
      [...ld, '--lease', '10', '--', 'true'],
      /Invalid --lease "10": a duration needs a unit \(ms, s, m, h\), e\.g\. --lease 10s/,
    ],
    [[...sf, '--renew', '300', '--', 'true'], /e\.g\. --renew 300s/],
    [[...sf, '--grace', '5', '--', 'true'], /Invalid --grace "5": a duration needs a unit/],
    [[...sf, '--acquire-interval', '0.5', '--', 'true'], /needs a unit/],
    [[...ld, '--lease', '500ms', '--', 'true'], /--lease \(500ms\) must be at least 1s/],
    [[...sf, '--renew', '0.5ms', '--', 'true'], /Invalid --renew "0\.5ms": shorter than 1ms/],
    [[...sf, '--grace', '0.2ms', '--', 'true'], /Invalid --grace "0\.2ms": shorter than 1ms/],
    [
      [...ld, '--lease', '600h', '--', 'true'],
      /Invalid --lease "600h": longer than the longest duration allowed, 2147483647ms/,
    ],
    [[...sf, '--renew', '597h', '--', 'true'], /Invalid --renew "597h": longer than the longest/],
    [[...sf, '--acquire-interval', '35792m', '--', 'true'], /longer than the longest duration/],
    [[...sf, '--grace', '25d', '--', 'true'], /Invalid --grace/],
    [
      [...ld, '--acquire-interval', '1s', '--', 'true'],
      /--acquire-interval does not apply to --locker lease-database/,
    ],
    [
      ['--locker', 'lease-database', '--db', 'nosuch:db', '--id', 'u', '--', 'true'],
      /Unsupported database URL/,
    ],
    [
      [
        '--locker',
        'lease-database',
        '--db',
        neverDb,
        '--table',
        'T;DROP',
        '--id',
        'u',
        '--',
        'true',
      ],
      /lockTableName must be an SQL identifier/,
    ],
    [
      [...ld, '--lease', '2s', '--renew', '2s', '--', 'true'],
      /--renew \(2s\) must be shorter than --lease \(2s\)/,
    ],
  ];
  const results = await Promise.all(cases.map(([args]) => run([cliPath, 'elect', ...args])));
  for (const [i, [args, pattern]] of cases.entries()) {
    const result = results[i] as Awaited<ReturnType<typeof run>>;
    assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
    assert.match(result.stderr, pattern, args.join(' '));
    assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
  }
  assert.ok(!existsSync(join(tmp.path, 'never.db')));
});

/** The pid of `elect`'s watchdog process (its child running command-watchdog-process.js). */
function watchdogOf(electPid: number): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== electPid) continue;
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('command-watchdog-process')) {
        return Number(entry);
      }
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

test('elect: its watchdog survives SIGTERM to it; a watchdog killed with kill -9 makes elect stop its command and exit 1', async () => {
  using tmp = tempDir();
  const pidFile = join(tmp.path, 'pid');
  const e = elect(join(tmp.path, 'store'), 'w', [
    'sh',
    '-c',
    `echo $$ > ${pidFile}; while :; do sleep 0.05; done`,
  ]);
  try {
    const pid = await commandPid(e, pidFile);
    const watchdog = await eventually(
      () => watchdogOf(e.child.pid as number),
      5000,
      () => 'the watchdog process',
    );
    // Terminal-style signals do not end the watch.
    process.kill(watchdog, 'SIGTERM');
    process.kill(watchdog, 'SIGINT');
    await sleep(300);
    assert.ok(!isDead(watchdog), 'the watchdog ignores SIGTERM/SIGINT');
    process.kill(watchdog, 'SIGKILL');
    assert.deepEqual(await exitOf(e.child), { code: 1, signal: null });
    assert.ok(isDead(pid), 'the unwatched command was stopped');
    assert.match(e.lines.at(-1) ?? '', /stopped \(the command watchdog exited unexpectedly/);
  } finally {
    e.child.kill('SIGKILL');
  }
});

test('elect --locker shared-file fails at once, with the OS reason, on a directory that cannot be created (/proc/x)', {
  skip: !existsSync('/proc/self') && 'needs /proc',
}, async () => {
  // Node's recursive mkdir spins here with the event loop blocked: killed after the timeout.
  const result = await runElect(sharedFile('/proc/locksmith-no-such-dir'), 'p', ['true'], [], {
    timeoutMs: 20_000,
  });
  assert.equal(result.signal, null, 'killed after the timeout: mkdir did not fail at once');
  assert.equal(result.code, 1);
  assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
  assert.match(
    result.stderr,
    /^locksmith elect: Cannot create lock directory \/proc\/locksmith-no-such-dir \(ENOENT: .*\) \(IO_ERROR\)\n$/,
  );
});

test('elect --db takes a bare SQLite path as serve --ha and the library do (one parser)', async () => {
  using dir = tempDir();
  for (const db of [join(dir.path, 'bare.db'), `sqlite:${join(dir.path, 'url.db')}`]) {
    const r = await run(
      [cliPath, 'elect', '--locker', 'lease-database', '--db', db, '--id', 'one', '--', 'true'],
      { cwd: dir.path },
    );
    assert.equal(r.code, 0, `elect --db ${db}: ${r.stderr}`);
  }
  assert.ok(existsSync(join(dir.path, 'bare.db')), 'the bare path is the SQLite file');
  const relative = await run(
    [cliPath, 'elect', '--locker', 'database', '--db', './rel.db', '--id', 'one', '--', 'true'],
    { cwd: dir.path },
  );
  assert.equal(relative.code, 0, relative.stderr);
  assert.ok(existsSync(join(dir.path, 'rel.db')), 'relative to the working directory');
});
