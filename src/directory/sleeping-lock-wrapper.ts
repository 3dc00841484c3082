import { type Clock, systemClock } from '../core/clock.js';
import { checkDuration } from '../core/duration.js';
import { InvalidArgumentError, LockObtainFailedError, LockTimeoutError } from '../core/errors.js';
import { validateLockName } from '../core/lock-name.js';
import { checkClock, describeValue } from '../core/options.js';
import { abortableSleep } from '../core/wait.js';
import { checkObtainOptions, type Directory, type ObtainOptions } from './directory.js';
import { FilterDirectory } from './filter-directory.js';
import type { Lock } from './lock.js';

/**
 * Lucene's `SleepingLockWrapper`: `obtainLock` retries while the lock is held elsewhere.
 *
 * With timeout T and poll interval P it makes ⌊T/P⌋ + 1 attempts, sleeping P after each
 * failure, retrying only on {@link LockObtainFailedError}; then it fails with a
 * {@link LockTimeoutError} ("Lock obtain timed out: …") whose cause is the first failure.
 * T = {@link SleepingLockWrapper.LOCK_OBTAIN_WAIT_FOREVER} retries forever. Beyond Lucene, the
 * wait can be cancelled with `obtainLock(name, { signal })`. It polls: for a wait that wakes
 * the moment the lock is released, use {@link acquireLock}.
 */
export class SleepingLockWrapper extends FilterDirectory {
  static readonly LOCK_OBTAIN_WAIT_FOREVER = -1;
  static readonly DEFAULT_POLL_INTERVAL = 1000;

  readonly lockWaitTimeout: number;
  readonly pollInterval: number;
  readonly #clock: Clock;

  constructor(
    delegate: Directory,
    lockWaitTimeout: number,
    pollInterval = SleepingLockWrapper.DEFAULT_POLL_INTERVAL,
    clock: Clock = systemClock,
  ) {
    super(delegate);
    if (
      typeof lockWaitTimeout !== 'number' ||
      !Number.isFinite(lockWaitTimeout) ||
      (lockWaitTimeout < 0 && lockWaitTimeout !== SleepingLockWrapper.LOCK_OBTAIN_WAIT_FOREVER)
    ) {
      throw new InvalidArgumentError(
        `lockWaitTimeout should be LOCK_OBTAIN_WAIT_FOREVER or a non-negative number (got ${describeValue(lockWaitTimeout)})`,
      );
    }
    // Each poll is one timer: longer than Node's longest one would fire at once.
    checkDuration(pollInterval, 'SleepingLockWrapper pollInterval');
    if (pollInterval === 0 && lockWaitTimeout !== 0) {
      // Lucene divides by zero here; a zero poll would also spin.
      throw new InvalidArgumentError('pollInterval must be positive when lockWaitTimeout is not 0');
    }
    this.lockWaitTimeout = lockWaitTimeout;
    this.pollInterval = pollInterval;
    this.#clock = checkClock(clock, 'SleepingLockWrapper clock');
  }

  override async obtainLock(name: string, options?: ObtainOptions): Promise<Lock> {
    // Checked before the first attempt, which might otherwise obtain the lock and then fail.
    validateLockName(name);
    checkObtainOptions(options);
    let failure: LockObtainFailedError | undefined;
    const maxSleepCount =
      this.pollInterval === 0 ? 0 : Math.floor(this.lockWaitTimeout / this.pollInterval);
    let sleepCount = 0;
    do {
      try {
        return await this.in.obtainLock(name, options);
      } catch (err) {
        if (!(err instanceof LockObtainFailedError)) throw err;
        failure ??= err;
      }
      await abortableSleep(
        this.pollInterval,
        options?.signal,
        this.#clock,
        `Waiting for lock ${name}`,
      );
    } while (
      this.lockWaitTimeout === SleepingLockWrapper.LOCK_OBTAIN_WAIT_FOREVER ||
      sleepCount++ < maxSleepCount
    );
    throw new LockTimeoutError(`Lock obtain timed out: ${this}: ${failure?.message}`, {
      cause: failure,
    });
  }

  override toString(): string {
    return `SleepingLockWrapper(${this.in})`;
  }
}
