import { EventEmitter } from 'node:events';
import { AlreadyClosedError, type LockLossCode, LockLostError } from './errors.js';

/**
 * What every acquisition in locksmith returns — a directory `Lock`, a store `Mastership`, a
 * `RowLock` — with the same members and the same loss semantics:
 *
 * - `token` is the fencing token: it strictly increases with every grant of `resource`, so
 *   whatever the lock protects can refuse a write carrying an older one.
 * - `signal` aborts **by itself** when the handle stops protecting anything: with a
 *   {@link LockLostError} when the lock was lost (its `code` says why: `LOCK_LOST`,
 *   `LEASE_EXPIRED` or `LOCK_UNCONFIRMED`), with an {@link AlreadyClosedError} after
 *   `close()`. Pass it to the work done under the lock.
 * - `lost` fires once, with the same reason, when the loss is noticed (by the family's own
 *   background check, or by `ensureValid()`); `lostReason` keeps it.
 * - `ensureValid()` throws when the lock is no longer ours: once lost, always lost.
 * - `close()` releases exactly once, however often or concurrently it is called;
 *   `[Symbol.asyncDispose]` is `close()`, for `await using`.
 */
/**
 * A handle's `signal`: an `AbortSignal` whose `reason` says why it aborted — a
 * {@link LockLostError} (with its `code`) on a loss, an {@link AlreadyClosedError}
 * (`code === 'ALREADY_CLOSED'`) after a normal release. To tell the two apart in one line:
 * `signal.reason?.code !== 'ALREADY_CLOSED'` means lost (or read the handle's `lostReason`).
 */
export interface LockSignal extends AbortSignal {
  readonly reason: LockLostError | AlreadyClosedError | undefined;
}

export interface LockHandle extends AsyncDisposable {
  readonly resource: string;
  readonly token: number;
  readonly signal: LockSignal;
  readonly closed: boolean;
  /** The loss, once one was noticed; `undefined` while held or after a plain `close()`. */
  readonly lostReason: LockLostError | undefined;
  ensureValid(): void;
  close(): Promise<void>;
  release(): Promise<void>;
  on(event: 'lost', listener: (reason: LockLostError) => void): this;
  once(event: 'lost', listener: (reason: LockLostError) => void): this;
  off(event: 'lost', listener: (reason: LockLostError) => void): this;
}

const RESOLVED: Promise<void> = Promise.resolve();

// A handle's phase. Its helpers are plain (TypeScript-private) methods, not `#` ones: a class
// with `#` methods gives every instance a brand field (8 B a handle).
const OPEN = 0;
const OBSERVED = 1;
const CLOSED = 2;

interface HandleEvents {
  lost: [LockLostError];
}

// `resource` is declared here, not as a field of the class: a subclass may then define it as a
// getter (see the constructor).
export interface LockHandleBase {
  /** What is locked, as messages and status pages name it. */
  readonly resource: string;
}

/**
 * Shared mechanics of a handle: one close no matter how often or how concurrently it is
 * called, the abort signal, and the `lost` event. Subclasses implement `closeOnce()` and
 * `checkValid()`; they report loss with `markLost()`.
 */
// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: see the interface above
export abstract class LockHandleBase extends EventEmitter<HandleEvents> implements LockHandle {
  readonly token: number;
  // Created on first use of `signal`: most handles are never asked for it, and building the
  // abort reason (an Error with a stack) on every release would dominate a fast lock's cost.
  #controller: AbortController | undefined;
  #lostReason: LockLostError | undefined;
  // What ensureValid() throws after a loss, when a family's contract names a more specific
  // error than the LockLostError (Lucene's AlreadyClosedError for an invalidated lock).
  #thrownOnLoss: Error | undefined;
  #closing: Promise<void> | undefined;
  /** OPEN, OBSERVED or CLOSED: one field where two flags cost a field each on every handle. */
  #phase = OPEN;

  static {
    // Adding a `lost` listener, by any of EventEmitter's methods, means someone is observing.
    // Wrapping the adders costs nothing per handle, where a `newListener` listener would be
    // registered on every obtain.
    for (const method of [
      'on',
      'addListener',
      'once',
      'prependListener',
      'prependOnceListener',
    ] as const) {
      const add = EventEmitter.prototype[method];
      Object.defineProperty(LockHandleBase.prototype, method, {
        configurable: true,
        writable: true,
        value: function (this: LockHandleBase, event: string | symbol, listener: never) {
          add.call(this, event, listener);
          if (event === 'lost') this.observe();
          return this;
        },
      });
    }
  }

