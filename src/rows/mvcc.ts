import { LockIOError } from '../core/errors.js';

/**
 * Multi-version concurrency control, as HBase's `MultiVersionConsistencyControl`.
 *
 * A writer takes a write number with `begin()`, stamps its cells with it, and calls
 * `complete()` when they are durable. The read point advances over the longest prefix of
 * completed numbers only, so a reader at the read point sees every earlier mutation whole and
 * none of a later one, whatever order writers finish in. The read point never goes back.
 */
export class Mvcc {
  #writePoint: number;
  #readPoint: number;
  // Outstanding write numbers are consecutive from readPoint + 1; done[i] is writePoint
  // `readPoint + 1 + i`. A ring would save the shift, but the queue is as long as the number
  // of writes in flight, which group commit keeps small.
  #done: boolean[] = [];
  #waiters = new Map<number, () => void>();

  constructor(start = 0) {
    this.#writePoint = start;
    this.#readPoint = start;
  }

  get readPoint(): number {
    return this.#readPoint;
  }

  begin(): number {
    this.#done.push(false);
    return ++this.#writePoint;
  }

  /** Marks `num` finished (applied or rolled back) and advances the read point if it can. */
  complete(num: number): void {
    const index = num - this.#readPoint - 1;
    if (index < 0 || index >= this.#done.length || this.#done[index]) {
      throw new LockIOError(
        `MVCC invariant broken: write ${num} is not outstanding (read point ${this.#readPoint})`,
      );
    }
    this.#done[index] = true;
    let advance = 0;
    while (advance < this.#done.length && this.#done[advance]) advance++;
    if (advance === 0) return;
    this.#done.splice(0, advance);
    const from = this.#readPoint;
    this.#readPoint += advance;
    if (this.#waiters.size > 0) {
      for (let n = from + 1; n <= this.#readPoint; n++) {
        const wake = this.#waiters.get(n);
        if (wake !== undefined) {
          this.#waiters.delete(n);
          wake();
        }
      }
    }
  }

  /** Resolves once the read point has reached `num`; undefined when it already has. */
  waitVisible(num: number): Promise<void> | undefined {
    if (num <= this.#readPoint) return undefined;
    return new Promise((resolve) => this.#waiters.set(num, resolve));
  }
}
