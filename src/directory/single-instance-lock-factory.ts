import { systemClock } from '../core/clock.js';
import {
  AlreadyClosedError,
  InvalidArgumentError,
  LockLostError,
  LockObtainFailedError,
} from '../core/errors.js';
import { nextFencingToken } from '../core/fencing.js';
import { LockHandleBase } from '../core/lock-handle.js';
import { validateLockName } from '../core/lock-name.js';
import { describeValue } from '../core/options.js';
import type { WakeSource } from '../core/wait.js';
import { InProcessReleases } from '../os/in-process-releases.js';
import { Directory } from './directory.js';
import { internals } from './internals.js';
import type { Lock } from './lock.js';
import { LockFactory } from './lock-factory.js';

/**
 * Lucene's `SingleInstanceLockFactory`: locks live in this factory instance only, keyed by name
 * (the directory only appears in messages). The default for {@link ByteBuffersDirectory}, with
 * a new factory per directory. Use only when all writers share this factory object.
 */
export class SingleInstanceLockFactory extends LockFactory {
  readonly #held = new Set<string>();
  readonly #lastToken = new Map<string, number>();
  readonly #releases = new InProcessReleases();

  async obtainLock(directory: Directory, lockName: string): Promise<Lock> {
    if (!(directory instanceof Directory)) {
      throw new InvalidArgumentError(
        `SingleInstanceLockFactory needs a Directory, got ${describeValue(directory)}`,
      );
    }
    validateLockName(lockName);
    if (this.#held.has(lockName)) {
      throw new LockObtainFailedError(
        `lock instance already obtained: (dir=${directory}, lockName=${lockName})`,
      );
    }
    this.#held.add(lockName);
    const token = nextFencingToken(this.#lastToken.get(lockName), systemClock.wall());
    this.#lastToken.set(lockName, token);
    return new SingleInstanceLock(this, lockName, `${directory}/${lockName}`, token);
  }

  override wakeSource(_directory: Directory, lockName: string): WakeSource {
    return this.#releases.source(lockName);
  }

  override isHeldElsewhere(_directory: Directory, lockName: string): boolean {
    return this.#held.has(lockName);
  }

  /** @internal */
  isHeld(name: string): boolean {
    return this.#held.has(name);
  }

  /** @internal Calls `listener` whenever `name` is cleared; returns the unsubscribe. */
  onClear(name: string, listener: () => void): () => void {
    return this.#releases.source(name)(listener);
  }

  /** @internal Removes `name`; true when it was there. */
  clear(name: string): boolean {
    const removed = this.#held.delete(name);
    if (removed) this.#releases.notify(name);
    return removed;
  }
}

/**
 * Lost when its name is cleared from the factory by anyone but itself; once observed, that is
 * noticed the moment it happens (the factory's clear notifies), not only by `ensureValid()`.
 */
class SingleInstanceLock extends LockHandleBase {
  readonly #factory: SingleInstanceLockFactory;
  readonly #name: string;
  #stopWatch: (() => void) | undefined;

  constructor(factory: SingleInstanceLockFactory, name: string, resource: string, token: number) {
    super(resource, token);
    this.#factory = factory;
    this.#name = name;
  }

  get [internals]() {
    return { factory: this.#factory, name: this.#name };
  }

  protected override observed(): void {
    this.#stopWatch = this.#factory.onClear(this.#name, () => {
      try {
        this.checkValid();
      } catch {
        // Reported as a loss by checkValid.
      }
    });
    queueMicrotask(() => {
      if (this.closed || this.lostReason !== undefined) return;
      try {
        this.checkValid();
      } catch {}
    });
  }

  protected override markLost(reason: LockLostError, thrown?: Error): void {
    super.markLost(reason, thrown);
    this.#stopWatch?.();
    this.#stopWatch = undefined;
  }

  protected checkValid(): void {
    if (!this.#factory.isHeld(this.#name)) {
      const err = new AlreadyClosedError(
        `Lock instance was invalidated from map: ${this.resource}`,
      );
      this.markLost(
        new LockLostError(
          `Lock lost: ${this.resource}: its name was cleared from the SingleInstanceLockFactory by someone else`,
          { cause: err },
        ),
        err,
      );
      throw err;
    }
  }

  protected closeOnce(): void {
    // Before our own clear below, which the watch would otherwise take for a loss.
    this.#stopWatch?.();
    this.#stopWatch = undefined;
    if (!this.#factory.clear(this.#name)) {
      throw new AlreadyClosedError(`Lock was already released: ${this.resource}`);
    }
  }

  override toString(): string {
    return `SingleInstanceLock: ${this.#name}`;
  }
}
