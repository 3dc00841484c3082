import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  existsSync,
  readFileSync,
  rmSync,
  statSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { FakeClock } from '../../src/core/clock.js';
import {
  AbortedError,
  InvalidArgumentError,
  LockIOError,
  type LockLostError,
  LockObtainFailedError,
} from '../../src/core/errors.js';
import { fileLocks } from '../../src/os/file-lock.js';
import {
  DEFAULT_ACQUIRE_INTERVAL_MS,
  DEFAULT_SHARED_FILE_KEEP_ALIVE_PERIOD,
  SharedFileLocker,
} from '../../src/store/index.js';
import {
  eventually,
  exitOf,
  fixture,
  orphanProof,
  sleep,
  tempDir,
  waitForLine,
} from '../helpers.js';
import { descriptorsOf, recordingLogger, settle, tracked } from './store-helpers.js';

const WALL = 1_700_000_000_000;

describe('SharedFileLocker', () => {
  it('conformance S1: start is idempotent, resolves once held; stop before start and twice is harmless', async () => {
    using dir = tempDir();
    const locker = new SharedFileLocker({ directory: dir.path });
    await locker.stop();
    assert.equal(await locker.keepAlive(), false);
    const a = locker.start();
    const b = locker.start();
    assert.equal(a, b);
    await a;
    assert.equal(typeof locker.token, 'number');
    assert.equal(await locker.keepAlive(), true);
    await locker.stop();
    await locker.stop();
    assert.equal(locker.token, undefined);
    assert.equal(await locker.keepAlive(), false);
  });

  it('conformance S2: defaults to 10 000 ms and false; configured values are kept', () => {
    using dir = tempDir();
    const d = new SharedFileLocker({ directory: dir.path });
    assert.equal(d.acquireIntervalMs, DEFAULT_ACQUIRE_INTERVAL_MS);
    assert.equal(d.acquireIntervalMs, 10_000);
    assert.equal(d.failIfLocked, false);
    assert.equal(d.defaultKeepAlivePeriodMs, DEFAULT_SHARED_FILE_KEEP_ALIVE_PERIOD);
    const c = new SharedFileLocker({
      directory: dir.path,
      acquireIntervalMs: 250,
      failIfLocked: true,
      name: 'broker-a',
    });
    assert.equal(c.acquireIntervalMs, 250);
    assert.equal(c.failIfLocked, true);
    assert.equal(c.name, 'broker-a');
  });

  it('d: bad configuration throws InvalidArgumentError with a clear message', () => {
    using dir = tempDir();
    const bad: [unknown, RegExp][] = [
      [
        { directory: dir.path, lockAcquireSleepInterval: -1 },
        /lockAcquireSleepInterval.*from 0 to/,
      ],
      [{ directory: dir.path, lockAcquireSleepInterval: Number.NaN }, /lockAcquireSleepInterval/],
      [{ directory: dir.path, lockAcquireSleepInterval: Infinity }, /lockAcquireSleepInterval/],
      [{ directory: dir.path, lockAcquireSleepInterval: '10' }, /lockAcquireSleepInterval/],
      [{ directory: dir.path, failIfLocked: 'yes' }, /failIfLocked must be a boolean/],
      [{ directory: dir.path, name: 42 }, /name must be a non-empty string/],
      [{ directory: dir.path, name: '' }, /name must be a non-empty string/],
      [{ directory: dir.path, logger: {} }, /logger/],
      [{ directory: '' }, /directory/],
      [{}, /directory/],
      [null, /must be an object/],
    ];
    for (const [options, message] of bad) {
      assert.throws(
        () => new SharedFileLocker(options as never),
        (err: unknown) => err instanceof InvalidArgumentError && message.test(err.message),
        JSON.stringify(options),
      );
    }
  });

  it('d: a directory that cannot be created fails start with a LockIOError naming it', async () => {
    using dir = tempDir();
    writeFileSync(join(dir.path, 'file'), '');
    const locker = new SharedFileLocker({ directory: join(dir.path, 'file', 'store') });
    await assert.rejects(locker.start(), (err: unknown) => {
      return err instanceof LockIOError && err.message.includes(join(dir.path, 'file', 'store'));
    });
    await assert.rejects(locker.start({ keepAlivePeriodMs: -5 }), InvalidArgumentError);
  });

  it('conformance S11: the lock file is <dir>/lock, parents are created, the name defaults to the directory', async () => {
    using dir = tempDir();
    const store = join(dir.path, 'a', 'b', 'KahaDB');
    const locker = new SharedFileLocker({ directory: store });
    assert.equal(locker.name, store);
    assert.equal(locker.path, join(store, 'lock'));
    await locker.start();
    assert.ok(existsSync(join(store, 'lock')));
    await locker.stop();
  });

  it('conformance S14: on acquire writes epoch ms (8 bytes BE) at offset 0, then nonce and token', async () => {
    using dir = tempDir();
    const clock = new FakeClock(0, WALL);
    const locker = new SharedFileLocker({ directory: dir.path, clock });
    await locker.start();
    const bytes = readFileSync(locker.path);
    assert.equal(bytes.length, 32);
    assert.equal(bytes.readBigInt64BE(0), BigInt(WALL));
    assert.equal(Number(bytes.readBigUInt64BE(24)), locker.token);
    assert.equal(locker.token, WALL * 1000);
    await locker.stop();
    // The next holder reads the previous token: strictly increasing even on the same clock.
    await locker.start();
    assert.equal(locker.token, WALL * 1000 + 1);
    const nonce2 = readFileSync(locker.path).subarray(8, 24);
    assert.notDeepEqual(nonce2, bytes.subarray(8, 24));
    await locker.stop();
    // A later clock floor wins over previous + 1.
    await clock.advance(5);
    await locker.start();
    assert.equal(locker.token, (WALL + 5) * 1000);
    await locker.stop();
  });

  it('conformance S12: the kernel lock excludes another process; failIfLocked rejects at once', async () => {
    using dir = tempDir();
    const child = orphanProof(
      spawn(process.execPath, [fixture('store-supervised'), dir.path, '50', '0'], {
        stdio: ['pipe', 'pipe', 'inherit'],
      }),
    );
    const line = await waitForLine(child, /^master \d+/);
    const childToken = Number(line.split(' ')[1]);
    const locker = new SharedFileLocker({ directory: dir.path, failIfLocked: true });
    await assert.rejects(
      locker.start(),
      (err: unknown) => err instanceof LockObtainFailedError && /another process/.test(err.message),
    );
    assert.equal(locker.token, undefined);
    // Not failIfLocked: waits, and takes over once the child releases.
    const waiter = new SharedFileLocker({ directory: dir.path, acquireIntervalMs: 50 });
    const started = tracked(waiter.start());
    await sleep(150);
    assert.equal(started.settled, false);
    child.stdin?.write('stop\n');
    await exitOf(child);
    await started.promise;
    assert.ok((waiter.token as number) > childToken);
    await waiter.stop();
  });

  it('conformance S13: same-process guard: a second locker fails fast or waits, never shares', async () => {
    using dir = tempDir();
    const first = new SharedFileLocker({ directory: dir.path });
    await first.start();
    const fast = new SharedFileLocker({ directory: `${dir.path}/.`, failIfLocked: true });
    await assert.rejects(fast.start(), (err: unknown) => {
      return err instanceof LockObtainFailedError && /this process/.test(err.message);
    });
    // Waiting with a 10 s interval: the in-process release wakes it at once.
    const second = new SharedFileLocker({ directory: dir.path });
    const started = tracked(second.start());
    await sleep(30);
    assert.equal(started.settled, false);
    const t0 = Date.now();
    await first.stop();
    await started.promise;
    assert.ok(Date.now() - t0 < 1_000);
    assert.equal(await first.keepAlive(), false);
    assert.equal(await second.keepAlive(), true);
    await second.stop();
  });

  it('conformance S3, S16: retries every interval; logs one INFO then one DEBUG per retry', async () => {
    using dir = tempDir();
    const clock = new FakeClock(0, WALL);
    const holder = new SharedFileLocker({ directory: dir.path });
    await holder.start();
    const logger = recordingLogger();
    const waiter = new SharedFileLocker({
      directory: dir.path,
      clock,
      logger,
      acquireIntervalMs: 1_000,
      wakeOnHints: false,
    });
    const started = tracked(waiter.start());
    await eventually(() => clock.pending === 1);
    assert.equal(logger.count('info'), 1);
    assert.match(logger.lines[0]?.message ?? '', /slave mode/);
    assert.equal(logger.count('debug'), 0);
    for (let i = 1; i <= 5; i++) {
      await clock.advance(999);
      await settle();
      assert.equal(logger.count('debug'), i - 1, 'no retry before the interval');
      await clock.advance(1);
      await eventually(() => logger.count('debug') === i && clock.pending === 1);
    }
    assert.equal(logger.count('info'), 1);
    assert.equal(started.settled, false);
    await holder.stop();
    await clock.advance(1_000);
    await started.promise;
    await waiter.stop();
  });

  it('conformance S4: stop during acquisition rejects start with "aborted due to shutdown", nothing locked', async () => {
    using dir = tempDir();
    const holder = new SharedFileLocker({ directory: dir.path });
    await holder.start();
    const waiter = new SharedFileLocker({ directory: dir.path, acquireIntervalMs: 20 });
    const started = waiter.start();
    await sleep(50);
    await waiter.stop();
    await assert.rejects(started, (err: unknown) => {
      return (
        err instanceof AbortedError &&
        err.message.startsWith('attempt to obtain lock aborted due to shutdown')
      );
    });
    assert.equal(waiter.token, undefined);
    await holder.stop();
    const third = new SharedFileLocker({ directory: dir.path, failIfLocked: true });
    await third.start();
    await third.stop();
    // The caller's signal gives up the wait the same way; the locker can start again later.
    await holder.start();
    const ac = new AbortController();
    const viaSignal = waiter.start({ signal: ac.signal });
    const reason = new Error('caller gave up');
    ac.abort(reason);
    await assert.rejects(viaSignal, (err: unknown) => {
      assert.ok(err instanceof AbortedError);
      // No stop() happened: the message must not claim a shutdown, and names the reason.
      assert.doesNotMatch(err.message, /shutdown/);
      assert.match(err.message, /aborted by the caller's start signal: caller gave up/);
      assert.equal(err.cause, reason);
      return true;
    });
    // A start signal that times out says so.
    const timedOut = waiter.start({ signal: AbortSignal.timeout(50) });
    await assert.rejects(timedOut, (err: unknown) => {
      assert.ok(err instanceof AbortedError);
      assert.equal(err.code, 'ABORTED');
      assert.doesNotMatch(err.message, /shutdown/);
      assert.match(err.message, /timed out/);
      assert.equal((err.cause as Error).name, 'TimeoutError');
      return true;
    });
    assert.equal(waiter.token, undefined);
    await holder.stop();
    await waiter.start();
    await waiter.stop();
  });

  it('conformance S17: after wait-then-acquire pauses lockKeepAlivePeriod, then re-verifies', async () => {
    using dir = tempDir();
    const clock = new FakeClock(0, WALL);
    const holder = new SharedFileLocker({ directory: dir.path });
    await holder.start();
    const waiter = new SharedFileLocker({
      directory: dir.path,
      clock,
      acquireIntervalMs: 100,
      wakeOnHints: false,
    });
    let started = tracked(waiter.start({ keepAlivePeriodMs: 500 }));
    await eventually(() => clock.pending === 1);
    // The holder's lock no longer checks out (its mtime changed behind its back), so its stop
    // leaves no released mark: the case the pause is for.
    const lostBehindItsBack = () => utimesSync(holder.path, 1, 1);
    lostBehindItsBack();
    // The in-process release wakes the waiter at once (no clock needed): it acquires and the
    // pause starts at the current fake time.
    await holder.stop();
    await eventually(() => existsSync(waiter.path) && clock.pending === 1);
    await sleep(20);
    assert.equal(clock.pending, 1);
    await clock.advance(499);
    await settle();
    assert.equal(started.settled, false, 'still pausing');
    await clock.advance(1);
    await started.promise;
    await waiter.stop();

    // The check after the pause fails (file deleted meanwhile): start rejects, nothing held.
    await holder.start();
    started = tracked(waiter.start({ keepAlivePeriodMs: 500 }));
    await eventually(() => clock.pending === 1);
    lostBehindItsBack();
    await holder.stop();
    await sleep(20);
    assert.equal(clock.pending, 1);
    unlinkSync(waiter.path);
    await clock.advance(500);
    await assert.rejects(started.promise, (err: unknown) => {
      return err instanceof LockObtainFailedError && /post-acquire pause/.test(err.message);
    });
    assert.equal(waiter.token, undefined);
    await holder.start();
    await holder.stop();
  });

  it('conformance S17: a clean stop leaves the released mark; the next holder then skips the pause, unless offset 0 changed since', async () => {
    using dir = tempDir();
    const clock = new FakeClock(0, WALL);
    const holder = new SharedFileLocker({ directory: dir.path, clock });
    await holder.start();
    const held = readFileSync(holder.path);
    const token = holder.token;
    await holder.stop();
    // The mark: ActiveMQ's stamp and our token untouched, the nonce replaced by
    // "released" + a copy of the stamp.
    const released = readFileSync(holder.path);
    assert.equal(released.length, 32);
    assert.deepEqual(released.subarray(0, 8), held.subarray(0, 8));
    assert.equal(released.subarray(8, 16).toString('ascii'), 'released');
    assert.deepEqual(released.subarray(16, 24), held.subarray(0, 8));
    assert.equal(Number(released.readBigUInt64BE(24)), token);

    await holder.start();
    const waiter = new SharedFileLocker({
      directory: dir.path,
      clock,
      acquireIntervalMs: 100,
      wakeOnHints: false,
    });
    let started = tracked(waiter.start({ keepAlivePeriodMs: 500 }));
    await eventually(() => clock.pending === 1);
    await holder.stop();
    // The in-process release wakes the waiter, which finds the mark: master with no pause
    // (the fake clock never moves).
    await started.promise;
    assert.ok((waiter.token as number) > (token as number) + 1);
    assert.ok(await waiter.keepAlive());

    // What decides is the file's content when the lock is taken. Here the holder's lock is
    // overwritten behind its back (so its own stop writes no mark): first with a mark that
    // matches offset 0 (skip), then as if an ActiveMQ broker had taken the lock after a clean
    // release, written its stamp at offset 0 only and died (the copy differs: pause).
    await waiter.stop();
    const mark = readFileSync(waiter.path);
    const brokerStamped = Buffer.from(mark);
    brokerStamped.writeBigInt64BE(BigInt(WALL + 1), 0);
    for (const [content, pauses] of [
      [mark, false],
      [brokerStamped, true],
    ] as const) {
      await holder.start();
      started = tracked(waiter.start({ keepAlivePeriodMs: 500 }));
      await eventually(() => clock.pending === 1);
      writeFileSync(holder.path, content);
      await holder.stop();
      if (pauses) {
        await eventually(() => clock.pending === 1 && existsSync(waiter.path));
        await sleep(20);
        assert.equal(started.settled, false, 'pausing');
        await clock.advance(500);
      }
      await started.promise;
      await waiter.stop();
    }
  });

  it('conformance S15: keepAlive is false, and stays false, when the file is deleted', async () => {
    using dir = tempDir();
    const locker = new SharedFileLocker({ directory: dir.path });
    await locker.start();
    unlinkSync(locker.path);
    assert.equal(await locker.keepAlive(), false);
    writeFileSync(locker.path, ''); // a new file does not bring it back
    assert.equal(await locker.keepAlive(), false);
    await locker.stop();
  });

  it('conformance S15: keepAlive is false when the content is rewritten, even with the mtime restored', async () => {
    using dir = tempDir();
    const locker = new SharedFileLocker({ directory: dir.path });
    await locker.start();
    const before = statSync(locker.path);
    const bytes = readFileSync(locker.path);
    bytes[10] = (bytes[10] as number) ^ 0xff; // another holder's nonce
    writeFileSync(locker.path, bytes);
    utimesSync(locker.path, before.atime, before.mtime);
    assert.equal(await locker.keepAlive(), false);
    assert.equal(await locker.keepAlive(), false);
    await locker.stop();
  });

  it('conformance S15: keepAlive is false on an mtime change alone', async () => {
    using dir = tempDir();
    const locker = new SharedFileLocker({ directory: dir.path });
    await locker.start();
    assert.equal(await locker.keepAlive(), true);
    const future = new Date(Date.now() + 60_000);
    utimesSync(locker.path, future, future);
    assert.equal(await locker.keepAlive(), false);
    await locker.stop();
  });

  it('conformance S15: keepAlive is false when the kernel lock was released behind its back', async () => {
    using dir = tempDir();
    const locker = new SharedFileLocker({ directory: dir.path });
    await locker.start();
    const [fd] = descriptorsOf(locker.path);
    assert.ok(fd !== undefined);
    fileLocks().unlock(fd, locker.path);
    assert.equal(await locker.keepAlive(), false);
    await locker.stop();
  });

  it('conformance S15: the file replaced by another one (rename over it) makes keepAlive false', async () => {
    using dir = tempDir();
    const locker = new SharedFileLocker({ directory: dir.path });
    await locker.start();
    writeFileSync(`${locker.path}.new`, readFileSync(locker.path));
    rmSync(locker.path);
    writeFileSync(locker.path, readFileSync(`${locker.path}.new`));
    assert.equal(await locker.keepAlive(), false);
    await locker.stop();
  });

  it('conformance S18: stop unlocks without deleting the file', async () => {
    using dir = tempDir();
    const locker = new SharedFileLocker({ directory: dir.path });
    await locker.start();
    await locker.stop();
    assert.ok(existsSync(locker.path));
    const other = new SharedFileLocker({ directory: dir.path, failIfLocked: true });
    await other.start();
    await other.stop();
  });

  it('a keep-alive that finds the lock gone resolves false, with one lost event (LOCK_LOST) before it', async () => {
    using dir = tempDir();
    const locker = new SharedFileLocker({ directory: dir.path, watchLockFile: false });
    const seen: LockLostError[] = [];
    locker.on('lost', (reason) => seen.push(reason));
    await locker.start();
    unlinkSync(locker.path);
    const alive = locker.keepAlive();
    assert.equal(await alive, false);
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.code, 'LOCK_LOST');
    assert.equal(await locker.keepAlive(), false);
    await locker.stop();
    assert.equal(seen.length, 1);
  });
});
