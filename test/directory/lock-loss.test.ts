import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  closeSync,
  mkdirSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  AlreadyClosedError,
  LockHandleBase,
  LockIOError,
  LockLostError,
  LockTimeoutError,
} from '../../src/core/index.js';
import {
  ByteBuffersDirectory,
  FSDirectory,
  type Lock,
  type LockFactory,
  NativeFSLockFactory,
  SimpleFSLockFactory,
  SingleInstanceLockFactory,
  VerifyingLockFactory,
  withLock,
} from '../../src/directory/index.js';
import { internals } from '../../src/directory/internals.js';
import { LOCK_FILE_POLL_MS } from '../../src/directory/lock-file-watch.js';
import { exitOf, holdLockInChild, repoRoot, sleep, tempDir } from '../helpers.js';

/**
 * These tests assert that a loss is noticed by itself (no ensureValid call) and reported with
 * the right code and words, not how fast: the bound below is the 1 s poll times ten, so even
 * without kernel events on a heavily loaded machine the loss must arrive. The latency is
 * measured by bench/directory-loss.bench.ts.
 */
const NOTICE_MS = LOCK_FILE_POLL_MS * 10;

function abortedWithin(signal: AbortSignal, ms = NOTICE_MS): Promise<unknown> {
  if (signal.aborted) return Promise.resolve(signal.reason);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`signal not aborted within ${ms} ms of the change`)),
      ms,
    );
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve(signal.reason);
      },
      { once: true },
    );
  });
}

function assertLost(reason: unknown, pattern: RegExp): LockLostError {
  assert.ok(reason instanceof LockLostError, `a LockLostError, got ${String(reason)}`);
  assert.equal(reason.code, 'LOCK_LOST');
  assert.match(reason.message, /^Lock lost: .*write\.lock: /);
  assert.match(reason.message, pattern);
  return reason;
}

const factories: [string, LockFactory][] = [
  ['native', NativeFSLockFactory.INSTANCE],
  ['simple', SimpleFSLockFactory.INSTANCE],
];

