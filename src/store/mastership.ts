import type { Clock } from '../core/clock.js';
import { InvalidArgumentError, LockLostError } from '../core/errors.js';
import { LockHandleBase } from '../core/lock-handle.js';
import {
  callbackOption,
  clockOption,
  customOption,
  durationOption,
  readOptions,
  type SpecOf,
  signalOption,
  withAliases,
} from '../core/option-spec.js';
import { checkToken, describeValue, hasMethods } from '../core/options.js';
import { withHandle } from '../core/with-lock.js';
import { describe } from './describe-error.js';
import type { Locker } from './locker.js';

/** How a locker builds the handle of one mastership. */
export interface MastershipOptions {
  /** The locker's fencing token for this mastership (default `locker.token`, else 0). */
  token?: number | undefined;
  /** Ends this mastership: stops the locker (default `locker.stop()`). */
  stop?: (() => Promise<void>) | undefined;
  /** The clock `locker.validUntil` is measured on (default the system clock). */
  clock?: Clock | undefined;
}

const MASTERSHIP_SPEC = {
  token: customOption('a fencing token (a safe integer >= 0)', (value, label) =>
    checkToken(value, label),
  ),
  stop: callbackOption<() => Promise<void>>(),
  clock: clockOption(),
} as const satisfies SpecOf<MastershipOptions>;

// Lets the lockers of this package report what only they see (a keep-alive that could not
// answer, a stop that did not come through the handle) without making it public API.
let reportUnconfirmed: (m: Mastership, cause: unknown) => void;
let reportEnded: (m: Mastership) => void;
let reportLost: (m: Mastership, reason: LockLostError) => void;

/**
 * One mastership of a store {@link Locker}: what `locker.start()` resolves with once this
 * process is master. It is the store's form of the handle every locksmith lock returns (see
 * `LockHandle` in `locksmith/core`):
 *
 * - `token` is the locker's fencing token for this mastership (strictly increasing across
 *   takeovers); `resource` is the locker's name.
 * - `validUntil` is until when the mastership is certain, on the locker's monotonic clock
 *   (`Infinity` when only a reported loss can end it; `undefined` once it ended).
 * - `signal` aborts, and `lost` fires once, the moment the mastership is lost or can no longer
 *   be confirmed, with a `LockLostError` whose `code` says which: `LOCK_LOST` (a keep-alive
 *   returned false, the connection holding the row lock died, the lock file was deleted or
 *   replaced), `LEASE_EXPIRED` (a lease was not renewed in time: self-fenced), or
 *   `LOCK_UNCONFIRMED` (a keep-alive failed, so nobody can tell; the locker itself may go on
 *   as its I/O error policy says, the handle does not). A stop of the locker by other means
 *   ends the handle as a `close()` does (`signal` aborts with an `AlreadyClosedError`).
 * - `ensureValid()` throws once the mastership is over.
 * - `close()` (= `[Symbol.asyncDispose]`) stops the locker, once however often it is called;
 *   it does nothing to a later mastership of the same locker.
 *
 * The handle notices what the locker notices by itself; checking (renewing) runs only where
 * someone calls `locker.keepAlive()`: the Supervisor, or {@link withMastership}.
 */
export class Mastership extends LockHandleBase {
  readonly #locker: Locker;
  readonly #stop: () => Promise<void>;
  readonly #clock: Clock;
  readonly #onLost = (reason: LockLostError) => this.#lose(reason);

  static {
    reportUnconfirmed = (m, cause) => m.#unconfirmed(cause);
    reportEnded = (m) => m.#ended();
    reportLost = (m, reason) => m.#lose(reason);
  }

  constructor(locker: Locker, options?: MastershipOptions) {
    const o = readOptions(options, 'Mastership options', MASTERSHIP_SPEC);
    super(locker.name, o.token ?? locker.token ?? 0);
    this.#locker = locker;
    this.#stop = o.stop ?? (() => locker.stop());
    this.#clock = o.clock;
    locker.on('lost', this.#onLost);
  }

  /** Until when this mastership is certain (the locker's monotonic ms); `undefined` once over. */
  get validUntil(): number | undefined {
    if (this.closed || this.lostReason !== undefined) return undefined;
    if (this.#locker.token !== this.token) return undefined;
    return this.#locker.validUntil;
  }

  protected checkValid(): void {
    if (this.#locker.token !== this.token) {
      this.#lose(
        new LockLostError(`${this.resource} is no longer master (fencing token ${this.token})`),
      );
    } else {
      const until = this.#locker.validUntil;
      if (until !== undefined && this.#clock.monotonic() >= until) {
        this.#lose(
          new LockLostError(
            `Mastership of ${this.resource} is past its validity (fencing token ${this.token})`,
            { code: 'LEASE_EXPIRED' },
          ),
        );
      }
    }
    const lost = this.lostReason;
    if (lost !== undefined) throw lost;
  }

