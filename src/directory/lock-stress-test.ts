import { connect, type Socket } from 'node:net';
import {
  AbortedError,
  InvalidArgumentError,
  LockIOError,
  LockObtainFailedError,
  LockViolationError,
  ProtocolError,
} from '../core/errors.js';
import { abortableSleep } from '../core/wait.js';
import { ByteChannel } from './byte-channel.js';
import { FSDirectory } from './fs-directory.js';
import type { Lock } from './lock.js';
import { LockFactory } from './lock-factory.js';
import { START_GUN_SIGNAL } from './lock-verify-server.js';
import { NoLockFactory } from './no-lock-factory.js';
import { VerifyingLockFactory } from './verifying-lock-factory.js';

/** The lock every stress client contends for (Lucene's `LockStressTest.LOCK_FILE_NAME`). */
export const STRESS_LOCK_NAME = 'test.lock';
const DEFAULT_CONNECT_TIMEOUT_MS = 3000;
/** Lucene's odds of probing for a double obtain while holding: one round in ten. */
const DOUBLE_OBTAIN_PROBE_RATE = 0.1;

export interface LockStressTestOptions {
  /** This client's id, 0..255, unique among the server's clients. */
  myId: number;
  verifierHost: string;
  verifierPort: number;
  /** The factory under test; the client wraps it in a {@link VerifyingLockFactory}. */
  factory: LockFactory;
  /** The directory holding `test.lock`, shared by every client. */
  lockDir: string;
  /** Pause while holding and again after each try. */
  sleepTimeMs: number;
  /** Number of tries. */
  count: number;
  /** Stops the run between steps; the promise then rejects with an {@link AbortedError}. */
  signal?: AbortSignal | undefined;
  /** Default 3000 ms (Lucene's since PR #12535). */
  connectTimeoutMs?: number | undefined;
  /** `Math.random` unless given: decides when to probe for a double obtain. */
  random?: (() => number) | undefined;
}

export interface LockStressTestResult {
  /** Tries that got the lock. */
  obtained: number;
  /** Tries that found it held elsewhere ({@link LockObtainFailedError}). */
  failed: number;
  /** Second obtains tried while holding; each failed, as it must. */
  doubleObtainProbes: number;
  /** From the start signal to the last release. */
  elapsedMs: number;
}

/**
 * Lucene's `LockStressTest`: one of several processes hammering one lock while a
 * {@link LockVerifyServer} checks that no two ever hold it at once.
 *
 * Connects (3 s timeout), sends its id byte, waits for the start signal, then `count` times:
 * tries to obtain `test.lock` through a {@link VerifyingLockFactory} around `factory`; when
 * that worked, one time in ten tries a second obtain in this process, which must fail with
 * {@link LockObtainFailedError} (otherwise: {@link LockViolationError} "Double obtain"),
 * sleeps `sleepTimeMs` holding the lock and releases it; a {@link LockObtainFailedError} on
 * the first obtain just counts as a failed try. Then it sleeps `sleepTimeMs` again.
 *
 * Any other error ends the run: above all "Lock server died because of locking error.", which
 * means the server saw a violation (here or in another client). As in Lucene, the factory is
 * called directly with an {@link FSDirectory} that has no lock factory of its own.
 */
export async function runLockStressTest(
  options: LockStressTestOptions,
): Promise<LockStressTestResult> {
  const { myId, verifierHost, verifierPort, factory, lockDir, sleepTimeMs, count, signal } =
    checkOptions(options);
  const random = options.random ?? Math.random;
  const directory = await FSDirectory.open(lockDir, NoLockFactory.INSTANCE);
  const socket = await connectToVerifier(
    verifierHost,
    verifierPort,
    options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    signal,
  );
  const channel = ByteChannel.of(socket);
  // Waiting for the start can take as long as the slowest client: an abort hangs up at once.
  // Later, an abort stops between steps, after the held lock was released and reported, so
  // the server sees a clean exit.
  const onAbort = () => socket.destroy();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await channel.writeByte(myId);
    let start: number;
    try {
      start = await channel.readByte();
    } catch (err) {
      checkAborted(signal);
      throw new ProtocolError('Protocol violation: the server hung up before the start signal', {
        cause: err,
      });
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
    if (start !== START_GUN_SIGNAL) {
      throw new ProtocolError(
        `Protocol violation: expected the start signal ${START_GUN_SIGNAL}, got ${start}`,
      );
    }
    const verifying = new VerifyingLockFactory(factory, channel);
    const stats = { obtained: 0, failed: 0, doubleObtainProbes: 0 };
    const began = performance.now();
    for (let i = 0; i < count; i++) {
      checkAborted(signal);
      const lock = await tryObtain(verifying, directory);
      if (lock === undefined) {
        stats.failed++;
      } else {
        stats.obtained++;
        await holdAndRelease(lock, async () => {
          if (random() < DOUBLE_OBTAIN_PROBE_RATE) {
            stats.doubleObtainProbes++;
            await probeDoubleObtain(verifying, directory);
          }
          await pause(sleepTimeMs, signal);
        });
      }
      await pause(sleepTimeMs, signal);
    }
    return { ...stats, elapsedMs: performance.now() - began };
  } catch (err) {
    checkAborted(signal);
    throw err;
  } finally {
    // Half-close first so the server reads a clean EOF rather than a reset.
    if (!socket.destroyed) socket.end(() => socket.destroy());
  }
}

