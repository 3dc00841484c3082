/**
 * The death of one database connection, as `SqlConnection` reports it: `dead` once the
 * driver said so (or we ended it), and each `onDeath` listener called once with the driver's
 * error, at once when it subscribes after the fact. Only the first report counts.
 */
export class ConnectionDeath {
  #dead = false;
  #error: unknown;
  readonly #listeners: ((error: unknown) => void)[] = [];

  get dead(): boolean {
    return this.#dead;
  }

  /** The driver reported the connection dead: record why and tell every listener. */
  report(error: unknown): void {
    if (this.#dead) return;
    this.#dead = true;
    this.#error = error;
    for (const l of this.#listeners.splice(0)) l(error);
  }

  /** We ended the connection ourselves (`destroy()`): dead from now on, nobody is told. */
  markDead(): void {
    this.#dead = true;
  }

  onDeath(listener: (error: unknown) => void): void {
    if (this.#dead) listener(this.#error);
    else this.#listeners.push(listener);
  }
}
