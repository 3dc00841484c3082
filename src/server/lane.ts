/**
 * A lane of handlers: at most `size` calls run at once, the others queue in arrival order
 * (HBase's handler pool and call queue). A call gives its handler back early with
 * {@link Slot.yield} when it starts waiting for a row lock (or for its write's fsync), so no
 * number of blocked lockers can occupy the lane (HBase parked a handler per blocked `lockRow`,
 * and ten of them stopped a RegionServer). A call that got its row after waiting finishes without queueing for a handler
 * again: it holds the row, and making it queue would lengthen every other waiter's wait.
 */
export class Lane {
  readonly name: string;
  readonly size: number;
  #busy = 0;
  #queue: (() => void)[] = [];
  #queueHead = 0;
  /** Calls that gave their handler back to wait (row lock, fsync) and have not finished. */
  #parked = 0;
  #completed = 0;

  constructor(name: string, size: number) {
    this.name = name;
    this.size = size;
  }

  /** Handlers running a call now. */
  get busy(): number {
    return this.#busy;
  }

  /** Calls waiting for a handler. */
  get queued(): number {
    return this.#queue.length - this.#queueHead;
  }

  /** Calls that gave their handler back while they wait (for a row lock or an fsync). */
  get parked(): number {
    return this.#parked;
  }

  /** Calls finished since the lane was made. */
  get completed(): number {
    return this.#completed;
  }

  /**
   * Runs `task` once a handler is free; the slot lets the task give its handler back early.
   * No async function: its frame and awaits were the largest allocation of a fast call.
   */
  run<T>(task: (slot: Slot) => Promise<T>): Promise<T> {
    if (this.#busy >= this.size) {
      return new Promise<void>((resolve) => this.#queue.push(resolve)).then(() =>
        this.#start(task),
      );
    }
    this.#busy++;
    return this.#start(task);
  }

  /** Runs `task` on the handler just taken; the handler is given back however it ends. */
  #start<T>(task: (slot: Slot) => Promise<T>): Promise<T> {
    const slot = new Slot(this);
    let work: Promise<T>;
    try {
      work = task(slot);
    } catch (err) {
      slot.end();
      return Promise.reject(err);
    }
    return work.then(
      (value) => {
        slot.end();
        return value;
      },
      (err: unknown) => {
        slot.end();
        throw err;
      },
    );
  }

  /** @internal */
  handBack(parked: boolean): void {
    if (parked) this.#parked++;
    const next = this.#queue[this.#queueHead];
    if (next === undefined) {
      this.#busy--;
      return;
    }
    this.#queue[this.#queueHead++] = undefined as never;
    if (this.#queueHead > 1024 && this.#queueHead * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#queueHead);
      this.#queueHead = 0;
    }
    // The handler passes straight to the next call: `busy` is unchanged.
    next();
  }

  /** @internal */
  countCompleted(): void {
    this.#completed++;
  }

  /** @internal */
  unpark(): void {
    this.#parked--;
  }
}

/** One call's hold on a handler of a {@link Lane}. */
export class Slot {
  readonly #lane: Lane;
  #state: 'held' | 'parked' | 'done' = 'held';

  constructor(lane: Lane) {
    this.#lane = lane;
  }

  /** Gives the handler back (the call is about to wait for a row lock or an fsync). Idempotent. */
  yield(): void {
    if (this.#state !== 'held') return;
    this.#state = 'parked';
    this.#lane.handBack(true);
  }

  /** @internal Called by the lane when the call ends. */
  end(): void {
    if (this.#state === 'held') this.#lane.handBack(false);
    else if (this.#state === 'parked') this.#lane.unpark();
    this.#state = 'done';
    this.#lane.countCompleted();
  }
}
