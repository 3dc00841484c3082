import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { cliPath, eventually, exitOf, orphanProof, run, tempDir, waitForLine } from '../helpers.js';

/** A real `locksmith serve` on a free port, in a child process. */
async function serve(
  dataDir: string,
  extra: string[] = [],
): Promise<{ child: ChildProcess; url: string }> {
  const child = orphanProof(
    spawn(process.execPath, [cliPath, 'serve', '--data', dataDir, '--port', '0', ...extra], {
      stdio: ['ignore', 'pipe', 'inherit'],
    }),
  );
  const line = await waitForLine(child, /listening on locksmith:\/\//);
  const url = /(locksmith:\/\/[^ ]+)/.exec(line)?.[1] as string;
  return { child, url };
}

const tmp = tempDir('locksmith-rows-');
let server: { child: ChildProcess; url: string };

before(async () => {
  server = await serve(join(tmp.path, 'data'));
});

after(async () => {
  server.child.kill('SIGTERM');
  await exitOf(server.child);
  tmp[Symbol.dispose]();
});

/** `locksmith rows <sub> --server <url> ...args`. */
function rows(sub: string, ...args: string[]) {
  return run([cliPath, 'rows', sub, '--server', server.url, ...args], { timeoutMs: 30_000 });
}

/** `rows lock` as a child that has started its command once it printed `started`. */
async function lockedCommand(table: string, row: string, script: string): Promise<ChildProcess> {
  const child = orphanProof(
    spawn(
      process.execPath,
      [cliPath, 'rows', 'lock', table, row, '--server', server.url, '--', 'sh', '-c', script],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    ),
  );
  await waitForLine(child, /^started/);
  return child;
}

function oneErrorLine(result: { stderr: string }, code: RegExp): void {
  const lines = result.stderr.trim().split('\n');
  assert.equal(lines.length, 1, result.stderr);
  assert.match(lines[0] as string, /^locksmith rows: /);
  assert.match(lines[0] as string, code);
}

test('create-table, list-tables, describe; an existing table is one line, exit 1', async () => {
  const created = await rows('create-table', 'people', 'info:2', 'stats', '--timestamp-on-arrival');
  assert.equal(created.code, 0, created.stderr);
  assert.equal(
    created.stdout,
    'created table people: families info (maxVersions 2), stats (maxVersions 3); timestamps on arrival\n',
  );
  assert.equal((await rows('create-table', 'other', 'f')).code, 0);
  const list = await rows('list-tables');
  assert.deepEqual(list.stdout.trim().split('\n').sort(), ['other', 'people']);
  const described = await rows('describe', 'other');
  assert.equal(
    described.stdout,
    'table other: families f (maxVersions 3); timestamps per mutation\n',
  );
  const again = await rows('create-table', 'other', 'f');
  assert.equal(again.code, 1);
  oneErrorLine(again, /\(TABLE_EXISTS\)$/);
  const missing = await rows('describe', 'nope');
  assert.equal(missing.code, 1);
  oneErrorLine(missing, /\(TABLE_NOT_FOUND\)$/);
  assert.equal((await rows('create-table', 'doomed', 'f')).code, 0);
  const dropped = await rows('drop-table', 'doomed');
  assert.equal(dropped.code, 0, dropped.stderr);
  assert.equal(dropped.stdout, 'dropped table doomed\n');
  assert.equal((await rows('list-tables')).stdout.includes('doomed'), false);
  const again2 = await rows('drop-table', 'doomed');
  assert.equal(again2.code, 1);
  oneErrorLine(again2, /\(TABLE_NOT_FOUND\)$/);
});

test('put, get, scan print cells as HBase does; --values shows them, bytes as toStringBinary', async () => {
  assert.equal((await rows('create-table', 'cells', 'f:3', 'g')).code, 0);
  assert.equal((await rows('put', 'cells', 'r1', 'f:a', 'one', '--ts', '100')).code, 0);
  assert.equal((await rows('put', 'cells', 'r1', 'f:a', 'two', '--ts', '200')).code, 0);
  assert.equal((await rows('put', 'cells', 'r1', 'g:b', 'bin\\x00\\xff', '--ts', '7')).code, 0);
  assert.equal((await rows('put', 'cells', 'r\\x01', 'f:', 'x', '--ts', '5')).code, 0);

  const get = await rows('get', 'cells', 'r1');
  assert.equal(get.code, 0, get.stderr);
  assert.equal(get.stdout, 'r1/f:a/200/Put/vlen=3\nr1/g:b/7/Put/vlen=5\n1 row(s)\n');
  const versions = await rows(
    'get',
    'cells',
    'r1',
    '--column',
    'f:a',
    '--versions',
    '2',
    '--values',
  );
  assert.equal(
    versions.stdout,
    'r1/f:a/200/Put/vlen=3 value=two\nr1/f:a/100/Put/vlen=3 value=one\n1 row(s)\n',
  );
  const family = await rows('get', 'cells', 'r1', '--column', 'g', '--values');
  assert.equal(family.stdout, 'r1/g:b/7/Put/vlen=5 value=bin\\x00\\xFF\n1 row(s)\n');

  const scan = await rows('scan', 'cells', '--values');
  assert.equal(
    scan.stdout,
    // Byte order: 0x01 sorts before '1'.
    'r\\x01/f:/5/Put/vlen=1 value=x\nr1/f:a/200/Put/vlen=3 value=two\nr1/g:b/7/Put/vlen=5 value=bin\\x00\\xFF\n2 row(s)\n',
  );
  // A printed row can be typed back.
  const binary = await rows('get', 'cells', 'r\\x01');
  assert.equal(binary.stdout, 'r\\x01/f:/5/Put/vlen=1\n1 row(s)\n');
  assert.equal(
    (await rows('scan', 'cells', '--limit', '1')).stdout,
    'r\\x01/f:/5/Put/vlen=1\n1 row(s)\n',
  );
  assert.equal((await rows('scan', 'cells', '--start', 'r2')).stdout, '0 row(s)\n');
  assert.equal(
    (await rows('scan', 'cells', '--stop', 'r1')).stdout,
    'r\\x01/f:/5/Put/vlen=1\n1 row(s)\n',
  );
  const empty = await rows('get', 'cells', 'nobody');
  assert.equal(empty.code, 0);
  assert.equal(empty.stdout, '0 row(s)\n', 'a missing row says so, as HBase shell does');

  // --json: the same answers as JSON (bytes in the shell's notation), for scripts.
  assert.deepEqual(
    JSON.parse((await rows('get', 'cells', 'r1', '--column', 'g', '--json')).stdout),
    {
      row: 'r1',
      cells: [{ family: 'g', qualifier: 'b', timestamp: 7, type: 'Put', value: 'bin\\x00\\xFF' }],
    },
  );
  assert.equal((await rows('get', 'cells', 'nobody', '--json')).stdout, 'null\n');
  const lines = (await rows('scan', 'cells', '--json')).stdout.trim().split('\n');
  assert.deepEqual(
    lines.map((l) => (JSON.parse(l) as { row: string }).row),
    ['r\\x01', 'r1'],
  );
  assert.ok(
    (JSON.parse((await rows('list-tables', '--json')).stdout) as string[]).includes('cells'),
  );
  assert.deepEqual(JSON.parse((await rows('describe', 'cells', '--json')).stdout), {
    name: 'cells',
    families: [
      { name: 'f', maxVersions: 3 },
      { name: 'g', maxVersions: 3 },
    ],
    timestampOnArrival: false,
    splits: [],
  });
  // kubectl's -o json is --json here, and the error says so.
  const dashO = await rows('get', 'cells', 'r1', '-o', 'json');
  assert.equal(dashO.code, 2);
  assert.match(dashO.stderr, /unknown option -o \(did you mean --json\?\)/);
});

test('delete removes a column, a family or the row; incr adds to a counter and prints it', async () => {
  assert.equal((await rows('create-table', 'd', 'f', 'g')).code, 0);
  for (const [row, column] of [
    ['r', 'f:a'],
    ['r', 'f:b'],
    ['r', 'g:c'],
    ['s', 'f:a'],
  ] as const) {
    assert.equal((await rows('put', 'd', row, column, 'v', '--ts', '1')).code, 0);
  }
  assert.equal((await rows('delete', 'd', 'r', '--column', 'f:a')).code, 0);
  assert.equal(
    (await rows('get', 'd', 'r')).stdout,
    'r/f:b/1/Put/vlen=1\nr/g:c/1/Put/vlen=1\n1 row(s)\n',
  );
  assert.equal((await rows('delete', 'd', 'r', '--column', 'g')).code, 0);
  assert.equal((await rows('get', 'd', 'r')).stdout, 'r/f:b/1/Put/vlen=1\n1 row(s)\n');
  assert.equal((await rows('delete', 'd', 's')).code, 0);
  assert.equal((await rows('scan', 'd')).stdout, 'r/f:b/1/Put/vlen=1\n1 row(s)\n');

  assert.equal((await rows('incr', 'd', 'n', 'f:count')).stdout, '1\n');
  assert.equal((await rows('incr', 'd', 'n', 'f:count', '41')).stdout, '42\n');
  assert.equal((await rows('incr', 'd', 'n', 'f:count', '-50')).stdout, '-8\n');
  const counter = await rows('get', 'd', 'n', '--values');
  assert.match(
    counter.stdout,
    /^n\/f:count\/\d+\/Put\/vlen=8 value=(\\xFF){7}\\xF8\n1 row\(s\)\n$/,
  );
  const notCounter = await rows('incr', 'd', 'r', 'f:b');
  assert.equal(notCounter.code, 1);
  oneErrorLine(notCounter, /\([A-Z_]+\)$/);
});

test('a bad command line is one line with the subcommand usage, exit 2; --help shows usages', async () => {
  const cases: [string[], RegExp][] = [
    [['put', 'cells', 'r'], /usage: locksmith rows put <table> <row> <family>:<qualifier> <value>/],
    [['get', 'cells', 'r', '--bogus'], /usage: locksmith rows get <table> <row>/],
    [['get', 'cells', 'r', '--versions', '0'], /--versions "0" must be a whole number, 1 or more/],
    [['put', 'cells', 'r', 'nocolon', 'v'], /column "nocolon" is not <family>:<qualifier>/],
    [['incr', 'cells', 'r', 'f:a', 'x'], /amount "x" must be a whole number/],
    [['lock', 'cells', 'r'], /expected -- and a command.*usage: locksmith rows lock /],
    [['lock', 'cells', 'r', '--wait', '5', '--', 'true'], /--wait "5" has no unit/],
    [['scan', 'cells', '--', 'x'], /runs no command/],
    [['unlock', 'cells', 'r'], /no "rows unlock": a row lock belongs to the session that took it/],
    [['frobnicate'], /unknown subcommand "frobnicate": expected one of create-table, /],
  ];
  for (const [args, message] of cases) {
    const result = await rows(args[0] as string, ...args.slice(1));
    assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
    oneErrorLine(result, message);
    assert.match(result.stderr, /\(INVALID_ARGUMENT\)\n$/);
  }
  const none = await run([cliPath, 'rows']);
  assert.equal(none.code, 2);
  oneErrorLine(none, /expected a subcommand, one of/);

  const help = await run([cliPath, 'rows', '--help']);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /^Usage: locksmith rows <subcommand> /);
  for (const sub of ['create-table', 'list-tables', 'describe', 'put', 'get', 'delete']) {
    assert.match(help.stdout, new RegExp(`\n  rows ${sub}\\b`));
  }
  for (const sub of ['scan', 'incr', 'lock', 'status']) {
    assert.match(help.stdout, new RegExp(`\n  rows ${sub}\\b`));
  }
  assert.equal((await run([cliPath, 'help', 'rows'])).stdout, help.stdout);
  const put = await run([cliPath, 'rows', 'put', '--help']);
  assert.equal(put.code, 0);
  assert.match(put.stdout, /^Usage: locksmith rows put <table> <row> /);
  assert.match(put.stdout, /--ts <ms> .*\(default: /);
  assert.match(
    put.stdout,
    /--server <url> .*\(default: \$LOCKSMITH_SERVER, else locksmith:\/\/127\.0\.0\.1:7420\)/,
  );
  const lockHelp = await run([cliPath, 'rows', 'lock', '--help']);
  assert.match(lockHelp.stdout, /^Usage: locksmith rows lock <table> <row> /);
});

test('a server that cannot be reached is one line, exit 1', async () => {
  const port = await new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port: free } = probe.address() as { port: number };
      probe.close(() => resolve(free));
    });
  });
  const result = await run([
    cliPath,
    'rows',
    'list-tables',
    '--server',
    `locksmith://127.0.0.1:${port}`,
    '--connect-timeout',
    '300ms',
  ]);
  assert.equal(result.code, 1);
  oneErrorLine(
    result,
    new RegExp(
      `cannot reach the server at locksmith://127.0.0.1:${port}: .*\\(CONNECTION_LOST\\)$`,
    ),
  );
  const badUrl = await run([cliPath, 'rows', 'status', '--server', 'http://x']);
  assert.equal(badUrl.code, 2);
  oneErrorLine(badUrl, /scheme must be locksmith:\/\//);
});

