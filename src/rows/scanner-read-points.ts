/**
 * The read points of open scanners, so that pruning old versions keeps what a scanner can
 * still see.
 *
 * Contract: {@link oldest} is never above the read point of a scanner between its
 * {@link open} and its {@link close}; each `open` must be matched by one `close` of the same
 * read point.
 */
export class ScannerReadPoints {
  /** Read point → number of scanners open at it. */
  readonly #open = new Map<number, number>();

  open(readPoint: number): void {
    this.#open.set(readPoint, (this.#open.get(readPoint) ?? 0) + 1);
  }

  close(readPoint: number): void {
    const left = (this.#open.get(readPoint) ?? 1) - 1;
    if (left === 0) this.#open.delete(readPoint);
    else this.#open.set(readPoint, left);
  }

  /** The oldest read point in use: `current` (the MVCC read point) or an older scanner's. */
  oldest(current: number): number {
    let oldest = current;
    for (const readPoint of this.#open.keys()) if (readPoint < oldest) oldest = readPoint;
    return oldest;
  }
}