  /**
   * `resource` undefined: the subclass defines a `resource` getter instead (a server holding
   * many row locks makes a row lock's when asked, rather than keep a string and a field for
   * each).
   */
  constructor(resource: string | undefined, token: number) {
    super();
    // EventEmitter makes an empty listener table per instance, an object in dictionary mode
    // (about 190 B of heap); most handles never get a listener. Node's EventEmitter makes the
    // table at the first listener when `_events` is undefined (as for an emitter whose
    // constructor never ran), and every method of it reads an undefined table as empty.
    (this as unknown as { _events: undefined })._events = undefined;
    if (resource !== undefined) (this as { resource: string }).resource = resource;
    this.token = token;
  }

  get signal(): LockSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#lostReason !== undefined) this.#controller.abort(this.#lostReason);
      else if (this.#phase === CLOSED) this.#controller.abort(this.releasedReason());
      else this.observe();
    }
    return this.#controller.signal as LockSignal;
  }

  get closed(): boolean {
    return this.#phase === CLOSED;
  }

  get lostReason(): LockLostError | undefined {
    return this.#lostReason;
  }

  /** Throws when the lock is no longer held; a detected loss also fires `lost`. */
  ensureValid(): void {
    if (this.#phase === CLOSED) {
      throw new AlreadyClosedError(`Lock instance already released: ${this.resource}`);
    }
    if (this.#lostReason !== undefined) throw this.#thrownOnLoss ?? this.#lostReason;
    this.checkValid();
  }

  /**
   * Releases the lock. Concurrent calls share one release; once it has finished (even with an
   * error, after which the handle is closed anyway) further calls resolve at once.
   */
  close(): Promise<void> {
    if (this.#phase === CLOSED) return RESOLVED;
    this.#closing ??= this.doClose();
    return this.#closing;
  }

  release(): Promise<void> {
    return this.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * Reports a loss once: aborts `signal` with the reason and emits `lost`. Later calls, and
   * calls after `close()`, do nothing. A listener that throws does not stop the others nor
   * reach the caller: it is reported as an uncaught exception on a later tick, as a throwing
   * `abort` listener is.
   */
  protected markLost(reason: LockLostError, thrownByEnsureValid?: Error): void {
    if (this.#lostReason !== undefined || this.#phase === CLOSED) return;
    this.#lostReason = reason;
    this.#thrownOnLoss = thrownByEnsureValid;
    this.#controller?.abort(reason);
    for (const listener of this.listeners('lost') as ((r: LockLostError) => void)[]) {
      try {
        listener.call(this, reason);
      } catch (err) {
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }

  /**
   * Reports the loss that `err` describes (see {@link markLost}), then throws `err`; later
   * `ensureValid()` calls throw `err` again.
   */
  protected fail(err: Error, code: LockLossCode = 'LOCK_LOST'): never {
    this.markLost(
      new LockLostError(`Lock lost: ${this.resource}: ${err.message}`, { cause: err, code }),
      err,
    );
    throw err;
  }

  /** Marks the handle closed without running `closeOnce` (for handles closed by a wrapper). */
  protected markClosed(): void {
    this.#phase = CLOSED;
    if (this.#controller !== undefined && !this.#controller.signal.aborted) {
      this.#controller.abort(this.releasedReason());
    }
  }

  private releasedReason(): AlreadyClosedError {
    return new AlreadyClosedError(`Lock released: ${this.resource}`);
  }

  /** Runs `closeOnce`; a synchronous one costs no extra promise (it matters for fast locks). */
  private doClose(): Promise<void> {
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

  private observe(): void {
    if (this.#phase !== OPEN || this.#closing !== undefined || this.#lostReason !== undefined) {
      return;
    }
    this.#phase = OBSERVED;
    this.observed();
  }

  /**
   * Called once, the first time someone could notice a loss while the handle is held: the
   * first read of `signal` or the first `lost` listener. A family that detects loss in the
   * background starts that detection here (and stops it in `closeOnce`), so a handle nobody
   * watches costs nothing. The default does nothing.
   */
  protected observed(): void {}

  /** Validity checks beyond "not closed"; throw to report the lock is no longer ours. */
  protected abstract checkValid(): void;
  /** Releases the underlying lock; runs at most once. May complete synchronously. */
  protected abstract closeOnce(): Promise<void> | void;
}