for (const [name, factory] of factories) {
  test(`${name}: deleting write.lock aborts the signal and fires lost by itself; once lost, always lost`, async () => {
    using tmp = tempDir();
    const dir = await FSDirectory.open(tmp.path, factory);
    const lock = await dir.obtainLock('write.lock');
    const lost: LockLostError[] = [];
    lock.on('lost', (reason) => lost.push(reason));
    const signal = lock.signal;
    assert.equal(signal.aborted, false);
    unlinkSync(join(tmp.path, 'write.lock'));
    const reason = assertLost(await abortedWithin(signal), /the lock file was deleted/);
    assert.deepEqual(lost, [reason], 'lost fired once, with the signal reason');
    assert.equal(lock.lostReason, reason);
    // Lucene's error for a deleted file is an I/O error, and it stays lost even if the file
    // comes back.
    assert.throws(() => lock.ensureValid(), LockIOError);
    writeFileSync(join(tmp.path, 'write.lock'), '');
    assert.throws(() => lock.ensureValid(), LockIOError);
    assert.equal(lost.length, 1);
    await lock.close().catch(() => {});
    assert.equal(lock.closed, true);
    assert.equal(lock.signal.reason, reason, 'a close after the loss keeps the loss reason');
  });

  test(`${name}: another file renamed over write.lock is a loss`, async () => {
    using tmp = tempDir();
    const dir = await FSDirectory.open(tmp.path, factory);
    const lock = await dir.obtainLock('write.lock');
    const signal = lock.signal;
    writeFileSync(join(tmp.path, 'other'), '');
    renameSync(join(tmp.path, 'other'), join(tmp.path, 'write.lock'));
    assertLost(await abortedWithin(signal), /replaced by another file/);
    assert.throws(() => lock.ensureValid(), AlreadyClosedError);
    await lock.close().catch(() => {});
  });

  test(`${name}: a symbolic link put in write.lock's place is a loss, even one pointing back at it`, async () => {
    using tmp = tempDir();
    const dir = await FSDirectory.open(tmp.path, factory);
    const lock = await dir.obtainLock('write.lock');
    const signal = lock.signal;
    // The original survives under another name, and the link resolves to it.
    renameSync(join(tmp.path, 'write.lock'), join(tmp.path, 'moved'));
    symlinkSync('moved', join(tmp.path, 'link'));
    renameSync(join(tmp.path, 'link'), join(tmp.path, 'write.lock'));
    assertLost(await abortedWithin(signal), /deleted|symbolic link/);
    assert.throws(() => lock.ensureValid());
    await lock.close().catch(() => {});
  });

  test(`${name}: removing the directory, or moving it away, is a loss`, async () => {
    using tmp = tempDir();
    const removed = join(tmp.path, 'removed');
    const moved = join(tmp.path, 'moved');
    const a = await (await FSDirectory.open(removed, factory)).obtainLock('write.lock');
    const b = await (await FSDirectory.open(moved, factory)).obtainLock('write.lock');
    const signals = [a.signal, b.signal];
    rmSync(removed, { recursive: true });
    renameSync(moved, join(tmp.path, 'elsewhere'));
    assertLost(await abortedWithin(signals[0] as AbortSignal), /deleted|directory .* removed/);
    assertLost(await abortedWithin(signals[1] as AbortSignal), /directory .*moved away/);
    await a.close().catch(() => {});
    await b.close().catch(() => {});
  });

  test(`${name}: another process deleting the file while we hold it aborts our signal`, async () => {
    using tmp = tempDir();
    const dir = await FSDirectory.open(tmp.path, factory);
    const lock = await dir.obtainLock('write.lock');
    const signal = lock.signal;
    const child = spawn(
      process.execPath,
      ['-e', 'require("fs").unlinkSync(process.argv[1])', join(tmp.path, 'write.lock')],
      { stdio: 'inherit' },
    );
    assert.deepEqual(await exitOf(child), { code: 0, signal: null });
    assertLost(await abortedWithin(signal), /the lock file was deleted/);
    await lock.close().catch(() => {});
  });

  test(`${name}: a loss after close does nothing`, async () => {
    using tmp = tempDir();
    const dir = await FSDirectory.open(tmp.path, factory);
    const lock = await dir.obtainLock('write.lock');
    const signal = lock.signal;
    const lost: unknown[] = [];
    lock.on('lost', (r) => lost.push(r));
    await lock.close();
    assert.ok(signal.reason instanceof AlreadyClosedError);
    writeFileSync(join(tmp.path, 'write.lock'), 'x');
    unlinkSync(join(tmp.path, 'write.lock'));
    // Longer than the poll: a watch left running would have reported by now.
    await sleep(LOCK_FILE_POLL_MS * 1.5);
    assert.deepEqual(lost, []);
    assert.ok(signal.reason instanceof AlreadyClosedError);
    assert.equal(lock.lostReason, undefined);
  });

  test(`${name}: a lost listener alone (no signal read) is enough to be told`, async () => {
    using tmp = tempDir();
    const dir = await FSDirectory.open(tmp.path, factory);
    const lock = await dir.obtainLock('write.lock');
    const lost = new Promise<LockLostError>((resolve) => lock.once('lost', resolve));
    unlinkSync(join(tmp.path, 'write.lock'));
    const timeout = new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error('no lost event')), NOTICE_MS).unref(),
    );
    assertLost(await Promise.race([lost, timeout]), /deleted/);
    await lock.close().catch(() => {});
  });

  test(`${name}: a change made before anyone watched is found when watching starts`, async () => {
    using tmp = tempDir();
    const dir = await FSDirectory.open(tmp.path, factory);
    const lock = await dir.obtainLock('write.lock');
    unlinkSync(join(tmp.path, 'write.lock'));
    assertLost(await abortedWithin(lock.signal), /deleted/);
    await lock.close().catch(() => {});
  });
}

test('native: a kernel lock dropped by an external force (its descriptor closed) is noticed', async () => {
  using tmp = tempDir();
  const dir = await FSDirectory.open(tmp.path);
  const lock = await dir.obtainLock('write.lock');
  const signal = lock.signal;
  closeSync((lock as unknown as Record<symbol, { fd: number }>)[internals]?.fd as number);
  assertLost(await abortedWithin(signal), /kernel lock was released/);
  await lock.close().catch(() => {});
});

test('single-instance: a name cleared by someone else aborts the signal at once', async () => {
  const factory = new SingleInstanceLockFactory();
  const dir = new ByteBuffersDirectory(factory);
  const lock = await dir.obtainLock('write.lock');
  const signal = lock.signal;
  factory.clear('write.lock');
  assert.equal(signal.aborted, true, 'synchronously, from the clear');
  assertLost(signal.reason, /cleared from the SingleInstanceLockFactory/);
  assert.throws(() => lock.ensureValid(), AlreadyClosedError);
  // A new holder of the name does not make the old handle valid again.
  const next = await dir.obtainLock('write.lock');
  assert.throws(() => lock.ensureValid(), AlreadyClosedError);
  await next.close();
  await lock.close().catch(() => {});
});

test('verifying: a loss of the real lock reaches the checked lock', async () => {
  using tmp = tempDir();
  const { PassThrough } = await import('node:stream');
  // An echo "server": every byte written comes back.
  const echo = new PassThrough();
  const dir = await FSDirectory.open(tmp.path);
  const factory = new VerifyingLockFactory(NativeFSLockFactory.INSTANCE, echo);
  const lock = await factory.obtainLock(dir, 'write.lock');
  const signal = lock.signal;
  unlinkSync(join(tmp.path, 'write.lock'));
  assertLost(await abortedWithin(signal), /deleted/);
  assert.throws(() => lock.ensureValid(), LockIOError);
  await lock.close().catch(() => {});
});

