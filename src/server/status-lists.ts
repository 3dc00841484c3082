/**
 * How long the lists of `status()` may be. A status page is polled (the dashboard every 1.5 s)
 * and built on the event loop, so each list names at most this many entries, chosen by a stated
 * order, and a count beside it says how many there are in all: its cost and size stay bounded
 * however many sessions and locks the server has.
 */

/** Sessions listed in `status().sessions` (most locks first); `sessionsOpen` counts all. */
export const SESSIONS_LISTED = 200;
/** Held row locks listed in `status().locks` (least lease left first); `locksHeld` counts all. */
export const LOCKS_LISTED = 200;
/** Lock waits listed in `status().waits`; `waiting` counts all (see lock-wait-status.ts). */
export const WAITS_LISTED = 200;

/**
 * The first `limit` entries offered, in the order of `compare`; entries that compare equal keep
 * the order in which they were offered (so at the cut, the earlier ones are listed). A bounded
 * selection (a heap of `limit` entries, O(n log limit)) rather than a sort of everything: a poll
 * of a server with 100,000 entries costs one pass and keeps only `limit` of them.
 */
export class Shortlist<T> {
  readonly #limit: number;
  readonly #compare: (a: T, b: T) => number;
  // A max-heap: #heap[0] is the last of those kept, the one a better entry evicts. The sequence
  // number makes the order total, so ties resolve by arrival whatever the heap's shape.
  readonly #heap: { item: T; seq: number }[] = [];
  #seq = 0;

  constructor(limit: number, compare: (a: T, b: T) => number) {
    this.#limit = limit;
    this.#compare = compare;
  }

  #after(a: { item: T; seq: number }, b: { item: T; seq: number }): number {
    return this.#compare(a.item, b.item) || a.seq - b.seq;
  }

  offer(item: T): void {
    const heap = this.#heap;
    const seq = this.#seq++;
    if (heap.length < this.#limit) {
      const entry = { item, seq };
      let i = heap.length;
      heap.push(entry);
      while (i > 0) {
        const parent = (i - 1) >> 1;
        const above = heap[parent] as { item: T; seq: number };
        if (this.#after(above, entry) > 0) break;
        heap[i] = above;
        i = parent;
      }
      heap[i] = entry;
      return;
    }
    // Only an entry strictly before the last kept gets in (a tie arrived later, so it stays out).
    const last = heap[0];
    if (last === undefined || this.#compare(item, last.item) >= 0) return;
    const entry = { item, seq };
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= heap.length) break;
      const right = heap[left + 1];
      const child =
        right !== undefined && this.#after(right, heap[left] as { item: T; seq: number }) > 0
          ? left + 1
          : left;
      const below = heap[child] as { item: T; seq: number };
      if (this.#after(below, entry) < 0) break;
      heap[i] = below;
      i = child;
    }
    heap[i] = entry;
  }

  /** The entries kept, first to last. */
  list(): T[] {
    return [...this.#heap].sort((a, b) => this.#after(a, b)).map((e) => e.item);
  }
}
