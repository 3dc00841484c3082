import { EventEmitter } from 'node:events';
import type { Clock } from '../core/clock.js';
import { AbortedError, LockLostError } from '../core/errors.js';
import {
  booleanOption,
  clockOption,
  durationOption,
  type OptionValues,
  readOptions,
  type SpecOf,
  signalOption,
  stringOption,
  withAliases,
  withDefault,
} from '../core/option-spec.js';
import {
  DEFAULT_ACQUIRE_INTERVAL_MS,
  type Locker,
  type LockerOptions,
  type LockerStartOptions,
} from './locker.js';
import { LOGGER_OPTION, type StoreLogger } from './logger.js';
import { Mastership, markEnded, markUnconfirmed } from './mastership.js';

export interface AbstractLockerOptions extends LockerOptions {
  /** Drives the acquire sleep (and any other wait of the locker); default the system clock. */
  clock?: Clock | undefined;
  /** Default {@link silentLogger}. */
  logger?: StoreLogger | undefined;
}

/** The options every locker takes, declared once (see `core/option-spec.ts`). */
export const ABSTRACT_LOCKER_SPEC = {
  name: { ...stringOption(), defaultText: 'per locker: its directory, or its table' },
  acquireIntervalMs: withAliases(
    withDefault(durationOption(), DEFAULT_ACQUIRE_INTERVAL_MS),
    'lockAcquireSleepInterval',
  ),
  failIfLocked: withDefault(booleanOption(), false),
  clock: clockOption(),
  logger: LOGGER_OPTION,
} as const satisfies SpecOf<AbstractLockerOptions>;

/**
 * The checked options an {@link AbstractLocker} is constructed with (from {@link readOptions}
 * over a spec that extends {@link ABSTRACT_LOCKER_SPEC}); an absent one takes the spec's default.
 */
export type AbstractLockerValues = Partial<OptionValues<typeof ABSTRACT_LOCKER_SPEC>>;

const DEFAULTS = readOptions({}, 'Locker options', ABSTRACT_LOCKER_SPEC);

/** The options of `start()`. */
const START_SPEC = {
  signal: signalOption(),
  keepAlivePeriodMs: withAliases(withDefault(durationOption(), 0), 'lockKeepAlivePeriod'),
} as const satisfies SpecOf<LockerStartOptions>;

/** What {@link AbstractLocker.doStart} gets. */
export interface AcquireContext {
  /** Aborts on `stop()` or when the caller's start signal aborts: give up, hold nothing. */
  signal: AbortSignal;
  /** The supervisor's keep-alive period (0 when not told): the AMQ-4705 post-acquire pause. */
  keepAlivePeriodMs: number;
}

/** ActiveMQ's message when a stop ends an acquisition; kept word for word. */
export const ACQUIRE_ABORTED_MESSAGE = 'attempt to obtain lock aborted due to shutdown';

interface Run {
  readonly controller: AbortController;
  promise: Promise<Mastership>;
  /** Set once the lock is held. */
  token: number | undefined;
  /** The handle `start()` resolved with, once the lock is held. */
  mastership: Mastership | undefined;
  /** Sticky keep-alive verdict of this mastership (ActiveMQ's LockFile: once false, false). */
  alive: boolean;
  lostEmitted: boolean;
}

/**
 * ActiveMQ's `AbstractLocker` (on `ServiceSupport`): the life cycle every store locker shares,
 * so subclasses only implement how to acquire, check and release.
 *
 * - Options are declared in {@link ABSTRACT_LOCKER_SPEC} (each subclass adds its own) and
 *   checked by the subclass before it calls `super`: an unknown name or a value out of its
 *   domain throws an {@link InvalidArgumentError}, so a misspelt option never runs with a
 *   default the caller did not choose.
 * - `start()` is guarded: while a start is running or the lock is held, further calls share
 *   the same promise. A failed start (not aborted) leaves the locker startable again.
 * - `stop()` before `start()` does nothing. During acquisition it aborts the subclass's wait
 *   and `start()` rejects with an {@link AbortedError} "attempt to obtain lock aborted due to
 *   shutdown"; nothing stays locked. The caller's start signal ends it the same way, with a
 *   message from the signal's reason ("… timed out …" for `AbortSignal.timeout()`, "… aborted
 *   by the caller's start signal: <reason>" otherwise). After a stop the locker can be started again (the
 *   supervisor does that after a demotion).
 * - `keepAlive()` is false while not master and sticky per mastership: once false, it stays
 *   false until the next `start()`. Rejections pass through ("unknown").
 * - Subclasses report loss noticed on their own with {@link markLost}: the `lost` event
 *   fires at most once per mastership.
 *
 * Subclass contract: `doStart` resolves with the fencing token once the lock is held, or
 * rejects holding nothing (aborted, failIfLocked, I/O error); `doStop` releases whatever is
 * held and is harmless when nothing is; `doKeepAlive` checks the held lock.
 */