  protected async closeOnce(): Promise<void> {
    this.#locker.off('lost', this.#onLost);
    await this.#stop();
  }

  #lose(reason: LockLostError): void {
    this.#locker.off('lost', this.#onLost);
    this.markLost(reason);
  }

  #unconfirmed(cause: unknown): void {
    this.#lose(
      new LockLostError(
        `Mastership of ${this.resource} cannot be confirmed: ${describe(cause)} (fencing token ${this.token})`,
        { cause, code: 'LOCK_UNCONFIRMED' },
      ),
    );
  }

  #ended(): void {
    this.#locker.off('lost', this.#onLost);
    this.markClosed();
  }

  override toString(): string {
    return `Mastership(${this.resource}, token ${this.token})`;
  }
}

/** For this package's lockers: a keep-alive failed (ownership unknown). */
export function markUnconfirmed(mastership: Mastership, cause: unknown): void {
  reportUnconfirmed(mastership, cause);
}

/** For this package's lockers: the mastership is lost (`reason` says why). */
export function markLost(mastership: Mastership, reason: LockLostError): void {
  reportLost(mastership, reason);
}

/** For this package's lockers: the mastership ended by a stop not made through the handle. */
export function markEnded(mastership: Mastership): void {
  reportEnded(mastership);
}

export interface WithMastershipOptions {
  /** Gives up waiting to become master (`start()` rejects with an `AbortedError`). */
  signal?: AbortSignal | undefined;
  /**
   * How often the lock is confirmed (`locker.keepAlive()`) while `fn` runs, ms; default
   * `locker.defaultKeepAlivePeriodMs`. 0: never (only what the locker notices by itself).
   * ActiveMQ's name, `lockKeepAlivePeriod`, is accepted as an alias.
   */
  keepAlivePeriodMs?: number | undefined;
}

export const WITH_MASTERSHIP_SPEC = {
  signal: signalOption(),
  keepAlivePeriodMs: withAliases(
    { ...durationOption(), defaultText: "the locker's defaultKeepAlivePeriodMs" },
    'lockKeepAlivePeriod',
  ),
} as const satisfies SpecOf<WithMastershipOptions>;

/**
 * Waits until `locker` makes this process master, runs `fn` with the {@link Mastership}, and
 * stops the locker on every exit path: return, throw, or a loss in the middle. While `fn` runs
 * the lock is confirmed every `keepAlivePeriodMs`: a keep-alive that returns false ends the
 * mastership with `LOCK_LOST`, one that fails with `LOCK_UNCONFIRMED`; pass
 * `mastership.signal` to the work and `mastership.token` to whatever it writes.
 *
 * Resolves with `fn`'s result only if the mastership was not lost while `fn` ran; otherwise
 * rejects with the `LockLostError` (the work may have overlapped another master). If `fn`
 * throws, that error wins over a failing stop (kept as its `suppressed` property). Arguments
 * are checked before anything is started ({@link InvalidArgumentError}).
 */
export async function withMastership<T>(
  locker: Locker,
  fn: (mastership: Mastership) => T | PromiseLike<T>,
  options?: WithMastershipOptions,
): Promise<T> {
  if (!hasMethods(locker, 'start', 'keepAlive', 'stop')) {
    throw new InvalidArgumentError(`withMastership needs a Locker, got ${describeValue(locker)}`);
  }
  if (typeof fn !== 'function') {
    throw new InvalidArgumentError(
      `withMastership needs a function to run, got ${describeValue(fn)}`,
    );
  }
  const o = readOptions(options, 'withMastership options', WITH_MASTERSHIP_SPEC);
  const period = o.keepAlivePeriodMs ?? locker.defaultKeepAlivePeriodMs;
  const mastership = await locker.start({ signal: o.signal, keepAlivePeriodMs: period });
  const loop = period > 0 ? keepConfirming(locker, mastership, period) : undefined;
  try {
    return await withHandle(mastership, fn);
  } finally {
    await loop;
  }
}

/** Confirms `mastership` every `period` ms until it ends. Never rejects. */
async function keepConfirming(locker: Locker, mastership: Mastership, period: number) {
  const { signal } = mastership;
  while (!signal.aborted) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, period);
      signal.addEventListener('abort', done, { once: true });
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
    });
    if (signal.aborted) return;
    try {
      if (!(await locker.keepAlive()) && !signal.aborted) {
        // Our lockers have reported it as `lost` already; another Locker may not have.
        markLost(
          mastership,
          new LockLostError(`Keep-alive of ${locker.name} returned false: no longer master`),
        );
      }
    } catch (err) {
      if (!signal.aborted) markUnconfirmed(mastership, err);
    }
  }
}
