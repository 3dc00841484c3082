import { EventEmitter } from 'node:events';
import type { Clock } from '../core/clock.js';
import {
  AbortedError,
  AlreadyClosedError,
  InvalidArgumentError,
  LockLostError,
} from '../core/errors.js';
import {
  booleanOption,
  clockOption,
  customOption,
  durationOption,
  readOptions,
  type SpecOf,
  withAliases,
  withDefault,
} from '../core/option-spec.js';
import { hasMethods } from '../core/options.js';
import { describe } from './describe-error.js';
import type { Locker } from './locker.js';
import { LOGGER_OPTION, type StoreLogger } from './logger.js';
import type { Service } from './service.js';

export interface SupervisorOptions {
  /** Required unless `useLock` is false (then ignored, as ActiveMQ ignores it). */
  locker?: Locker | undefined;
  service: Service;
  /** false: no locker, no timer; the service starts at once with token 0 (true). */
  useLock?: boolean | undefined;
  /**
   * Keep-alive period in ms; 0 runs none (default `locker.defaultKeepAlivePeriodMs`). ActiveMQ's
   * name, `lockKeepAlivePeriod`, is accepted as an alias.
   */
  keepAlivePeriodMs?: number | undefined;
  /** A throwing keep-alive demotes only when true (false, AMQ-7473). */
  stopOnError?: boolean | undefined;
  /** After a demotion, go back to waiting as a slave (true, AMQ-4526). */
  restartAllowed?: boolean | undefined;
  clock?: Clock | undefined;
  logger?: StoreLogger | undefined;
}

export const SUPERVISOR_SPEC = {
  locker: customOption<Locker>('a Locker (start, stop, keepAlive, on)', (value) => value as Locker),
  service: customOption<Service>('a Service (start, stop)', (value) => value as Service),
  useLock: withDefault(booleanOption(), true),
  keepAlivePeriodMs: withAliases(
    { ...durationOption(), defaultText: "the locker's defaultKeepAlivePeriodMs" },
    'lockKeepAlivePeriod',
  ),
  stopOnError: withDefault(booleanOption(), false),
  restartAllowed: withDefault(booleanOption(), true),
  clock: clockOption(),
  logger: LOGGER_OPTION,
} as const satisfies SpecOf<SupervisorOptions>;

/** What every supervisor event carries. */
export interface SupervisorEvent {
  /** Why: the error or loss behind the event, when there is one. */
  reason?: unknown;
  /** The fencing token of the mastership concerned, when there is one. */
  token?: number;
}

/** What `confirmed` carries: when and until when this process is certainly master. */
export interface ConfirmedEvent {
  token: number;
  /**
   * The locker's {@link Locker.validUntil} just after the confirmation (its clock's
   * `monotonic()` ms): no other process can be master before then. `Infinity` when the
   * locker knows no deadline (only a loss it reports ends the mastership).
   */
  validUntil: number;
  /**
   * The supervisor clock's `monotonic()` when the confirmation began (the acquisition's end,
   * or the call of the keep-alive that returned true): the lock was held at some instant
   * after this. A caller that derives its own deadline counts from here.
   */
  at: number;
}

export interface SupervisorEvents {
  /** Waiting for the lock (a slave). */
  waiting: [SupervisorEvent];
  /** The lock is held and the service started. */
  master: [SupervisorEvent];
  /**
   * Mastership was confirmed: once the lock is acquired (before the service starts) and after
   * each keep-alive that returned true. Whatever must stop before anyone else can become
   * master (elect's command watchdog) takes its deadline from here.
   */
  confirmed: [ConfirmedEvent];
  /** A keep-alive returned false or threw (whether or not that demotes). */
  'keepalive-failed': [SupervisorEvent];
  /** Mastership ended by loss: the service was stopped and the lock given back. */
  demoted: [SupervisorEvent];
  /** The supervisor stopped for good (by `stop()`, or a failure it cannot retry). */
  stopped: [SupervisorEvent];
}

export type SupervisorState = 'idle' | 'waiting' | 'master' | 'stopping' | 'stopped';

interface Mastership {
  readonly token: number;
  readonly controller: AbortController;
  /** Resolves with the first reason mastership ended. */
  readonly ended: Promise<unknown>;
  end(reason: unknown): void;
}