export abstract class AbstractLocker
  extends EventEmitter<{ lost: [LockLostError] }>
  implements Locker
{
  readonly name: string;
  readonly acquireIntervalMs: number;
  readonly failIfLocked: boolean;
  abstract readonly defaultKeepAlivePeriodMs: number;
  protected readonly clock: Clock;
  protected readonly logger: StoreLogger;

  #run: Run | undefined;
  #stopping: Promise<void> | undefined;

  constructor(values: AbstractLockerValues, defaultName: string) {
    super();
    this.name = values.name ?? defaultName;
    this.acquireIntervalMs = values.acquireIntervalMs ?? DEFAULTS.acquireIntervalMs;
    this.failIfLocked = values.failIfLocked ?? DEFAULTS.failIfLocked;
    this.clock = values.clock ?? DEFAULTS.clock;
    this.logger = values.logger ?? DEFAULTS.logger;
  }

  /**
   * The fencing token of the current mastership; `undefined` while not master, which includes
   * once the mastership was found lost (before `stop()`), so that nothing reads a lost
   * mastership's token as current.
   */
  get token(): number | undefined {
    const run = this.#run;
    return run === undefined || !run.alive ? undefined : run.token;
  }

  start(options?: LockerStartOptions): Promise<Mastership> {
    let period: number;
    let signal: AbortSignal | undefined;
    try {
      ({ keepAlivePeriodMs: period, signal } = readOptions(options, 'start options', START_SPEC));
      this.checkKeepAlivePeriod(period);
    } catch (err) {
      return Promise.reject(err);
    }
    if (this.#run !== undefined) return this.#run.promise;
    const stopping = this.#stopping;
    if (stopping !== undefined) return stopping.then(() => this.start(options));
    const run: Run = {
      controller: new AbortController(),
      promise: Promise.resolve() as unknown as Promise<Mastership>,
      token: undefined,
      mastership: undefined,
      alive: true,
      lostEmitted: false,
    };
    this.#run = run;
    run.promise = this.#acquire(run, period, signal);
    return run.promise;
  }

  async #acquire(run: Run, period: number, external: AbortSignal | undefined): Promise<Mastership> {
    const { controller } = run;
    const onAbort = () =>
      controller.abort(
        new AbortedError(this.#callerAbortMessage(external?.reason), { cause: external?.reason }),
      );
    if (external?.aborted) onAbort();
    else external?.addEventListener('abort', onAbort, { once: true });
    try {
      if (controller.signal.aborted) throw controller.signal.reason;
      const token = await this.doStart({ signal: controller.signal, keepAlivePeriodMs: period });
      if (controller.signal.aborted) {
        // Acquired just as the stop came: give it back before reporting the abort.
        await this.doStop();
        throw controller.signal.reason;
      }
      run.token = token;
      run.mastership = new Mastership(this, {
        token,
        clock: this.clock,
        // Closing the handle of a mastership that has ended leaves a later one alone.
        stop: () => (this.#run === run ? this.stop() : Promise.resolve()),
      });
      return run.mastership;
    } catch (err) {
      if (this.#run === run && this.#stopping === undefined) this.#run = undefined;
      if (controller.signal.aborted) {
        const reason: unknown = controller.signal.reason;
        // Our controller is aborted only with an AbortedError (stop() or the caller's signal),
        // whose message already says which of the two it was.
        if (reason instanceof AbortedError) throw reason;
        throw new AbortedError(this.#abortedMessage(), { cause: reason ?? err });
      }
      throw err;
    } finally {
      external?.removeEventListener('abort', onAbort);
    }
  }

  #abortedMessage(): string {
    return `${ACQUIRE_ABORTED_MESSAGE}: ${this.name}`;
  }

  /**
   * The message when the caller's start signal ends the wait: not ActiveMQ's "shutdown" (no
   * stop() happened), but what the signal's reason says, a timeout named as such.
   */
  #callerAbortMessage(reason: unknown): string {
    const what = `attempt to obtain lock ${this.name}`;
    if (reason instanceof Error && reason.name === 'TimeoutError') {
      return `${what} timed out (the start signal's timeout): ${reason.message}`;
    }
    const why =
      reason instanceof Error ? reason.message : reason === undefined ? '' : String(reason);
    return `${what} aborted by the caller's start signal${why === '' ? '' : `: ${why}`}`;
  }

  /** Releases the lock, or ends a running acquisition; shared by concurrent calls. */
  stop(): Promise<void> {
    if (this.#stopping !== undefined) return this.#stopping;
    const run = this.#run;
    if (run === undefined) return Promise.resolve();
    this.#stopping = (async () => {
      try {
        run.controller.abort(new AbortedError(this.#abortedMessage()));
        await run.promise.catch(() => {
          // start()'s caller hears about it; here we only wait for the attempt to end.
        });
        await this.doStop();
      } finally {
        run.token = undefined;
        run.alive = false;
        if (run.mastership !== undefined) markEnded(run.mastership);
        if (this.#run === run) this.#run = undefined;
        this.#stopping = undefined;
      }
    })();
    return this.#stopping;
  }

  /**
   * True while master; false (sticky for this mastership) once the lock is found lost. A
   * false answer for a held lock fires `lost` first (code `LOCK_LOST`, unless the subclass
   * reported a more precise loss already); a rejection ("unknown") ends the Mastership handle
   * with `LOCK_UNCONFIRMED` but not the locker (the caller's I/O error policy decides).
   */
  async keepAlive(): Promise<boolean> {
    const run = this.#run;
    if (run === undefined || run.token === undefined || !run.alive) return false;
    let ok: boolean;
    try {
      ok = await this.doKeepAlive();
    } catch (err) {
      if (this.#run === run && run.mastership !== undefined && this.#stopping === undefined) {
        markUnconfirmed(run.mastership, err);
      }
      throw err;
    }
    if (!ok && this.#run === run && run.token !== undefined) {
      this.markLost(
        new LockLostError(`Keep-alive of ${this.name} returned false: no longer the lock owner`),
      );
    }
    if (!ok) run.alive = false;
    return ok && run.alive;
  }

  /** See {@link Locker.validUntil}; lockers with a deadline override this. */
  get validUntil(): number | undefined {
    return this.held ? Number.POSITIVE_INFINITY : undefined;
  }

  /** Whether the lock is held right now (start resolved, no stop yet). */
  protected get held(): boolean {
    return this.#run?.token !== undefined;
  }

  /**
   * Reports a loss the subclass noticed on its own: keepAlive turns false and `lost` fires,
   * once per mastership. Ignored while not master.
   */
  protected markLost(reason: LockLostError): void {
    const run = this.#run;
    if (run === undefined || run.token === undefined || run.lostEmitted) return;
    // A stop in progress gives the lock up anyway; what it tears down is not a loss.
    if (this.#stopping !== undefined) return;
    run.lostEmitted = true;
    run.alive = false;
    this.emit('lost', reason);
  }

  /**
   * Refuses (an InvalidArgumentError) a keep-alive period this locker cannot keep its lock
   * with; `start()` rejects with it before anything is taken. Every period is fine by default.
   */
  protected checkKeepAlivePeriod(_periodMs: number): void {}

  /** Acquires (waiting as the subclass sees fit) and resolves with the fencing token. */
  protected abstract doStart(context: AcquireContext): Promise<number>;
  /** Releases whatever is held; harmless when nothing is. Never deletes shared state. */
  protected abstract doStop(): Promise<void>;
  /** Checks the held lock: true still ours, false lost, rejection unknown. */
  protected abstract doKeepAlive(): Promise<boolean>;
}
