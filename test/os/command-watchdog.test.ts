import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, test } from 'node:test';
import { CommandWatchdog, sharedNow } from '../../src/os/command-watchdog.js';
import { isDead } from '../fixtures/elect-process.js';
import { eventually, fixture, orphanProof, sleep, waitForLine } from '../helpers.js';

// The watchdog and the commands are unref'd: keep this process alive while the tests wait.
const keepAlive = setInterval(() => {}, 1000);
after(() => clearInterval(keepAlive));

/**
 * A command in its own process group, with a grandchild `sleep` in the same group. With
 * `trapTerm` the shell ignores SIGTERM (only SIGKILL stops it); the grandchild does not.
 */
async function groupCommand(trapTerm: boolean) {
  const trap = trapTerm ? "trap '' TERM; " : '';
  const child = orphanProof(
    spawn('sh', ['-c', `${trap}sleep 1000 & echo $!; while :; do sleep 0.05; done`], {
      detached: true,
      stdio: ['ignore', 'pipe', 'ignore'],
    }),
  );
  const grandchild = Number(
    await new Promise<string>((resolve) =>
      child.stdout?.once('data', (d: Buffer) => resolve(d.toString().trim())),
    ),
  );
  const exited = new Promise<{ at: number; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (_code, signal) => resolve({ at: sharedNow(), signal })),
  );
  return { pid: child.pid as number, grandchild, exited };
}

const dead = (pid: number, what: string) =>
  eventually(
    () => isDead(pid),
    5000,
    () => `${what} (${pid}) to die`,
  );

test('watchdog: SIGTERM to the whole group at the deadline, not before; the report says how late', async (t) => {
  const watchdog = await CommandWatchdog.start();
  try {
    const cmd = await groupCommand(false);
    const fired: { signal: string; lateMs: number }[] = [];
    watchdog.on('fired', (f) => fired.push(f));
    const deadline = sharedNow() + 400;
    watchdog.arm(cmd.pid, deadline, deadline + 5000);
    assert.equal(watchdog.fired, false);
    const exit = await cmd.exited;
    assert.equal(exit.signal, 'SIGTERM');
    assert.ok(exit.at >= deadline, `stopped ${deadline - exit.at} ms before the deadline`);
    await dead(cmd.grandchild, 'the grandchild in the group');
    await eventually(
      () => fired[0],
      2000,
      () => 'the report',
    );
    assert.equal(fired[0]?.signal, 'SIGTERM');
    assert.ok(watchdog.fired);
    t.diagnostic(
      `SIGTERM ${fired[0]?.lateMs} ms after the deadline; command gone ${(exit.at - deadline).toFixed(1)} ms after it`,
    );
  } finally {
    await watchdog.close();
  }
});

test('watchdog: a group that ignores SIGTERM gets SIGKILL at the kill deadline', async (t) => {
  const watchdog = await CommandWatchdog.start();
  try {
    const cmd = await groupCommand(true);
    const now = sharedNow();
    watchdog.arm(cmd.pid, now + 200, now + 700);
    const exit = await cmd.exited;
    assert.equal(exit.signal, 'SIGKILL');
    assert.ok(exit.at >= now + 700, `killed ${now + 700 - exit.at} ms before the kill deadline`);
    await dead(cmd.grandchild, 'the grandchild');
    t.diagnostic(`SIGKILL: command gone ${(exit.at - now - 700).toFixed(1)} ms after the deadline`);
  } finally {
    await watchdog.close();
  }
});

test('watchdog: extensions keep the command running; disarm forgets it; close leaves it alone', async () => {
  const watchdog = await CommandWatchdog.start();
  const cmd = await groupCommand(false);
  try {
    watchdog.arm(cmd.pid, sharedNow() + 300, sharedNow() + 600);
    // Eight extensions, each 300 ms ahead, 100 ms apart: 800 ms, past the first deadlines.
    for (let i = 0; i < 8; i++) {
      await sleep(100);
      watchdog.extend(sharedNow() + 300, sharedNow() + 600);
    }
    assert.ok(!isDead(cmd.pid), 'still running while extended');
    watchdog.disarm();
    await sleep(900);
    assert.ok(!isDead(cmd.pid), 'a disarmed watchdog signals nothing');
    assert.equal(watchdog.fired, false);
    // Infinity: never.
    watchdog.arm(cmd.pid, Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY);
    await sleep(200);
    assert.ok(!isDead(cmd.pid));
    await watchdog.close();
    assert.equal(watchdog.alive, false);
    assert.ok(!isDead(cmd.pid), 'close() is the owner stopping the watch, not the command');
  } finally {
    process.kill(-cmd.pid, 'SIGKILL');
    await watchdog.close();
  }
});

test('watchdog: kill -9 of its owner SIGKILLs the whole command group at once, long before the deadline', async (t) => {
  const owner = orphanProof(
    spawn(process.execPath, [fixture('watchdog-owner'), '600000'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    }),
  );
  const line = await waitForLine(owner, /^pids /);
  const [watchdogPid, pid, grandchild, pgrp] = line.split(' ').slice(1).map(Number) as [
    number,
    number,
    number,
    number,
  ];
  assert.equal(pgrp, pid, 'the grandchild is in the command group');
  assert.ok(!isDead(pid) && !isDead(grandchild));
  const t0 = sharedNow();
  owner.kill('SIGKILL');
  await dead(pid, 'the command');
  await dead(grandchild, 'the grandchild');
  const took = sharedNow() - t0;
  await dead(watchdogPid, 'the watchdog');
  t.diagnostic(`group dead ${took.toFixed(1)} ms after kill -9 of the owner`);
});

test('watchdog: bad arguments are InvalidArgumentError, before anything is sent', async () => {
  const watchdog = await CommandWatchdog.start();
  try {
    assert.throws(() => watchdog.arm(1, 0, 0), { code: 'INVALID_ARGUMENT' });
    assert.throws(() => watchdog.arm(1234, 10, 5), { code: 'INVALID_ARGUMENT' });
    assert.throws(() => watchdog.extend(Number.NaN, 5), { code: 'INVALID_ARGUMENT' });
    assert.equal(watchdog.alive, true);
  } finally {
    await watchdog.close();
  }
});
