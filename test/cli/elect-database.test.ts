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

// A 1 s lease renewed every 250 ms: a kill -9 failover takes at most one lease (plus a poll).
const LEASE = ['--lease', '1s', '--renew', '250ms'];

test('elect --locker lease-database (sqlite): one master; kill -9 kills its command, the slave takes over within a lease with a larger token; SIGTERM releases at once', async () => {
  using tmp = tempDir();
  const db = `sqlite:${join(tmp.path, 'lock.db')}`;
  const log = join(tmp.path, 'runs.log');
  const locker = ['--locker', 'lease-database', '--db', db, '--table', 'ELECT_LOCK'];
  const start = (id: string): Elect => spawnElect(locker, id, recordingCommand(log), LEASE);
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
    await sleep(1500); // more than a lease: renewals keep the slave out
    assert.equal(readLines(log).length, 1, 'only the master runs its command');
    const [token1, pid1] = (readLines(log)[0] as string).split(' ').map(Number) as [number, number];
    assert.equal(tokenOf(await first.line(/became master/)), token1);

    // While a master holds the lease, --fail-if-locked gives up at once.
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
    assert.match(busy.stderr, /stopped: Lease ELECT_LOCK .* is held by/);

    first.child.kill('SIGKILL');
    const killedAt = Date.now();
    await poll(
      () => (isDead(pid1) ? true : undefined),
      1000,
      () => `command ${pid1} to die`,
    );
    const line = await second.line(/became master/, 1, 5000);
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
    assert.ok(failover < 2500, `failover took ${failover} ms (lease 1 s)`);

    // A graceful stop releases the lease: the next contender is master at once.
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
      '--fail-if-locked',
      '--',
      'sh',
      '-c',
      'exit 4',
    ]);
    assert.equal(after.code, 4, after.stderr);
    assert.ok(Date.now() - t0 < 3000);
    assert.match(after.stderr, /became master with token (\d+)/);
    assert.ok(tokenOf(after.stderr) > token2);
  } finally {
    a.child.kill('SIGKILL');
    b.child.kill('SIGKILL');
  }
});