async function tryObtain(factory: LockFactory, directory: FSDirectory): Promise<Lock | undefined> {
  try {
    return await factory.obtainLock(directory, STRESS_LOCK_NAME);
  } catch (err) {
    if (err instanceof LockObtainFailedError) return undefined;
    throw err;
  }
}

/** Runs `body` while holding `lock`, then releases it; the body's failure wins over the release's. */
async function holdAndRelease(lock: Lock, body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (err) {
    await lock.close().catch(() => {
      // Reporting the body's failure.
    });
    throw err;
  }
  await lock.close();
}

async function probeDoubleObtain(factory: LockFactory, directory: FSDirectory): Promise<void> {
  const second = await tryObtain(factory, directory);
  if (second === undefined) return;
  await second.close().catch(() => {
    // Reporting the double obtain.
  });
  throw new LockViolationError(
    `Double obtain: ${STRESS_LOCK_NAME} in ${directory.path} was obtained twice by one process`,
  );
}

async function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  // Java's Thread.sleep(0) returns at once; a 0 ms timer would cost a millisecond here.
  if (ms > 0) await abortableSleep(ms, signal, undefined, 'Lock stress test');
}

function checkAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new AbortedError('Lock stress test aborted', { cause: signal.reason });
}

function connectToVerifier(
  host: string,
  port: number,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<Socket> {
  checkAborted(signal);
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, noDelay: true });
    const settle = (err?: Error) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      socket.off('connect', onConnect);
      socket.off('error', onError);
      if (err === undefined) {
        resolve(socket);
      } else {
        socket.destroy();
        reject(err);
      }
    };
    const onConnect = () => settle();
    const onError = (err: Error) =>
      settle(
        new LockIOError(
          `Cannot connect to the lock verify server at ${host}:${port}: ${err.message}`,
          { cause: err },
        ),
      );
    const onAbort = () =>
      settle(new AbortedError('Lock stress test aborted', { cause: signal?.reason }));
    const timer = setTimeout(
      () =>
        settle(
          new LockIOError(
            `Connecting to the lock verify server at ${host}:${port} timed out after ${timeoutMs} ms`,
          ),
        ),
      timeoutMs,
    );
    socket.once('connect', onConnect);
    socket.once('error', onError);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function checkOptions(options: LockStressTestOptions): LockStressTestOptions {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError('runLockStressTest needs an options object');
  }
  const {
    myId,
    verifierHost,
    verifierPort,
    factory,
    lockDir,
    sleepTimeMs,
    count,
    connectTimeoutMs,
  } = options;
  if (!Number.isInteger(myId) || myId < 0 || myId > 255) {
    throw new InvalidArgumentError(`myID must be a unique int 0..255, got ${String(myId)}`);
  }
  if (typeof verifierHost !== 'string' || verifierHost.length === 0) {
    throw new InvalidArgumentError(
      `verifierHost must be a host name or address, got ${String(verifierHost)}`,
    );
  }
  if (!Number.isInteger(verifierPort) || verifierPort < 1 || verifierPort > 65535) {
    throw new InvalidArgumentError(
      `verifierPort must be an integer from 1 to 65535, got ${String(verifierPort)}`,
    );
  }
  if (!(factory instanceof LockFactory)) {
    throw new InvalidArgumentError(`factory must be a LockFactory, got ${String(factory)}`);
  }
  if (typeof lockDir !== 'string' || lockDir.length === 0) {
    throw new InvalidArgumentError(`lockDir must be a directory path, got ${String(lockDir)}`);
  }
  if (typeof sleepTimeMs !== 'number' || !Number.isFinite(sleepTimeMs) || sleepTimeMs < 0) {
    throw new InvalidArgumentError(
      `sleepTimeMs must be a non-negative number, got ${String(sleepTimeMs)}`,
    );
  }
  if (!Number.isSafeInteger(count) || count < 0) {
    throw new InvalidArgumentError(`count must be a non-negative integer, got ${String(count)}`);
  }
  if (
    connectTimeoutMs !== undefined &&
    (typeof connectTimeoutMs !== 'number' || !(connectTimeoutMs > 0))
  ) {
    throw new InvalidArgumentError(
      `connectTimeoutMs must be a positive number, got ${String(connectTimeoutMs)}`,
    );
  }
  return options;
}
