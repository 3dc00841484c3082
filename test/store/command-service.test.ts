import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { CommandService, exitStatus } from '../../src/store/command-service.js';
import { eventually, tempDir } from '../helpers.js';

const linux = process.platform === 'linux';
const quiet = { stdio: 'ignore' as const };
const context = (token = 1, signal = new AbortController().signal) => ({ signal, token });

function alive(pid: number): boolean {
  try {
    return !/\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

test('the command gets the fencing token in LOCKSMITH_FENCING_TOKEN', {
  skip: !linux,
}, async () => {
  using tmp = tempDir();
  const out = join(tmp.path, 'token');
  const service = new CommandService(['sh', '-c', `echo "$LOCKSMITH_FENCING_TOKEN" > ${out}`], {
    ...quiet,
    env: { ...process.env, LOCKSMITH_FENCING_TOKEN: 'stale' },
  });
  await service.start(context(42));
  const exit = await service.exited;
  assert.deepEqual(exit, { code: 0, signal: null, status: 0, stopped: false });
  assert.equal(readFileSync(out, 'utf8'), '42\n');
});

test('exit codes pass through, shell-style for signals; each start is a new run', {
  skip: !linux,
}, async () => {
  const service = new CommandService(['sh', '-c', 'exit 7'], quiet);
  const first = service.exited;
  await service.start(context());
  assert.deepEqual(await first, { code: 7, signal: null, status: 7, stopped: false });
  await service.start(context());
  assert.notEqual(service.exited, first);
  assert.equal((await service.exited).status, 7);

  const killed = new CommandService(['sh', '-c', 'kill -USR1 $$'], quiet);
  await killed.start(context());
  assert.deepEqual(await killed.exited, {
    code: null,
    signal: 'SIGUSR1',
    status: 138,
    stopped: false,
  });
  assert.equal(exitStatus(null, 'SIGKILL'), 137);
});

test('stop() sends SIGTERM and resolves once the command has exited', {
  skip: !linux,
}, async () => {
  const service = new CommandService(['sleep', '30'], quiet);
  await service.stop(); // nothing running: a no-op
  await service.start(context());
  const pid = service.pid as number;
  await service.stop();
  assert.equal(alive(pid), false);
  assert.equal(service.pid, undefined);
  assert.deepEqual(await service.exited, {
    code: null,
    signal: 'SIGTERM',
    status: 143,
    stopped: true,
  });
});

test('a command that ignores SIGTERM gets SIGKILL after the grace period, with its group', {
  skip: !linux,
}, async () => {
  const service = new CommandService(['sh', '-c', 'trap "" TERM; sleep 30'], {
    ...quiet,
    graceMs: 300,
  });
  await service.start(context());
  const pid = service.pid as number;
  // The shell's own child, which inherits the ignored SIGTERM.
  const sleeper = await eventually(
    () => {
      try {
        const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
        return kids === '' ? undefined : Number(kids.split(' ')[0]);
      } catch {
        return undefined;
      }
    },
    5_000,
    'the shell to fork sleep',
  );
  const started = performance.now();
  await Promise.all([service.stop(), service.stop()]);
  const elapsed = performance.now() - started;
  assert.ok(elapsed >= 290, `SIGKILL after ${elapsed} ms`);
  assert.ok(elapsed < 3000, `SIGKILL after ${elapsed} ms`);
  const exit = await service.exited;
  assert.equal(exit.signal, 'SIGKILL');
  assert.equal(exit.status, 137);
  // SIGKILL is delivered at once, but the kernel needs a moment to tear the process down.
  await eventually(() => !alive(sleeper), 5_000, `sleep ${sleeper} to die`);
});

test('aborting the start signal stops the command like stop()', { skip: !linux }, async () => {
  const service = new CommandService(['sleep', '30'], quiet);
  const mastership = new AbortController();
  await service.start(context(3, mastership.signal));
  mastership.abort(new Error('demoted'));
  const exit = await service.exited;
  assert.equal(exit.signal, 'SIGTERM');
  assert.equal(exit.stopped, true);

  await assert.rejects(service.start(context(4, mastership.signal)), { code: 'ABORTED' });
  assert.equal(service.pid, undefined);
});

test('a stop() that comes while start() is still spawning stops the command', {
  skip: !linux,
}, async () => {
  const service = new CommandService(['sleep', '30'], quiet);
  const starting = service.start(context());
  await Promise.all([starting, service.stop()]);
  const exit = await service.exited;
  assert.equal(exit.stopped, true);
  assert.equal(exit.signal, 'SIGTERM');
});

test('a second start while running is refused', { skip: !linux }, async () => {
  const service = new CommandService(['sleep', '30'], quiet);
  await service.start(context());
  try {
    await assert.rejects(service.start(context()), { code: 'UNSUPPORTED_OPERATION' });
  } finally {
    await service.stop();
  }
});

test('a missing command exits 127', { skip: !linux }, async () => {
  const service = new CommandService(['pdeath-no-such-command-xyz'], quiet);
  await service.start(context());
  const exit = await service.exited;
  assert.equal(exit.status, 127);
  assert.equal(exit.stopped, false);
});

test('bad arguments are INVALID_ARGUMENT', () => {
  const bad: [unknown, unknown][] = [
    [[], {}],
    [undefined, {}],
    ['sleep 1', {}],
    [['sleep', 1], {}],
    [[''], {}],
    [['true'], { graceMs: -1 }],
    [['true'], { graceMs: Number.NaN }],
    [['true'], { graceMs: Number.POSITIVE_INFINITY }],
    [['true'], { graceMs: '5s' }],
  ];
  for (const [command, options] of bad) {
    assert.throws(
      () => new CommandService(command as string[], options as { graceMs?: number }),
      { code: 'INVALID_ARGUMENT' },
      JSON.stringify([command, options]),
    );
  }
  assert.equal(new CommandService(['true']).graceMs, 5000);
  assert.equal(new CommandService(['true'], { graceMs: 0 }).graceMs, 0);
});
