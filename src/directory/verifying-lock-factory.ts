import type { Duplex } from 'node:stream';
import {
  InvalidArgumentError,
  type LockLostError,
  LockViolationError,
  ProtocolError,
} from '../core/errors.js';
import { LockHandleBase } from '../core/lock-handle.js';
import type { WakeSource } from '../core/wait.js';
import { ByteChannel, EndOfStreamError } from './byte-channel.js';
import type { Directory } from './directory.js';
import type { Lock } from './lock.js';
import { LockFactory } from './lock-factory.js';

/**
 * Lucene's `VerifyingLockFactory`: wraps a real factory and reports every acquisition and
 * release to a {@link LockVerifyServer}, which fails the run as soon as two holders overlap.
 *
 * - obtain: the real lock is obtained first, then {@link MSG_LOCK_ACQUIRED} is sent and its
 *   echo awaited. close: the real lock's `ensureValid()`, then {@link MSG_LOCK_RELEASED} and
 *   its echo, then the real lock is closed whatever happened. So an acquisition is reported
 *   after it happens and a release before it happens: the server never sees a gap that is
 *   not there.
 * - EOF instead of the echo: {@link LockViolationError} "Lock server died because of locking
 *   error." (the server hangs up on every client once it saw a violation); any other byte:
 *   {@link ProtocolError} "Protocol violation.".
 *
 * Beyond Lucene: a failed report during obtain releases the real lock (Lucene leaks it), a
 * second `close()` sends nothing, and exchanges from concurrent calls are serialised so each
 * echo pairs with its own message. The directory is passed through untouched, so file-system
 * factories still see their `FSDirectory`.
 */
export class VerifyingLockFactory extends LockFactory {
  static readonly MSG_LOCK_RELEASED = 0;
  static readonly MSG_LOCK_ACQUIRED = 1;

  readonly delegate: LockFactory;
  readonly #channel: ByteChannel;
  #exchanges: Promise<unknown> = Promise.resolve();

  /** `connection` is the socket connected to the verify server (after the start signal). */
  constructor(delegate: LockFactory, connection: Duplex | ByteChannel) {
    super();
    if (!(delegate instanceof LockFactory)) {
      throw new InvalidArgumentError(
        `VerifyingLockFactory needs a LockFactory to verify, got ${String(delegate)}`,
      );
    }
    if (
      !(connection instanceof ByteChannel) &&
      typeof (connection as Duplex | undefined)?.write !== 'function'
    ) {
      throw new InvalidArgumentError(
        `VerifyingLockFactory needs a connected stream, got ${String(connection)}`,
      );
    }
    this.delegate = delegate;
    this.#channel = connection instanceof ByteChannel ? connection : ByteChannel.of(connection);
  }

  async obtainLock(directory: Directory, lockName: string): Promise<Lock> {
    const lock = await this.delegate.obtainLock(directory, lockName);
    try {
      await this.verify(VerifyingLockFactory.MSG_LOCK_ACQUIRED);
    } catch (err) {
      await lock.close().catch(() => {
        // The report failed, which is what the caller needs to hear about.
      });
      throw err;
    }
    return new CheckedLock(this, lock);
  }

  override wakeSource(directory: Directory, lockName: string): WakeSource | undefined {
    return this.delegate.wakeSource(directory, lockName);
  }

  override isHeldElsewhere(directory: Directory, lockName: string): boolean {
    return this.delegate.isHeldElsewhere(directory, lockName);
  }

  override toString(): string {
    return `VerifyingLockFactory(${this.delegate})`;
  }

  /** Sends `message` and waits for the server to echo it. */
  verify(message: number): Promise<void> {
    const exchange = this.#exchanges.then(() => this.#exchange(message));
    this.#exchanges = exchange.catch(() => {
      // Reported to this exchange's caller; the next exchange still runs (and fails on EOF).
    });
    return exchange;
  }

  async #exchange(message: number): Promise<void> {
    await this.#channel.writeByte(message);
    let echo: number;
    try {
      echo = await this.#channel.readByte();
    } catch (err) {
      if (err instanceof EndOfStreamError) {
        throw new LockViolationError('Lock server died because of locking error.', { cause: err });
      }
      throw err;
    }
    if (echo !== message) {
      throw new ProtocolError('Protocol violation.');
    }
  }
}

/** The handle returned by {@link VerifyingLockFactory}: the real lock plus the reports. */
class CheckedLock extends LockHandleBase {
  readonly #factory: VerifyingLockFactory;
  readonly #lock: Lock;
  /** The real lock's loss is this handle's, with what the real lock's ensureValid() throws. */
  readonly #onLost = (reason: LockLostError): void => {
    let thrown: Error | undefined;
    try {
      this.#lock.ensureValid();
    } catch (err) {
      thrown = err as Error;
    }
    this.markLost(reason, thrown);
  };

  constructor(factory: VerifyingLockFactory, lock: Lock) {
    super(lock.resource, lock.token);
    this.#factory = factory;
    this.#lock = lock;
  }

  /** Observing this handle observes the real lock (which starts its background check). */
  protected override observed(): void {
    this.#lock.on('lost', this.#onLost);
    const lost = this.#lock.lostReason;
    if (lost !== undefined) this.#onLost(lost);
  }

  protected checkValid(): void {
    try {
      this.#lock.ensureValid();
    } catch (err) {
      const lost = this.#lock.lostReason;
      if (lost !== undefined) this.markLost(lost, err as Error);
      throw err;
    }
  }

  protected async closeOnce(): Promise<void> {
    let failure: unknown;
    try {
      this.#lock.ensureValid();
      await this.#factory.verify(VerifyingLockFactory.MSG_LOCK_RELEASED);
    } catch (err) {
      failure = err;
    }
    this.#lock.off('lost', this.#onLost);
    try {
      await this.#lock.close();
    } catch (err) {
      // As with Java's try-with-resources, the first failure is the one reported.
      failure ??= err;
    }
    if (failure !== undefined) throw failure;
  }

  override toString(): string {
    return `CheckedLock(${this.#lock})`;
  }
}