/**
 * ActiveMQ's `Lockable`/`LockableServiceSupport` and the broker's role, for any
 * {@link Service}: only a master runs the service.
 *
 * - Order: `locker.start()` (while it waits this is a slave, and nothing of the service is
 *   started), then `service.start({ signal, token })`, then the keep-alive timer: a fixed
 *   rate of `keepAlivePeriodMs`, first run one period after mastership (0 runs none).
 * - Loss: a keep-alive returning false, the locker's `lost` event, or (only with
 *   `stopOnError`) a throwing keep-alive ends the mastership exactly once: the service's
 *   signal aborts at once with a {@link LockLostError}, `service.stop()` is awaited, the
 *   locker is stopped, `demoted` is emitted; then, if `restartAllowed`, the supervisor waits
 *   as a slave again, otherwise it stops. A throwing keep-alive without `stopOnError` emits
 *   `keepalive-failed`, logs a WARN and the timer keeps ticking.
 * - `start()` is idempotent and resolves once this process is master for the first time; it
 *   rejects if the supervisor is stopped first (an {@link AbortedError}) or the locker or the
 *   service fails to start (that error; the supervisor is then stopped).
 * - `stop()` is idempotent: it ends any wait or mastership, stops the service and the
 *   locker, and resolves once no timer or handle of the supervisor remains.
 *
 * Nothing is ever thrown from a timer: every failure becomes an event.
 */
export class Supervisor extends EventEmitter<SupervisorEvents> {
  readonly locker: Locker | undefined;
  readonly service: Service;
  readonly useLock: boolean;
  readonly keepAlivePeriodMs: number;
  readonly stopOnError: boolean;
  readonly restartAllowed: boolean;
  readonly #clock: Clock;
  readonly #logger: StoreLogger;
  readonly #stopController = new AbortController();
  #state: SupervisorState = 'idle';
  #mastership: Mastership | undefined;
  #starting: Promise<void> | undefined;
  #loop: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;

  constructor(options: SupervisorOptions) {
    super();
    const o = readOptions(options, 'Supervisor options', SUPERVISOR_SPEC);
    const useLock = o.useLock;
    const service = o.service;
    if (!hasMethods(service, 'start', 'stop')) {
      throw new InvalidArgumentError('service must have start() and stop() methods');
    }
    let locker: Locker | undefined;
    if (useLock) {
      locker = o.locker;
      if (!hasMethods(locker, 'start', 'stop', 'keepAlive', 'on')) {
        throw new InvalidArgumentError(
          'locker must be a Locker (start, stop, keepAlive, on) when useLock is true',
        );
      }
    }
    const period = o.keepAlivePeriodMs ?? locker?.defaultKeepAlivePeriodMs ?? 0;
    this.locker = locker;
    this.service = service as Service;
    this.useLock = useLock;
    this.keepAlivePeriodMs = useLock ? period : 0;
    this.stopOnError = o.stopOnError;
    this.restartAllowed = o.restartAllowed;
    this.#clock = o.clock;
    this.#logger = o.logger;
  }

  get state(): SupervisorState {
    return this.#state;
  }

  /** The fencing token of the current mastership; `undefined` while not master. */
  get token(): number | undefined {
    return this.#mastership?.token;
  }

