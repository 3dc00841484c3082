import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { FSDirectory } from '../../src/directory/index.js';
import { LOCK_FILE_POLL_MS } from '../../src/directory/lock-file-watch.js';
import { takeOverLock } from '../../src/directory/take-over-lock.js';
import { exitOf, fixture, orphanProof, tempDir, waitForLine } from '../helpers.js';

// takeOverLock: a master replacing a deposed holder's write.lock. The holder is a real child
// process (a paused or partitioned ex-master keeps its kernel lock).

function holder(dir: string) {
  return orphanProof(
    spawn(process.execPath, [fixture('hold-lock-checked'), dir], {
      stdio: ['pipe', 'pipe', 'inherit'],
    }),
  );
}

async function ask(child: ReturnType<typeof holder>, command: string, answer: RegExp) {
  const line = waitForLine(child, answer);
  child.stdin?.write(`${command}\n`);
  return line;
}

test('a free lock is simply obtained (the lock file is not replaced)', async () => {
  using tmp = tempDir();
  const first = await (await FSDirectory.open(tmp.path)).obtainLock('write.lock');
  await first.close();
  const inode = statSync(join(tmp.path, 'write.lock')).ino;
  const lock = await takeOverLock(tmp.path);
  try {
    lock.ensureValid();
    assert.equal(statSync(join(tmp.path, 'write.lock')).ino, inode);
    assert.ok(lock.token > first.token, `${lock.token} > ${first.token}`);
  } finally {
    await lock.close();
  }
});

test("a lock held by another process is taken over: the holder's ensureValid throws, its signal aborts", async () => {
  using tmp = tempDir();
  const child = holder(tmp.path);
  const held = await waitForLine(child, /^held \d+/);
  const childToken = Number(held.split(' ')[1]);
  assert.equal(await ask(child, 'check', /^(valid|invalid)/), 'valid');
  // A plain obtain fails while the child holds it ...
  await assert.rejects((await FSDirectory.open(tmp.path)).obtainLock('write.lock'), {
    code: 'LOCK_OBTAIN_FAILED',
  });
  // ... the takeover succeeds, with a larger fencing token.
  const lost = waitForLine(child, /^lost /, LOCK_FILE_POLL_MS * 10);
  const lock = await takeOverLock(tmp.path);
  try {
    lock.ensureValid();
    assert.ok(lock.token > childToken, `${lock.token} > ${childToken}`);
    assert.match(await ask(child, 'check', /^(valid|invalid)/), /^invalid \w+/);
    assert.equal(await lost, 'lost LOCK_LOST');
    // Once taken over, the lock is ours: the ex-holder's release does not free it, and a
    // third opener still fails.
    child.stdin?.write('release\n');
    await exitOf(child);
    lock.ensureValid();
    await assert.rejects((await FSDirectory.open(tmp.path)).obtainLock('write.lock'), {
      code: 'LOCK_OBTAIN_FAILED',
    });
  } finally {
    await lock.close();
  }
  assert.ok(existsSync(join(tmp.path, 'write.lock')));
});

test('a lock held in this same process is not taken over; a bad name is refused', async () => {
  using tmp = tempDir();
  const mine = await (await FSDirectory.open(tmp.path)).obtainLock('write.lock');
  try {
    await assert.rejects(takeOverLock(tmp.path), { code: 'LOCK_OBTAIN_FAILED' });
    mine.ensureValid();
  } finally {
    await mine.close();
  }
  await assert.rejects(takeOverLock(tmp.path, '../escape'), { code: 'INVALID_ARGUMENT' });
});
