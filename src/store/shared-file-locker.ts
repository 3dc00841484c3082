import { randomBytes } from 'node:crypto';
import {
  fstatSync,
  fsyncSync,
  lstatSync,
  read,
  readSync,
  realpathSync,
  stat,
  writeSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import {
  InvalidArgumentError,
  isErrno,
  LockIOError,
  LockLostError,
  LockObtainFailedError,
} from '../core/errors.js';
import { nextFencingToken } from '../core/fencing.js';
import {
  booleanOption,
  customOption,
  readOptions,
  type SpecOf,
  withDefault,
} from '../core/option-spec.js';
import { describeValue } from '../core/options.js';
import { abortableSleep } from '../core/wait.js';
import { watchLockFile } from '../directory/lock-file-watch.js';
import { makeDirectoriesSync } from '../directory/make-directories.js';
import { fileWakeSource } from '../os/file-watcher.js';
import {
  explainOpenError,
  KernelFileLock,
  type KernelFileLockRefusal,
  kernelFileLockReleases,
} from '../os/kernel-file-lock.js';
import {
  ABSTRACT_LOCKER_SPEC,
  AbstractLocker,
  type AbstractLockerOptions,
  type AcquireContext,
} from './abstract-locker.js';
import { describe } from './describe-error.js';

const readAsync = promisify(read);
const statAsync = promisify(stat);

/** ActiveMQ's lock file name inside the store directory. */
export const LOCK_FILE_NAME = 'lock';
/**
 * The keep-alive period suggested to the supervisor. ActiveMQ's file stores default to 0 (no
 * keep-alive at all), which its own documentation says can give two masters on NFS; a stolen
 * or deleted lock file is only noticed by a keep-alive, so ours runs every 5 s by default.
 */
export const DEFAULT_SHARED_FILE_KEEP_ALIVE_PERIOD = 5_000;

/**
 * Lock file layout. Offset 0: the acquire time, epoch ms, 8 bytes big-endian: exactly what
 * ActiveMQ's `LockFile` writes, so ActiveMQ tools read it the same. Then ours: a 16-byte
 * holder nonce (theft is detected by content, not only by mtime) and the fencing token as an
 * unsigned 64-bit big-endian integer.
 *
 * Released mark: a holder that stops cleanly (its `stop()` runs once nothing acts on the store
 * any more, which the supervisor guarantees by stopping the service first) overwrites the
 * nonce, while it still holds the kernel lock, with the ASCII bytes `released` followed by a
 * copy of the 8 bytes at offset 0. The next holder skips the post-acquire pause only when it
 * finds that mark AND the copy still equals offset 0: an ActiveMQ broker that took the lock in
 * between wrote its own acquire time at offset 0 (and only there), so the copy no longer
 * matches and the pause applies. A crashed holder (kill -9) never writes the mark, and a
 * holder whose lock was taken behind its back does not write it either (it writes only while
 * its keep-alive check still passes). ActiveMQ reads none of these bytes.
 */
const EPOCH_OFFSET = 0;
const NONCE_OFFSET = 8;
const NONCE_LENGTH = 16;
const TOKEN_OFFSET = NONCE_OFFSET + NONCE_LENGTH;
const RECORD_LENGTH = TOKEN_OFFSET + 8;
const RELEASED_MAGIC = Buffer.from('released', 'ascii');
const RELEASED_EPOCH_OFFSET = NONCE_OFFSET + RELEASED_MAGIC.length;

/** Whether `record` (a whole one) carries a released mark that matches its offset-0 stamp. */
function releasedCleanly(record: Buffer): boolean {
  return (
    record.subarray(NONCE_OFFSET, RELEASED_EPOCH_OFFSET).equals(RELEASED_MAGIC) &&
    record
      .subarray(RELEASED_EPOCH_OFFSET, RELEASED_EPOCH_OFFSET + 8)
      .equals(record.subarray(EPOCH_OFFSET, EPOCH_OFFSET + 8))
  );
}

export interface SharedFileLockerOptions extends AbstractLockerOptions {
  /** The store directory; the lock file is `<directory>/lock`. Created with its parents. */
  directory: string;
  /**
   * Wake early on kernel hints (inotify on Linux) that the lock may have been freed, besides
   * polling every `acquireIntervalMs` (true). Hints never replace the poll.
   */
  wakeOnHints?: boolean | undefined;
  /**
   * While master, notice in the background that the lock file was deleted, replaced or
   * rewritten by someone else (inotify on the file and its directory on Linux, plus a re-check
   * every second everywhere) and report it at once as `lost` (code `LOCK_LOST`), instead of at
   * the next keep-alive (true).
   */
  watchLockFile?: boolean | undefined;
}

export const SHARED_FILE_LOCKER_SPEC = {
  ...ABSTRACT_LOCKER_SPEC,
  directory: customOption('a directory path', (value, label) => {
    if (typeof value !== 'string' || value.length === 0 || value.includes('\0')) {
      throw new InvalidArgumentError(
        `SharedFileLocker needs a ${label} path, got ${describeValue(value)}`,
      );
    }
    return value;
  }),
  wakeOnHints: withDefault(booleanOption(), true),
  watchLockFile: withDefault(booleanOption(), true),
} as const satisfies SpecOf<SharedFileLockerOptions>;

interface Held {
  /** The kernel lock, registered under the lock file's real path (the same-process guard). */
  lock: KernelFileLock;
  dev: bigint;
  ino: bigint;
  mtimeNs: bigint;
  nonce: Buffer;
  /** The 8 bytes we wrote at offset 0 (copied into the released mark). */
  epoch: Buffer;
  /** Stops the background watch, if one runs. */
  unwatch?: (() => void) | undefined;
}

/** An acquisition: the fencing token, and whether the previous holder left the released mark. */
interface Acquired {
  token: number;
  previousReleased: boolean;
}

/**
 * ActiveMQ's `SharedFileLocker` with its `LockFile`: one master per store directory through
 * an exclusive kernel lock (see `src/os/file-lock.ts`; on Linux an OFD lock, which conflicts
 * with Java `FileChannel` locks, so an ActiveMQ broker on the same KahaDB directory and this
 * locker exclude each other).
 *
 * - Acquire: refused at once if a locker of this process holds the file (the guard, keyed by
 *   real path); otherwise a non-blocking exclusive kernel lock on the whole file. On success
 *   the file gets the epoch ms at offset 0 (ActiveMQ's format), a fresh holder nonce and the
 *   fencing token `max(previous + 1, wall µs)` (previous read from the file), is fsynced, and
 *   its mtime recorded.
 * - Waiting (not `failIfLocked`): one INFO line, then a DEBUG line per retry; a retry every
 *   `lockAcquireSleepInterval`, earlier on a release hint. After a wait-then-acquire the
 *   locker pauses `keepAlivePeriodMs` (AMQ-4705: the old master's keep-alive must run first)
 *   and rejects if the lock no longer checks out; not when the previous holder left the
 *   released mark (it stopped before it released, so there is no old master to wait for).
 * - `keepAlive()` is false (and stays false) when the kernel lock is gone, the file was
 *   deleted or replaced, its mtime changed, or its nonce is not ours.
 * - `stop()` writes the released mark if the lock is still ours, releases the kernel lock and
 *   leaves the file in place.
 *
 * Not for file systems whose locks are unreliable (NFSv3 without a lock manager, OCFS2): the
 * keep-alive narrows the window there, it does not close it.
 */
export class SharedFileLocker extends AbstractLocker {
  readonly directory: string;
  readonly path: string;
  readonly defaultKeepAlivePeriodMs = DEFAULT_SHARED_FILE_KEEP_ALIVE_PERIOD;
  readonly #wakeOnHints: boolean;
  readonly #watchLockFile: boolean;
  #held: Held | undefined;

  constructor(options: SharedFileLockerOptions) {
    const o = readOptions(options, 'SharedFileLocker options', SHARED_FILE_LOCKER_SPEC);
    if (o.directory === undefined) {
      throw new InvalidArgumentError('SharedFileLocker needs a directory path, got undefined');
    }
    const directory = resolve(o.directory);
    super(o, directory);
    this.directory = directory;
    this.path = join(directory, LOCK_FILE_NAME);
    this.#wakeOnHints = o.wakeOnHints;
    this.#watchLockFile = o.watchLockFile;
  }

  protected async doStart(context: AcquireContext): Promise<number> {
    const token = await this.#acquire(context);
    const held = this.#held;
    if (held !== undefined && this.#watchLockFile) this.#watch(held);
    return token;
  }

  /**
   * Re-checks the held lock (the keep-alive's checks) on every kernel hint about the file or
   * its directory (deleted, renamed over, rewritten) and every second; the first failed check reports the loss. A check that
   * cannot tell (an I/O error) reports nothing: the keep-alive's caller decides about those.
   */
  #watch(held: Held): void {
    let running = false;
    let again = false;
    const check = () => {
      if (this.#held !== held) return;
      if (running) {
        again = true;
        return;
      }
      running = true;
      this.#check().then(
        (ok) => {
          running = false;
          if (!ok && this.#held === held) {
            this.markLost(
              new LockLostError(
                `Lock file ${this.path} ${this.#whatHappened(held)}: no longer the lock owner (${this.name})`,
              ),
            );
            held.unwatch?.();
          } else if (again) {
            again = false;
            check();
          }
        },
        () => {
          running = false;
        },
      );
    };
    const unwatch = watchLockFile(this.path, check);
    // Also a rewrite in place (another writer's close-after-write), which the replacement
    // watch does not report; our own writes come before the watch starts and after it stops.
    const unwake = fileWakeSource(this.path)(check);
    held.unwatch = () => {
      unwatch();
      unwake();
    };
  }

  /** For the loss message: what became of the lock file. */
  #whatHappened(held: Held): string {
    try {
      const st = lstatSync(this.path, { bigint: true });
      if (st.dev !== held.dev || st.ino !== held.ino) {
        return 'was replaced by another file (renamed over, or deleted and recreated)';
      }
      return 'was rewritten by another writer, or its kernel lock is gone';
    } catch {
      return 'was deleted (or its directory moved away)';
    }
  }

  async #acquire({ signal, keepAlivePeriodMs }: AcquireContext): Promise<number> {
    const key = this.#prepare();
    let waited = false;
    for (;;) {
      if (signal.aborted) throw signal.reason;
      const outcome = this.#tryLock(key);
      if (typeof outcome === 'object') {
        if (!waited || keepAlivePeriodMs === 0) return outcome.token;
        if (outcome.previousReleased) {
          // The previous holder stopped and then released: no old master left to notice.
          this.logger.debug(
            `Lock on ${this.path} was released cleanly by its previous holder; no post-acquire pause (${this.name})`,
          );
          return outcome.token;
        }
        // AMQ-4705: let the previous master's keep-alive notice before we act as master.
        try {
          await abortableSleep(keepAlivePeriodMs, signal, this.clock, 'post-acquire pause');
          if (!(await this.#check())) {
            throw new LockObtainFailedError(
              `Lock on ${this.path} was lost during the post-acquire pause of ${keepAlivePeriodMs} ms`,
            );
          }
        } catch (err) {
          this.#release();
          throw err;
        }
        return outcome.token;
      }
      if (this.failIfLocked) {
        throw new LockObtainFailedError(`Lock held by ${outcome}: ${this.path} (${this.name})`);
      }
      if (!waited) {
        this.logger.info(
          `Database ${this.path} is locked by ${outcome}. This broker is now in slave mode waiting a lock to be acquired (${this.name})`,
        );
        waited = true;
      } else {
        this.logger.debug(
          `Database ${this.path} is still locked by ${outcome}; retrying in ${this.acquireIntervalMs} ms (${this.name})`,
        );
      }
      await this.#sleepOrHint(key, signal);
    }
  }

  /** Creates the directory (with parents) and returns the guard key: the lock's real path. */
  #prepare(): string {
    try {
      makeDirectoriesSync(this.directory);
      return join(realpathSync(this.directory), LOCK_FILE_NAME);
    } catch (err) {
      throw new LockIOError(`Cannot create lock directory ${this.directory}: ${describe(err)}`, {
        cause: err,
      });
    }
  }

  /** One attempt: the acquisition, or who holds the lock. */
  #tryLock(key: string): Acquired | 'this process' | 'another process' {
    let lock: KernelFileLock | KernelFileLockRefusal;
    try {
      // probeFirst: waiters that opened the file for writing and closed it again would wake
      // every other waiter (close-after-write is the release hint). #prepare made the directory.
      lock = KernelFileLock.tryAcquire(this.directory, this.path, { key, probeFirst: true });
    } catch (err) {
      throw asIOError(err, this.directory, this.path);
    }
    // A lock on an inode deleted meanwhile protects nothing: someone else's turn.
    if (lock === 'deleted') return 'another process';
    if (typeof lock === 'string') return lock;
    const fd = lock.fd;
    try {
      const record = Buffer.alloc(RECORD_LENGTH);
      const n = readSync(fd, record, 0, RECORD_LENGTH, 0);
      const previous =
        n === RECORD_LENGTH ? Number(record.readBigUInt64BE(TOKEN_OFFSET)) : undefined;
      const previousReleased = n === RECORD_LENGTH && releasedCleanly(record);
      // nextFencingToken ignores a previous token that is not a safe integer (a damaged file).
      const token = nextFencingToken(previous, this.clock.wall());
      const nonce = randomBytes(NONCE_LENGTH);
      record.writeBigInt64BE(BigInt(Math.floor(this.clock.wall())), EPOCH_OFFSET);
      nonce.copy(record, NONCE_OFFSET);
      record.writeBigUInt64BE(BigInt(token), TOKEN_OFFSET);
      writeSync(fd, record, 0, RECORD_LENGTH, 0);
      fsyncSync(fd);
      const after = fstatSync(fd, { bigint: true });
      this.#held = {
        lock,
        dev: after.dev,
        ino: after.ino,
        mtimeNs: after.mtimeNs,
        nonce,
        epoch: Buffer.from(record.subarray(EPOCH_OFFSET, EPOCH_OFFSET + 8)),
      };
      return { token, previousReleased };
    } catch (err) {
      lock.release();
      throw asIOError(err, this.directory, this.path);
    }
  }

  /** Sleeps one interval, or less when a release hint arrives (kernel or in-process). */
  async #sleepOrHint(key: string, signal: AbortSignal): Promise<void> {
    const pause = new AbortController();
    const wake = () => pause.abort();
    const onAbort = () => pause.abort();
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    const unrelease = kernelFileLockReleases(key)(wake);
    const unwatch = this.#wakeOnHints ? fileWakeSource(this.path)(wake) : undefined;
    try {
      await this.clock.sleep(this.acquireIntervalMs, pause.signal);
    } catch {
      // Woken early by a hint or by the signal; the caller's loop checks which.
    } finally {
      unwatch?.();
      unrelease();
      signal.removeEventListener('abort', onAbort);
    }
  }

  /**
   * Writes the released mark (see the file layout) if the lock still checks out as ours, then
   * releases. The caller's contract: nothing acts on the store any more (the supervisor stops
   * the service before the locker). A failure to write only costs the next holder its pause.
   */
  protected async doStop(): Promise<void> {
    const held = this.#held;
    held?.unwatch?.();
    if (held !== undefined) {
      let ours = false;
      try {
        ours = await this.#check();
      } catch {
        // Unknown: leave no mark; the next holder pauses.
      }
      if (ours && this.#held === held) {
        try {
          const mark = Buffer.concat([RELEASED_MAGIC, held.epoch]);
          writeSync(held.lock.fd, mark, 0, mark.length, NONCE_OFFSET);
          fsyncSync(held.lock.fd);
        } catch (err) {
          this.logger.warn(
            `Could not mark ${this.path} released (${describe(err)}); the next holder will pause (${this.name})`,
          );
        }
      }
    }
    this.#release();
  }

  /**
   * Releases the kernel lock (a close failure changes nothing: the lock goes with the
   * descriptor) and wakes this process's waiters; the file stays (AMQ-5568).
   */
  #release(): void {
    const held = this.#held;
    if (held === undefined) return;
    this.#held = undefined;
    held.unwatch?.();
    held.lock.release();
  }

  protected async doKeepAlive(): Promise<boolean> {
    const ok = await this.#check();
    if (!ok) this.logger.warn(`Lock file ${this.path} is no longer ours (${this.name})`);
    return ok;
  }

  /**
   * ActiveMQ's checks (kernel lock valid, file exists, mtime unchanged) plus ours: the file at
   * the path is still our inode and still carries our nonce. False means lost; an error we
   * cannot interpret rejects ("unknown").
   */
  async #check(): Promise<boolean> {
    const held = this.#held;
    if (held === undefined || !held.lock.registered) return false;
    // Also false when our descriptor was closed (or reused) behind our back.
    if (!held.lock.ownsKernelLock()) return false;
    let current: Awaited<ReturnType<typeof statAsync>>;
    try {
      current = await statAsync(this.path, { bigint: true });
    } catch (err) {
      if (isErrno(err, 'ENOENT', 'ENOTDIR')) return false;
      throw asIOError(err, this.directory, this.path);
    }
    if (current.dev !== held.dev || current.ino !== held.ino) return false;
    if (current.mtimeNs !== held.mtimeNs) return false;
    const record = Buffer.alloc(RECORD_LENGTH);
    const { bytesRead } = await readAsync(held.lock.fd, record, 0, RECORD_LENGTH, 0);
    if (bytesRead < RECORD_LENGTH) return false;
    return record.subarray(NONCE_OFFSET, NONCE_OFFSET + NONCE_LENGTH).equals(held.nonce);
  }

  override toString(): string {
    return `SharedFileLocker(${this.path})`;
  }
}

function asIOError(err: unknown, dir: string, path: string): unknown {
  if (err instanceof LockIOError || err instanceof InvalidArgumentError) return err;
  const explained = explainOpenError(err, dir, path);
  if (explained instanceof LockIOError) return explained;
  return new LockIOError(`I/O error on lock file ${path}: ${describe(err)}`, { cause: err });
}
