import type { EventEmitter } from 'node:events';
import type { LockLostError } from '../core/errors.js';
import type { Mastership } from './mastership.js';

/** ActiveMQ's defaults: acquire interval (`lockAcquireSleepInterval`) 10 s, `failIfLocked` false. */
export const DEFAULT_ACQUIRE_INTERVAL_MS = 10_000;

export interface LockerOptions {
  /** Shown in messages and logs; defaults per locker (the directory, the holder id, …). */
  name?: string | undefined;
  /**
   * Milliseconds between acquisition attempts while another process is master (10 000).
   * ActiveMQ's name, `lockAcquireSleepInterval`, is accepted as an alias.
   */
  acquireIntervalMs?: number | undefined;
  /** Reject `start()` at once when the lock is held elsewhere, instead of waiting (false). */
  failIfLocked?: boolean | undefined;
}

export interface LockerStartOptions {
  /** Gives up waiting: `start()` rejects with an `AbortedError`, nothing stays locked. */
  signal?: AbortSignal | undefined;
  /**
   * The keep-alive period the caller (the supervisor) will use once master, in ms. Lockers
   * that pause after a wait-then-acquire (SharedFileLocker, AMQ-4705) pause this long so the
   * previous master's keep-alive has run before this one acts; a lease locker refuses a
   * period its lease cannot survive. Default 0: no pause. ActiveMQ's name,
   * `lockKeepAlivePeriod`, is accepted as an alias (ActiveMQ reads it from the `Lockable`).
   */
  keepAlivePeriodMs?: number | undefined;
}

/**
 * ActiveMQ's `Locker`: one master per shared store.
 *
 * - `start()` resolves only once the lock is held, with the {@link Mastership} handle (its
 *   `signal` aborts when the mastership is lost): waiting is what makes a process a slave. It is idempotent (a second call shares the first). With `failIfLocked`
 *   it rejects at once with a `LockObtainFailedError`; a `stop()` (or the signal) during the
 *   wait rejects it with an `AbortedError`: "attempt to obtain lock aborted due to shutdown" for
 *   a stop, "… timed out …" or "… aborted by the caller's start signal: <reason>" for the signal.
 * - `keepAlive()` confirms mastership: `true` still master, `false` lost (stop being master
 *   now), a rejection means "unknown" (the I/O error policy decides).
 * - `stop()` releases; calling it before `start()` or twice is harmless.
 * - `token` is the fencing token of the current mastership, strictly increasing across
 *   takeovers; `undefined` while not master.
 * - `lost` fires (once per mastership) when the locker finds out it is no longer master: a
 *   keep-alive returned false (fired before `keepAlive()` resolves), or between keep-alives
 *   (a lease's self-fencing deadline passed, the connection holding the row lock died, the
 *   lock file was deleted or replaced).
 */
export interface Locker
  extends Pick<EventEmitter<{ lost: [LockLostError] }>, 'on' | 'once' | 'off'> {
  readonly name: string;
  readonly acquireIntervalMs: number;
  readonly failIfLocked: boolean;
  /** Suggested keep-alive period when the supervisor is not told one (ActiveMQ: 0 for files, 30 000 for JDBC). */
  readonly defaultKeepAlivePeriodMs: number;
  readonly token: number | undefined;
  /**
   * Until when this mastership is certain, in the locker's `clock.monotonic()` ms: no other
   * process can become master before then, even if this process stops running (SIGSTOP, a
   * stalled event loop). Confirmations (the acquisition, a `keepAlive()` that returned true)
   * move it forward; `undefined` while not master; `Infinity` when only a loss the locker
   * reports can end the mastership (no deadline is known). Whatever must stop before anyone
   * else can be master (the command of `locksmith elect`, through its watchdog process) uses
   * it as its deadline.
   */
  readonly validUntil: number | undefined;
  /** Resolves, once master, with the {@link Mastership} handle of this mastership. */
  start(options?: LockerStartOptions): Promise<Mastership>;
  keepAlive(): Promise<boolean>;
  stop(): Promise<void>;
}
