/**
 * Calls served, by method and outcome, since the server started, and per second over the last
 * minute (a ring of 60 one-second buckets, advanced lazily: no timer). What status pages
 * chart and `/metrics` exports.
 */
export class CallStats {
  readonly ok = new Map<string, number>();
  readonly failed = new Map<string, number>();
  readonly #ring = new Float64Array(60);
  #second = Math.floor(Date.now() / 1000);

  record(method: string, ok: boolean): void {
    const map = ok ? this.ok : this.failed;
    map.set(method, (map.get(method) ?? 0) + 1);
    this.#advance();
    const slot = this.#second % 60;
    this.#ring[slot] = (this.#ring[slot] ?? 0) + 1;
  }

  /** Calls per second for each of the last `seconds` whole seconds, oldest first. */
  perSecond(seconds = 60): number[] {
    this.#advance();
    const n = Math.min(60, Math.max(1, seconds));
    const out: number[] = [];
    for (let s = this.#second - n; s < this.#second; s++)
      out.push(this.#ring[((s % 60) + 60) % 60] ?? 0);
    return out;
  }

  #advance(): void {
    const now = Math.floor(Date.now() / 1000);
    if (now === this.#second) return;
    for (let s = this.#second + 1; s <= Math.min(now, this.#second + 60); s++)
      this.#ring[s % 60] = 0;
    this.#second = now;
  }
}