test('a watched lock never keeps the process alive, closed or not', async () => {
  using tmp = tempDir();
  const index = join(repoRoot, 'dist-test/src/directory/index.js');
  for (const close of [true, false]) {
    const script = `
      import { FSDirectory } from ${JSON.stringify(index)};
      const dir = await FSDirectory.open(process.argv[1]);
      const lock = await dir.obtainLock('write.lock');
      lock.signal.addEventListener('abort', () => {});
      lock.on('lost', () => {});
      ${close ? 'await lock.close();' : ''}
      console.log('done');
    `;
    mkdirSync(join(tmp.path, String(close)));
    const child = spawn(
      process.execPath,
      ['--input-type=module', '-e', script, join(tmp.path, String(close))],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const exit = await exitOf(child);
    clearTimeout(killer);
    assert.deepEqual(exit, { code: 0, signal: null }, `exits by itself (close: ${close})`);
  }
});

test('withLock runs fn with the held lock and releases on return and on throw', async () => {
  using tmp = tempDir();
  const dir = await FSDirectory.open(tmp.path);
  let seen: Lock | undefined;
  const result = await withLock(dir, (lock) => {
    seen = lock;
    lock.ensureValid();
    assert.ok(lock.token > 0);
    return 42;
  });
  assert.equal(result, 42);
  assert.equal(seen?.closed, true);

  const boom = new Error('boom');
  await assert.rejects(
    withLock(dir, async (lock) => {
      seen = lock;
      throw boom;
    }),
    (err) => err === boom,
  );
  assert.equal(seen?.closed, true);
  // Released each time: a plain obtain succeeds.
  await (await dir.obtainLock('write.lock')).close();
});

test('withLock rejects with the LockLostError when the lock was lost while fn ran', async () => {
  using tmp = tempDir();
  const dir = await FSDirectory.open(tmp.path, SimpleFSLockFactory.INSTANCE);
  await assert.rejects(
    withLock(dir, async (lock) => {
      unlinkSync(join(tmp.path, 'write.lock'));
      await abortedWithin(lock.signal);
      return 'done';
    }),
    (err: Error) => {
      assertLost(err, /deleted/);
      return true;
    },
  );
});

test('withLock waits for a held lock, with a timeout and a signal, and names the lock', async () => {
  using tmp = tempDir();
  const dir = await FSDirectory.open(tmp.path);
  const { child, token } = await holdLockInChild(tmp.path, 'native', 'other.lock');
  let ran = false;
  await assert.rejects(
    withLock(
      dir,
      () => {
        ran = true;
      },
      { name: 'other.lock', timeoutMs: 50 },
    ),
    LockTimeoutError,
  );
  const controller = new AbortController();
  const aborted = withLock(
    dir,
    () => {
      ran = true;
    },
    { name: 'other.lock', signal: controller.signal },
  );
  controller.abort();
  await assert.rejects(aborted, { code: 'ABORTED' });
  assert.equal(ran, false);
  const waiting = withLock(dir, (lock) => lock.token, { name: 'other.lock', timeoutMs: 20_000 });
  child.stdin?.write('release\n');
  assert.ok((await waiting) > token);
  await exitOf(child);
});

test('the observation hook runs once, on the first signal read or lost listener, never after close', async () => {
  class Probe extends LockHandleBase {
    calls = 0;
    protected override observed(): void {
      this.calls++;
    }
    protected checkValid(): void {}
    protected closeOnce(): void {}
  }
  const bySignal = new Probe('probe', 1);
  assert.equal(bySignal.calls, 0, 'an obtain alone observes nothing');
  void bySignal.signal;
  void bySignal.signal;
  bySignal.on('lost', () => {});
  assert.equal(bySignal.calls, 1);
  for (const add of [
    'on',
    'addListener',
    'once',
    'prependListener',
    'prependOnceListener',
  ] as const) {
    const probe = new Probe('probe', 1);
    (probe[add] as (e: string, l: () => void) => unknown)('lost', () => {});
    assert.equal(probe.calls, 1, `${add}('lost') observes`);
    assert.equal(probe.listenerCount('lost'), 1, `${add} still adds the listener`);
  }
  const other = new Probe('probe', 1);
  (other.on as (e: string, l: () => void) => unknown)('error', () => {});
  assert.equal(other.calls, 0, 'listeners of other events do not observe');
  const closed = new Probe('probe', 1);
  await closed.close();
  void closed.signal;
  closed.on('lost', () => {});
  assert.equal(closed.calls, 0, 'a closed handle is never observed');
});
