import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  type Elect,
  isDead,
  poll,
  readLines,
  recordingCommand,
  sleep,
  spawnElect,
  tokenOf,
} from '../fixtures/elect-process.js';
import { cliPath, exitOf, run, tempDir } from '../helpers.js';

interface Scenario {
  kind: 'lease-database' | 'database';
  /** Timing options for the contenders. */
  timing: string[];
  /** The failover bound the locker promises for these timings, with slack, in ms. */
  failoverMs: number;
  /** What `--fail-if-locked` says while another process is master. */
  busy: RegExp;
}

/**
 * Two contenders on one SQLite database: one master; kill -9 of the master kills its command
 * at once and the slave takes over within the locker's bound, with a larger token; SIGTERM
 * to the new master releases at once (a `--fail-if-locked` newcomer is master immediately).
 */
async function failover({ kind, timing, failoverMs, busy: busyPattern }: Scenario): Promise<void> {
  using tmp = tempDir();
  const db = `sqlite:${join(tmp.path, 'lock.db')}`;
  const log = join(tmp.path, 'runs.log');
  const locker = ['--locker', kind, '--db', db, '--table', 'ELECT_LOCK'];
  const start = (id: string): Elect => spawnElect(locker, id, recordingCommand(log), timing);
  const a = start('a');
  const b = start('b');
  try {
    const [first, second] = await Promise.race([
      a.line(/became master/).then(() => [a, b] as const),
      b.line(/became master/).then(() => [b, a] as const),
    ]);
    await second.line(/waiting as slave/);
    await poll(
      () => readLines(log)[0],
      5000,
      () => 'the first command',
    );
    await sleep(1500); // several renewals and acquire attempts: the slave stays out
    assert.equal(readLines(log).length, 1, 'only the master runs its command');
    const [token1, pid1] = (readLines(log)[0] as string).split(' ').map(Number) as [number, number];
    assert.equal(tokenOf(await first.line(/became master/)), token1);

    // While a master holds the lock, --fail-if-locked gives up at once.
    const busy = await run([
      cliPath,
      'elect',
      ...locker,
      '--id',
      'f',
      '--fail-if-locked',
      '--',
      'true',
    ]);
    assert.equal(busy.code, 1);
    assert.match(busy.stderr, busyPattern);

    first.child.kill('SIGKILL');
    const killedAt = Date.now();
    await poll(
      () => (isDead(pid1) ? true : undefined),
      1000,
      () => `command ${pid1} to die`,
    );
    const line = await second.line(/became master/, 1, failoverMs + 2000);
    const failover = Date.now() - killedAt;
    const next = await poll(
      () => readLines(log).find((l, i) => i > 0 && !l.startsWith('overlap')),
      5000,
      () => 'the second command',
    );
    assert.ok(!readLines(log).some((l) => l.startsWith('overlap')), readLines(log).join(' | '));
    const [token2, pid2] = next.split(' ').map(Number) as [number, number];
    assert.ok(token2 > token1, `${token2} > ${token1}`);
    assert.equal(tokenOf(line), token2);
    assert.ok(failover < failoverMs, `failover took ${failover} ms (bound ${failoverMs} ms)`);

    // A graceful stop releases the lock: the next contender is master at once.
    second.child.kill('SIGTERM');
    assert.deepEqual(await exitOf(second.child), { code: 143, signal: null });
    await poll(
      () => (isDead(pid2) ? true : undefined),
      2000,
      () => `command ${pid2} to stop`,
    );
    const t0 = Date.now();
    const after = await run([
      cliPath,
      'elect',
      ...locker,
      '--id',
      'c',
      ...timing,
      '--fail-if-locked',
      '--',
      'sh',
      '-c',
      'exit 4',
    ]);
    assert.equal(after.code, 4, after.stderr);
    assert.ok(Date.now() - t0 < failoverMs, `the newcomer took ${Date.now() - t0} ms`);
    assert.match(after.stderr, /became master with token (\d+)/);
    assert.ok(tokenOf(after.stderr) > token2);
  } finally {
    a.child.kill('SIGKILL');
    b.child.kill('SIGKILL');
  }
}

test('elect --locker lease-database (sqlite): one master, kill -9 failover within a lease, larger token, graceful release', () =>
  failover({
    kind: 'lease-database',
    // A 1 s lease renewed every 250 ms: a kill -9 failover takes at most one lease (+ a poll).
    timing: ['--lease', '1s', '--renew', '250ms'],
    failoverMs: 2500,
    busy: /stopped: Lease ELECT_LOCK .* is held by/,
  }));

test('elect --locker database (sqlite): one master, kill -9 failover, larger token, graceful release', () =>
  failover({
    kind: 'database',
    // The row lock frees when the master's connection dies; the slave retries every 200 ms
    // and pauses renew + query timeout (300 ms + 2 s) before it reports mastership.
    timing: ['--renew', '300ms', '--acquire-interval', '200ms'],
    failoverMs: 4000,
    busy: /stopped: /,
  }));
