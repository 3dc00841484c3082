/**
 * Keys in byte order (latin1 strings compare as bytes with `<`) that are cheap to add to: an
 * added key waits in a list and is merged in only when someone needs the order, so adding k
 * keys to n costs O(k log k + n) at the next read instead of O(n) each. Inserting into a
 * sorted array per key made a write of 10^5 new rows, or of 10^5 new columns of one row,
 * quadratic.
 *
 * Contract: {@link sorted} returns each key at most once, in order, keeping only those the
 * owner still `has` (a removed key may linger until then; readers of a stale order skip keys
 * the owner no longer has).
 */
export class SortedKeys {
  #sorted: string[] = [];
  #added: string[] = [];

  add(key: string): void {
    this.#added.push(key);
  }

  /** The keys in order, merged with those added since, without removed and repeated ones. */
  sorted(has: (key: string) => boolean): readonly string[] {
    if (this.#added.length === 0) return this.#sorted;
    const added = this.#added.sort();
    const old = this.#sorted;
    const merged: string[] = [];
    let i = 0;
    let j = 0;
    while (i < old.length || j < added.length) {
      const a = old[i];
      const b = added[j];
      let next: string | undefined;
      if (b === undefined || (a !== undefined && a <= b)) {
        next = a;
        i++;
      } else {
        next = b;
        j++;
      }
      if (next !== undefined && has(next) && merged[merged.length - 1] !== next) merged.push(next);
    }
    this.#sorted = merged;
    this.#added = [];
    return merged;
  }

  /** Forgets the keys the owner no longer `has` (one pass). */
  prune(has: (key: string) => boolean): void {
    this.#sorted = this.#sorted.filter(has);
    this.#added = this.#added.filter(has);
  }

  clear(): void {
    this.#sorted = [];
    this.#added = [];
  }
}