  #name(): string {
    return this.locker?.name ?? 'service without lock';
  }

  start(): Promise<void> {
    if (this.#starting !== undefined) return this.#starting;
    if (this.#stopController.signal.aborted) {
      return Promise.reject(new AlreadyStoppedError(this.#name()));
    }
    let resolveFirst: () => void = () => {};
    let rejectFirst: (err: unknown) => void = () => {};
    this.#starting = new Promise<void>((resolve, reject) => {
      resolveFirst = resolve;
      rejectFirst = reject;
    });
    this.#loop = this.#run(resolveFirst, rejectFirst);
    return this.#starting;
  }

  /** The whole life: wait, serve, demote, and again while allowed. Never rejects. */
  async #run(resolveFirst: () => void, rejectFirst: (err: unknown) => void): Promise<void> {
    const stopSignal = this.#stopController.signal;
    let failure: unknown;
    try {
      for (;;) {
        if (stopSignal.aborted) break;
        let token = 0;
        if (this.locker !== undefined) {
          this.#state = 'waiting';
          this.#emit('waiting', {});
          let acquiredAt = 0;
          try {
            // The handle's token, not the locker's property: the grant this mastership is.
            // Loss is taken from the locker's `lost` event (below), not the handle's signal,
            // since a keep-alive that throws ends the handle but is this supervisor's
            // ioErrorPolicy to judge.
            ({ token } = await this.locker.start({
              signal: stopSignal,
              keepAlivePeriodMs: this.keepAlivePeriodMs,
            }));
            acquiredAt = this.#clock.monotonic();
          } catch (err) {
            if (stopSignal.aborted) break;
            failure = err;
            break;
          }
          this.#confirm(this.locker, token, acquiredAt);
        }
        const reason = await this.#serve(token, resolveFirst);
        if (reason instanceof ServiceStartError) {
          failure = reason.cause;
          break;
        }
        if (stopSignal.aborted || !this.restartAllowed || this.locker === undefined) break;
      }
    } catch (err) {
      failure = err;
    }
    this.#state = 'stopping';
    try {
      await this.locker?.stop();
    } catch (err) {
      this.#logger.warn(`Stopping the locker of ${this.#name()} failed: ${describe(err)}`);
    }
    this.#state = 'stopped';
    this.#stopController.abort(failure ?? new AlreadyStoppedError(this.#name()));
    rejectFirst(
      failure ?? new AbortedError(`Supervisor of ${this.#name()} stopped before becoming master`),
    );
    this.#emit('stopped', failure === undefined ? {} : { reason: failure });
  }

  /**
   * One mastership: start the service, keep the lock alive, and tear down on the first end
   * reason. Resolves with that reason (a {@link ServiceStartError} if the service never ran).
   */
  async #serve(token: number, resolveFirst: () => void): Promise<unknown> {
    const controller = new AbortController();
    let end: (reason: unknown) => void = () => {};
    const ended = new Promise<unknown>((resolve) => {
      end = (reason) => {
        if (!controller.signal.aborted) controller.abort(reason);
        resolve(reason);
      };
    });
    const mastership: Mastership = { token, controller, ended, end };
    this.#mastership = mastership;
    const onLost = (reason: LockLostError) => {
      this.#logger.warn(
        `Lock of ${this.#name()} lost: ${describe(reason)}; giving up being a master`,
      );
      end(reason);
    };
    const onStop = () => end(new AbortedError(`Supervisor of ${this.#name()} stopped`));
    this.locker?.on('lost', onLost);
    this.#stopController.signal.addEventListener('abort', onStop, { once: true });
    if (this.#stopController.signal.aborted) onStop();
    let timer: Promise<void> | undefined;
    let startFailure: ServiceStartError | undefined;
    try {
      try {
        await this.service.start({ signal: controller.signal, token });
      } catch (err) {
        startFailure = new ServiceStartError(err);
        end(startFailure);
      }
      if (startFailure === undefined && !controller.signal.aborted) {
        this.#state = 'master';
        this.#logger.info(`${this.#name()} is master (fencing token ${token})`);
        this.#emit('master', { token });
        resolveFirst();
        if (this.locker !== undefined && this.keepAlivePeriodMs > 0) {
          timer = this.#keepAliveLoop(this.locker, mastership);
        }
      }
      const reason = await ended;
      await timer;
      // Also after a failed start: it may have opened something before failing.
      try {
        await this.service.stop();
      } catch (err) {
        this.#logger.warn(`Stopping the service of ${this.#name()} failed: ${describe(err)}`);
      }
      if (this.locker !== undefined && !this.#stopController.signal.aborted) {
        try {
          await this.locker.stop();
        } catch (err) {
          this.#logger.warn(`Stopping the locker of ${this.#name()} failed: ${describe(err)}`);
        }
      }
      if (startFailure !== undefined) return startFailure;
      if (!this.#stopController.signal.aborted || reason instanceof LockLostError) {
        this.#logger.info(`${this.#name()} gave up being a master: ${describe(reason)}`);
        this.#emit('demoted', { reason, token });
      }
      return reason;
    } finally {
      this.locker?.off('lost', onLost);
      this.#stopController.signal.removeEventListener('abort', onStop);
      if (this.#mastership === mastership) this.#mastership = undefined;
    }
  }

  /** Fixed-rate keep-alive, first run one period in; ends with the mastership. Never rejects. */
  async #keepAliveLoop(locker: Locker, mastership: Mastership): Promise<void> {
    const { signal } = mastership.controller;
    const period = this.keepAlivePeriodMs;
    let next = this.#clock.monotonic() + period;
    for (;;) {
      try {
        await this.#clock.sleep(Math.max(0, next - this.#clock.monotonic()), signal);
      } catch {
        return; // the mastership ended
      }
      if (signal.aborted) return;
      // Fixed rate without bursts: a late tick moves the schedule instead of catching up.
      next = Math.max(next + period, this.#clock.monotonic());
      let alive: boolean;
      const at = this.#clock.monotonic();
      try {
        alive = await locker.keepAlive();
      } catch (err) {
        if (signal.aborted) return;
        this.#emit('keepalive-failed', { reason: err, token: mastership.token });
        if (this.stopOnError) {
          mastership.end(
            new LockLostError(`Keep-alive of ${this.#name()} failed and stopOnError is set`, {
              cause: err,
            }),
          );
          return;
        }
        this.#logger.warn(
          `Keep-alive of ${this.#name()} failed, state unknown; still master: ${describe(err)}`,
        );
        continue;
      }
      if (signal.aborted) return;
      if (!alive) {
        const reason = new LockLostError(
          `Keep-alive of ${this.#name()} returned false: no longer the lock owner`,
        );
        this.#emit('keepalive-failed', { reason, token: mastership.token });
        mastership.end(reason);
        return;
      }
      this.#confirm(locker, mastership.token, at);
    }
  }

  #confirm(locker: Locker, token: number, at: number): void {
    const validUntil = locker.validUntil;
    // undefined: the locker no longer counts itself master (a loss is on its way).
    if (validUntil === undefined) return;
    this.#emit('confirmed', { token, validUntil, at });
  }

  /**
   * Ends the current mastership as a loss, as a keep-alive returning false would: the
   * service's signal aborts with `reason` (a {@link LockLostError} unless one is given), the
   * service is stopped, the lock given back, `demoted` emitted, and (with `restartAllowed`)
   * the supervisor waits as a slave again. For a caller that learnt of the loss elsewhere (a
   * watchdog that stopped the service at its deadline). Returns false, doing nothing, when
   * this process is not master (waiting, or already ending a mastership).
   */
  demote(reason?: unknown): boolean {
    const mastership = this.#mastership;
    if (mastership === undefined || mastership.controller.signal.aborted) return false;
    mastership.end(
      reason instanceof LockLostError
        ? reason
        : new LockLostError(`Mastership of ${this.#name()} given up by demote()`, {
            cause: reason,
          }),
    );
    return true;
  }

  stop(): Promise<void> {
    if (this.#stopping !== undefined) return this.#stopping;
    this.#stopping = (async () => {
      this.#stopController.abort(new AbortedError(`Supervisor of ${this.#name()} stopped`));
      if (this.#loop === undefined) {
        this.#state = 'stopped';
        this.#emit('stopped', {});
        return;
      }
      // A waiting locker.start() ends on the signal (never stop the locker from here: while
      // master, the service must stop before the lock is given back). The run loop does both.
      await this.#loop;
    })();
    return this.#stopping;
  }

  /** Listeners are user code: one that throws must not break the supervisor's timers. */
  #emit<K extends keyof SupervisorEvents>(event: K, payload: SupervisorEvents[K][0]): void {
    try {
      (this.emit as (e: K, p: SupervisorEvents[K][0]) => boolean)(event, payload);
    } catch (err) {
      this.#logger.warn(`A '${event}' listener of ${this.#name()} threw: ${describe(err)}`);
    }
  }
}

/** Wraps the service's own start failure so the run loop can tell it from a loss. */
class ServiceStartError extends Error {
  constructor(cause: unknown) {
    super('service start failed', { cause });
  }
}

/** `start()` after `stop()`: a supervisor runs once. */
class AlreadyStoppedError extends AlreadyClosedError {
  constructor(name: string) {
    super(`Supervisor of ${name} was stopped`);
  }
}
