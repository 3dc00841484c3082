import { EventEmitter } from 'node:events';
import { AlreadyClosedError, LockLostError } from './errors.js';

/**
 * What every acquisition in locksmith returns.
 *
 * - `token` is the fencing token: it strictly increases with every grant of `resource`, so
 *   whatever the lock protects can refuse a write carrying an older one.
 * - `signal` aborts when the handle stops protecting anything: with a {@link LockLostError}
 *   when the lock was lost, with an {@link AlreadyClosedError} after `close()`. Pass it to the
 *   work done under the lock.
 * - `ensureValid()` throws when the lock is no longer ours; `close()` is idempotent.
 */
export interface LockHandle extends AsyncDisposable {
  readonly resource: string;
  readonly token: number;
  readonly signal: AbortSignal;
  readonly closed: boolean;
  ensureValid(): void;
  close(): Promise<void>;
  release(): Promise<void>;
  on(event: 'lost', listener: (reason: LockLostError) => void): this;
  once(event: 'lost', listener: (reason: LockLostError) => void): this;
  off(event: 'lost', listener: (reason: LockLostError) => void): this;
}

const RESOLVED: Promise<void> = Promise.resolve();

interface HandleEvents {
  lost: [LockLostError];
}

/**
 * Shared mechanics of a handle: one close no matter how often or how concurrently it is
 * called, the abort signal, and the `lost` event. Subclasses implement `closeOnce()` and
 * `checkValid()`; they report loss with `markLost()`.
 */
export abstract class LockHandleBase extends EventEmitter<HandleEvents> implements LockHandle {
  readonly resource: string;
  readonly token: number;
  // Created on first use of `signal`: most handles are never asked for it, and building the
  // abort reason (an Error with a stack) on every release would dominate a fast lock's cost.
  #controller: AbortController | undefined;
  #lostReason: LockLostError | undefined;
  #closing: Promise<void> | undefined;
  #closed = false;

  constructor(resource: string, token: number) {
    super();
    this.resource = resource;
    this.token = token;
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#lostReason !== undefined) this.#controller.abort(this.#lostReason);
      else if (this.#closed) this.#controller.abort(this.#releasedReason());
    }
    return this.#controller.signal;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Throws when the lock is no longer held; a detected loss also fires `lost`. */
  ensureValid(): void {
    if (this.#closed) {
      throw new AlreadyClosedError(`Lock instance already released: ${this.resource}`);
    }
    this.checkValid();
  }

  /**
   * Releases the lock. Concurrent calls share one release; once it has finished (even with an
   * error, after which the handle is closed anyway) further calls resolve at once.
   */
  close(): Promise<void> {
    if (this.#closed) return RESOLVED;
    this.#closing ??= this.#doClose();
    return this.#closing;
  }

  release(): Promise<void> {
    return this.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** Reports a loss once: aborts `signal` with the reason and emits `lost`. */
  protected markLost(reason: LockLostError): void {
    if (this.#lostReason !== undefined || this.#closed) return;
    this.#lostReason = reason;
    this.#controller?.abort(reason);
    this.emit('lost', reason);
  }

  /** Reports the loss that `err` describes (see {@link markLost}), then throws `err`. */
  protected fail(err: Error): never {
    this.markLost(new LockLostError(`Lock lost: ${this.resource}: ${err.message}`, { cause: err }));
    throw err;
  }

  /** Marks the handle closed without running `closeOnce` (for handles closed by a wrapper). */
  protected markClosed(): void {
    this.#closed = true;
    if (this.#controller !== undefined && !this.#controller.signal.aborted) {
      this.#controller.abort(this.#releasedReason());
    }
  }

  #releasedReason(): AlreadyClosedError {
    return new AlreadyClosedError(`Lock released: ${this.resource}`);
  }

  /** Runs `closeOnce`; a synchronous one costs no extra promise (it matters for fast locks). */
  #doClose(): Promise<void> {
    let pending: Promise<void> | void;
    try {
      pending = this.closeOnce();
    } catch (err) {
      this.markClosed();
      return Promise.reject(err);
    }
    if (pending === undefined) {
      this.markClosed();
      return RESOLVED;
    }
    return pending.finally(() => this.markClosed());
  }

  /** Validity checks beyond "not closed"; throw to report the lock is no longer ours. */
  protected abstract checkValid(): void;
  /** Releases the underlying lock; runs at most once. May complete synchronously. */
  protected abstract closeOnce(): Promise<void> | void;
}