test('rows lock runs the command under the lock, with its token and lock id, and exits with its code', async () => {
  assert.equal((await rows('create-table', 'locks', 'f')).code, 0);
  const result = await rows(
    'lock',
    'locks',
    'a',
    '--',
    'sh',
    '-c',
    'echo "token=$LOCKSMITH_FENCING_TOKEN id=$LOCKSMITH_LOCK_ID"; exit 7',
  );
  assert.equal(result.code, 7, result.stderr);
  assert.ok(Number(/token=(\d+)/.exec(result.stdout)?.[1]) > 0, result.stdout);
  assert.match(result.stdout, /id=\S+/);
  // Released when the command ended: taken again at once.
  assert.equal((await rows('lock', 'locks', 'a', '--', 'true')).code, 0);
  const missing = await rows('lock', 'locks', 'a', '--', '/nonexistent/command');
  assert.equal(missing.code, 127);
});

test('rows lock holds the row: a put waits for the command to end, a second lock fails or waits', async () => {
  using dir = tempDir();
  const go = join(dir.path, 'go');
  const done = join(dir.path, 'done');
  // Holds the row until the test creates `go`, then marks its end with `done`.
  const holder = await lockedCommand(
    'locks',
    'held',
    `echo started; while [ ! -e ${go} ]; do sleep 0.02; done; touch ${done}`,
  );

  const status = await rows('status');
  assert.equal(status.code, 0, status.stderr);
  assert.match(status.stdout, /^locks held: 1$/m);
  assert.match(
    status.stdout,
    /^ {2}locks held {2}token \d+ {2}by session \S+ \(locksmith rows lock \(pid \d+\)\) {2}renews with its session, \d+s left$/m,
  );
  assert.match(status.stdout, /^tables: \d+$/m);
  assert.match(status.stdout, /^handlers: handler \d+\/\d+ busy/m);
  const json = JSON.parse((await rows('status', '--json')).stdout) as { locks: unknown[] };
  assert.equal(json.locks.length, 1);

  const busy = await rows('lock', 'locks', 'held', '--', 'true');
  assert.equal(busy.code, 1);
  oneErrorLine(
    busy,
    /row held of locks is locked: held by session \S+ \(locksmith rows lock \(pid \d+\)\) \(LOCK_OBTAIN_FAILED\)$/,
  );
  const timedOut = await rows('lock', 'locks', 'held', '--wait', '100ms', '--', 'true');
  assert.equal(timedOut.code, 1);
  oneErrorLine(timedOut, /is locked after waiting 100ms: .*\(LOCK_TIMEOUT\)$/);

  const both = Promise.all([
    rows('put', 'locks', 'held', 'f:q', 'after').then((r) => ({ ...r, done: existsSync(done) })),
    rows(
      'lock',
      'locks',
      'held',
      '--wait',
      '20s',
      '--',
      'sh',
      '-c',
      `test -e ${done} && echo after`,
    ),
  ]);
  // Both wait for the row (the put for its implicit lock, the second lock for the lock), each
  // having given its handler back, until the command under the lock ends.
  await eventually(
    async () => {
      const status = JSON.parse((await rows('status', '--json')).stdout) as {
        handlers: { handler: { parked: number } };
      };
      return status.handlers.handler.parked === 2;
    },
    20_000,
    'the put and the second lock to wait',
    50,
  );
  // Both waits are listed the same way, the put's implicit lock as much as the lock call.
  const waits = await rows('status');
  assert.match(waits.stdout, /^waiting for a row: 2$/m);
  assert.match(
    waits.stdout,
    /^ {2}locks held {2}mutation by session \S+ \(locksmith rows put \(pid \d+\)\) {2}held by session \S+ \(locksmith rows lock \(pid \d+\)\) {2}for \d+\.\ds$/m,
  );
  assert.match(waits.stdout, /^ {2}locks held {2}lockRow by session \S+ \(locksmith rows lock/m);
  assert.match(
    waits.stdout,
    /^ {2}\S+ {2}locksmith rows put \(pid \d+\) {2}connected {2}0 lock\(s\), 1 waiting/m,
  );
  writeFileSync(go, '');
  const [put, waiter] = await both;
  assert.equal(put.code, 0, put.stderr);
  assert.ok(put.done, 'the put finished only after the command under the lock ended');
  assert.equal(waiter.code, 0, waiter.stderr);
  assert.equal(waiter.stdout, 'after\n');
  assert.equal((await exitOf(holder)).code, 0);
  assert.match(
    (await rows('get', 'locks', 'held', '--values')).stdout,
    /value=after\n1 row\(s\)\n$/,
  );
});

test('rows lock stops the command on SIGTERM and exits 128 + 15, releasing the row', async () => {
  const holder = await lockedCommand('locks', 'sig', 'echo started; exec sleep 30');
  holder.kill('SIGTERM');
  assert.equal((await exitOf(holder)).code, 143);
  assert.equal((await rows('lock', 'locks', 'sig', '--', 'true')).code, 0);
});

test('rows lock stops the command when the lock is lost, one line, exit 1', async () => {
  using data = tempDir();
  const doomed = await serve(data.path, ['--session-lease', '1s']);
  const create = await run([cliPath, 'rows', 'create-table', 't', 'f', '--server', doomed.url]);
  assert.equal(create.code, 0, create.stderr);
  const holder = orphanProof(
    spawn(
      process.execPath,
      [
        cliPath,
        'rows',
        'lock',
        't',
        'r',
        '--server',
        doomed.url,
        '--grace',
        '500ms',
        '--',
        'sh',
        '-c',
        'echo started; trap "echo stopped; exit 9" TERM; sleep 30 & wait',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    ),
  );
  let stderr = '';
  holder.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  await waitForLine(holder, /^started/);
  const stopped = waitForLine(holder, /^stopped/, 15_000);
  doomed.child.kill('SIGKILL');
  await stopped;
  assert.equal((await exitOf(holder)).code, 1);
  oneErrorLine(
    { stderr },
    /lost the lock of row r in t, stopped sh: .*\((SESSION_EXPIRED|LEASE_EXPIRED|LOCK_LOST)\)$/,
  );
});

test('--token-file presents the server token; without it the server refuses, one line, exit 1', async () => {
  using dir = tempDir();
  const tokenFile = join(dir.path, 'token');
  writeFileSync(tokenFile, 's3cret\n', { mode: 0o600 });
  const guarded = await serve(join(dir.path, 'data'), ['--token-file', tokenFile]);
  try {
    const listTables = (...more: string[]) =>
      run([cliPath, 'rows', 'list-tables', '--server', guarded.url, ...more]);
    const ok = await listTables('--token-file', tokenFile);
    assert.equal(ok.code, 0, ok.stderr);
    const refused = await listTables();
    assert.equal(refused.code, 1);
    oneErrorLine(
      refused,
      /requires a token: pass --token-file <file> \(its first line is the token\) or set LOCKSMITH_TOKEN_FILE \(UNAUTHENTICATED\)$/,
    );
    const wrongFile = join(dir.path, 'wrong');
    writeFileSync(wrongFile, 'guess\n', { mode: 0o600 });
    const wrong = await listTables('--token-file', wrongFile);
    assert.equal(wrong.code, 1);
    oneErrorLine(
      wrong,
      /refused the token in .*wrong \(--token-file\): it is not this server's token/,
    );
    assert.ok(!`${wrong.stdout}${wrong.stderr}`.includes('guess'), 'the token is never echoed');
    // A token file that cannot be read names the flag (or the variable) that named it.
    const missing = join(dir.path, 'no-such-token');
    const noFile = await listTables('--token-file', missing);
    assert.equal(noFile.code, 2);
    oneErrorLine(
      noFile,
      /--token-file .*no-such-token: cannot read the token file \(no such file\)/,
    );
    const noEnvFile = await run([cliPath, 'rows', 'list-tables', '--server', guarded.url], {
      env: { ...process.env, LOCKSMITH_TOKEN_FILE: missing },
    });
    assert.equal(noEnvFile.code, 2);
    oneErrorLine(noEnvFile, /LOCKSMITH_TOKEN_FILE .*no-such-token: cannot read the token file/);
    // The environment names the server (a bare host:port) and the token file once for a shell;
    // a flag still wins over its variable.
    const hostPort = guarded.url.replace('locksmith://', '');
    const env = { ...process.env, LOCKSMITH_SERVER: hostPort, LOCKSMITH_TOKEN_FILE: tokenFile };
    const fromEnv = await run([cliPath, 'rows', 'list-tables'], { env });
    assert.equal(fromEnv.code, 0, fromEnv.stderr);
    const flagWins = await run(
      [cliPath, 'rows', 'list-tables', '--server', '127.0.0.1:1', '--connect-timeout', '300ms'],
      { env },
    );
    assert.equal(flagWins.code, 1);
    oneErrorLine(flagWins, /127\.0\.0\.1:1/);
    const bare = await run([
      cliPath,
      'rows',
      'list-tables',
      '--server',
      hostPort,
      '--token-file',
      tokenFile,
    ]);
    assert.equal(bare.code, 0, bare.stderr);
  } finally {
    guarded.child.kill('SIGTERM');
    await exitOf(guarded.child);
  }
});
