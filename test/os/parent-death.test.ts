import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import {
  EXIT_NOT_FOUND,
  EXIT_PARENT_GONE,
  PARENT_DEATH_LAUNCHER,
  spawnWithParentDeath,
} from '../../src/os/parent-death.js';
import { eventually, exitOf, fixture, orphanProof, run, waitForLine } from '../helpers.js';

const linux = process.platform === 'linux';

/** The process's state letter from /proc, or undefined once it is gone (reaped). */
function procState(pid: number): string | undefined {
  try {
    return /\) (\S)/.exec(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.[1];
  } catch {
    return undefined;
  }
}

/** Dead = gone or a zombie waiting for its (new) parent to reap it. */
async function waitDead(pid: number, timeoutMs: number): Promise<number> {
  const started = performance.now();
  await eventually(
    () => {
      const state = procState(pid);
      return state === undefined || state === 'Z';
    },
    timeoutMs,
    () => `process ${pid} to die (state ${procState(pid)})`,
  );
  return performance.now() - started;
}

async function waitComm(pid: number, comm: string): Promise<void> {
  await eventually(
    () => {
      try {
        return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === comm;
      } catch {
        return false;
      }
    },
    5_000,
    `process ${pid} to become ${comm}`,
  );
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {}
}

test('the command dies within 1 s when its parent is killed with SIGKILL', {
  skip: !linux,
}, async () => {
  const parent = orphanProof(
    spawn(process.execPath, [fixture('pdeath-parent'), 'sleep', '30'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    }),
  );
  const pid = Number((await waitForLine(parent, /^child \d+/)).split(' ')[1]);
  try {
    // The launcher has become `sleep` in place: same pid, parent unchanged.
    await waitComm(pid, 'sleep');
    assert.match(
      readFileSync(`/proc/${pid}/status`, 'utf8'),
      new RegExp(`PPid:\\s+${parent.pid}\\n`),
    );
    parent.kill('SIGKILL');
    await exitOf(parent);
    const ms = await waitDead(pid, 1000);
    assert.ok(ms < 1000);
  } finally {
    killQuietly(pid);
  }
});

test('PDEATHSIG follows the spawning thread: a worker ending kills its command, the process lives on', {
  skip: !linux,
}, async () => {
  const { Worker } = await import('node:worker_threads');
  const worker = new Worker(new URL(fixture('pdeath-parent'), 'file:'), {
    workerData: ['sleep', '30'],
  });
  const pid = await new Promise<number>((resolve) => worker.once('message', resolve));
  try {
    await waitComm(pid, 'sleep');
    worker.postMessage('exit');
    await new Promise((r) => worker.once('exit', r));
    await waitDead(pid, 1000);
  } finally {
    killQuietly(pid);
  }
});

test('the command inherits stdio, environment and default signal dispositions', {
  skip: !linux,
}, async () => {
  const child = spawnWithParentDeath(
    ['sh', '-c', 'echo "v=$PDEATH_VAR"; grep -E "^Sig(Ign|Blk)" /proc/self/status; echo err >&2'],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PDEATH_VAR: 'x y' } },
  );
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const { code } = await exitOf(child);
  assert.equal(code, 0, err);
  assert.match(out, /^v=x y$/m);
  // Node ignores SIGPIPE and SIGXFSZ; the command must not inherit that.
  assert.match(out, /^SigIgn:\s+0+$/m);
  assert.match(out, /^SigBlk:\s+0+$/m);
  assert.equal(err, 'err\n');
});

test("the failure line names who runs the command; the launcher's variable does not reach the command", {
  skip: !linux,
}, async () => {
  const missing = spawnWithParentDeath(['pdeath-no-such-command-xyz'], {
    stdio: ['ignore', 'ignore', 'pipe'],
    name: 'locksmith rows lock',
  });
  let err = '';
  missing.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  await exitOf(missing);
  assert.equal(err, 'locksmith rows lock: cannot run pdeath-no-such-command-xyz (ENOENT)\n');
  const env = spawnWithParentDeath(['env'], { stdio: ['ignore', 'pipe', 'ignore'], name: 'x' });
  let out = '';
  env.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  await exitOf(env);
  assert.match(out, /^PATH=/m, 'the environment is passed on');
  assert.doesNotMatch(out, /LOCKSMITH_LAUNCHER_NAME/);
});

test('a missing command exits 127 with one line on stderr', { skip: !linux }, async () => {
  const child = spawnWithParentDeath(['pdeath-no-such-command-xyz'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const { code } = await exitOf(child);
  assert.equal(code, EXIT_NOT_FOUND);
  assert.equal(err, 'locksmith: cannot run pdeath-no-such-command-xyz (ENOENT)\n');
  const notExecutable = await exitOf(
    spawnWithParentDeath([PARENT_DEATH_LAUNCHER], { stdio: 'ignore' }),
  );
  assert.equal(notExecutable.code, 126);
});

test('the launcher refuses to start the command when its parent is not the expected one', {
  skip: !linux,
}, async () => {
  // Expecting pid 1 as parent is what a launcher sees after its real parent died early.
  const result = await run([PARENT_DEATH_LAUNCHER, '1', '0,1,2', 'sh', '-c', 'echo ran']);
  assert.equal(result.code, EXIT_PARENT_GONE);
  assert.equal(result.stdout, '');
  assert.match(result.stderr, /parent 1 exited before sh could start/);
});

test('bad commands are INVALID_ARGUMENT', () => {
  for (const bad of [[], [''], ['ok', 3], 'sleep', ['a\0b']]) {
    assert.throws(
      () => spawnWithParentDeath(bad as string[]),
      (err: { code?: string }) =>
        err.code === (linux ? 'INVALID_ARGUMENT' : 'UNSUPPORTED_OPERATION'),
    );
  }
  if (linux) {
    assert.throws(
      () => spawnWithParentDeath(['true'], { stdio: ['pipe', 'pipe', 'pipe', 'ipc'] }),
      {
        code: 'INVALID_ARGUMENT',
      },
    );
  }
});
