/**
 * The bytes of answers the server holds for all its clients and has not sent yet, against one
 * bound. Each connection charges what its socket holds after a write and gives it all back
 * when the socket drains or closes; between the two the kernel may have taken some, so the
 * total errs high, which is the safe side for a memory bound.
 */
export class OutputBudget {
  readonly limit: number;
  #total = 0;

  constructor(limit: number) {
    this.limit = limit;
  }

  get total(): number {
    return this.#total;
  }

  get exceeded(): boolean {
    return this.#total > this.limit;
  }

  /** A connection's unsent bytes went from `before` to `after`. */
  update(before: number, after: number): void {
    this.#total += after - before;
  }
}
