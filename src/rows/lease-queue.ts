import { type Clock, setClockTimer } from '../core/clock.js';

const MAX_TIMER_MS = 2 ** 31 - 1;

/** Something with a deadline on `clock.monotonic()`'s scale. */
export interface Deadlined {
  /** When the item falls due. While queued it may be moved later (renewal), never earlier. */
  deadline: number;
}

/**
 * Deadlines of many items on one timer: a binary min-heap plus a single clock timer armed for
 * the earliest entry. Used for row lock leases and for lock-wait timeouts.
 *
 * - No per-item timer or closure: an entry is a number and a reference in two arrays.
 * - Renewal is O(1): the owner just raises `item.deadline`. The heap still holds the old key;
 *   when that key comes due the entry is pushed again with the current deadline.
 * - Removal is O(1) amortized and lazy: the owner makes `isLive(item)` false and calls
 *   {@link remove}; dead entries are skipped when they surface, and the heap is rebuilt from
 *   the live ones once more than half of it is dead, so churn does not grow it.
 * - `onDue(item)` runs from the timer for each live item whose deadline has passed, in
 *   deadline order; it may add and remove items. The item counts as removed before the call.
 *
 * With `keepAlive` false the timer does not hold the process open (a lease on a lock nobody
 * waits for must not), and it stays armed when the queue empties: it fires once, finds nothing
 * and stops, which is cheaper than cancelling and re-arming on every lock/unlock. With
 * `keepAlive` true (waits that someone awaits) it is cancelled as soon as nothing is live.
 */
export class LeaseQueue<T extends Deadlined> {
  readonly #clock: Clock;
  readonly #isLive: (item: T) => boolean;
  readonly #onDue: (item: T) => void;
  readonly #keepAlive: boolean;
  #keys: number[] = [];
  #items: T[] = [];
  #live = 0;
  #armedAt = Number.POSITIVE_INFINITY;
  #cancelTimer: (() => void) | undefined;
  #closed = false;

  constructor(
    clock: Clock,
    isLive: (item: T) => boolean,
    onDue: (item: T) => void,
    keepAlive = false,
  ) {
    this.#clock = clock;
    this.#isLive = isLive;
    this.#onDue = onDue;
    this.#keepAlive = keepAlive;
  }

  /** Live items. */
  get size(): number {
    return this.#live;
  }

  /** Heap entries, dead ones included (for tests of the compaction bound). */
  get entries(): number {
    return this.#keys.length;
  }

  /** Queues a live item that is not queued yet, due at `item.deadline`. */
  add(item: T): void {
    if (this.#closed) return;
    this.#live++;
    this.#push(item.deadline, item);
    if (item.deadline < this.#armedAt) this.#arm();
  }

  /** Reports that a queued item stopped being live (`isLive(item)` is now false). */
  remove(): void {
    if (this.#closed) return;
    this.#live--;
    if (this.#live === 0 && this.#keepAlive) this.#disarm();
    if (this.#keys.length > 2 * this.#live + 32) this.#compact();
  }

  /** Drops everything and stops the timer for good. */
  close(): void {
    this.#closed = true;
    this.#keys = [];
    this.#items = [];
    this.#live = 0;
    this.#disarm();
  }

  #fire = (): void => {
    this.#cancelTimer = undefined;
    this.#armedAt = Number.POSITIVE_INFINITY;
    try {
      const now = this.#clock.monotonic();
      // `onDue` may compact the heap, which replaces the arrays: always read them afresh.
      while (!this.#closed && this.#keys.length > 0 && (this.#keys[0] as number) <= now) {
        const item = this.#pop();
        if (!this.#isLive(item)) continue;
        if (item.deadline > now) {
          this.#push(item.deadline, item);
          continue;
        }
        this.#live--;
        this.#onDue(item);
      }
    } finally {
      if (!this.#closed) this.#arm();
    }
  };

  /** Makes sure a timer will fire no later than the earliest key. */
  #arm(): void {
    const top = this.#keys[0];
    if (top === undefined || top >= this.#armedAt) return;
    this.#cancelTimer?.();
    this.#armedAt = top;
    // Longer delays overflow setTimeout (which then fires at once); waking early is harmless.
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, Math.ceil(top - this.#clock.monotonic())));
    this.#cancelTimer = setClockTimer(this.#clock, delay, this.#fire, this.#keepAlive);
  }

  #disarm(): void {
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
    this.#armedAt = Number.POSITIVE_INFINITY;
  }

  #push(key: number, item: T): void {
    const keys = this.#keys;
    const items = this.#items;
    let i = keys.length;
    keys.push(key);
    items.push(item);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const parentKey = keys[parent] as number;
      if (parentKey <= key) break;
      keys[i] = parentKey;
      items[i] = items[parent] as T;
      i = parent;
    }
    keys[i] = key;
    items[i] = item;
  }

  #pop(): T {
    const keys = this.#keys;
    const items = this.#items;
    const top = items[0] as T;
    const lastKey = keys.pop() as number;
    const lastItem = items.pop() as T;
    if (keys.length > 0) this.#siftDown(0, lastKey, lastItem);
    return top;
  }

  #siftDown(start: number, key: number, item: T): void {
    const keys = this.#keys;
    const items = this.#items;
    const n = keys.length;
    let i = start;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && (keys[child + 1] as number) < (keys[child] as number)) child++;
      const childKey = keys[child] as number;
      if (childKey >= key) break;
      keys[i] = childKey;
      items[i] = items[child] as T;
      i = child;
    }
    keys[i] = key;
    items[i] = item;
  }

  /** Keeps the live entries, keyed by their current deadlines, and restores the heap order. */
  #compact(): void {
    const keys: number[] = [];
    const items: T[] = [];
    for (const item of this.#items) {
      if (this.#isLive(item)) {
        keys.push(item.deadline);
        items.push(item);
      }
    }
    this.#keys = keys;
    this.#items = items;
    for (let i = (keys.length >> 1) - 1; i >= 0; i--) {
      this.#siftDown(i, keys[i] as number, items[i] as T);
    }
  }
}
