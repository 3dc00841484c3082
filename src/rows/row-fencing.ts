import { checkFence } from '../core/fencing.js';
import { checkToken } from '../core/options.js';
import { toStringBinary } from './bytes.js';

/** Rows whose newest explicit grant is remembered exactly (default); older ones share the floor. */
const GRANT_MEMORY = 100_000;

/**
 * The region's fencing: one core {@link FencingGate} per row, fed by the region's own explicit
 * grants ({@link granted}, which the region witnesses, so writes need not teach it) and asked
 * by every mutation carrying a token ({@link check}, which records nothing: a write's token
 * never fences out the row's current holder).
 *
 * Contract: a token older than the row's newest explicit grant is refused with
 * `StaleTokenError`; a valid explicit lock's own token (that newest grant) passes. Memory is
 * bounded: past `memory` rows (`GRANT_MEMORY` by default) the least recently granted is forgotten and its token
 * raises a shared floor gate. Tokens rise across all rows, so the floor can only refuse too
 * much (a stale-looking token on a forgotten row), never admit a token older than a row's real
 * newest grant.
 */
export class RowFencing {
  /**
   * Newest explicit grant per row, least recently granted first: a plain number per row, not a
   * gate object (32 B of heap a held lock on a server).
   */
  readonly #rows = new Map<string, number>();
  /** What a forgotten (or never granted) row is held to. */
  #floor = Number.NEGATIVE_INFINITY;
  readonly #memory: number;

  constructor(memory = GRANT_MEMORY) {
    this.#memory = memory;
  }

  /** Records an explicit grant of `row` with `token` as the row's newest. */
  granted(row: string, token: number): void {
    checkToken(token, 'Fencing token');
    const newest = this.#rows.get(row);
    if (newest !== undefined) this.#rows.delete(row);
    this.#rows.set(row, newest === undefined || token > newest ? token : newest);
    if (this.#rows.size > this.#memory) {
      const [oldRow, oldToken] = this.#rows.entries().next().value as [string, number];
      this.#rows.delete(oldRow);
      if (oldToken > this.#floor) this.#floor = oldToken;
    }
  }

  /** Refuses a mutation of `row` carrying `token` older than the row's newest grant. */
  check(row: string, token: number | undefined): void {
    if (token === undefined) return;
    checkFence(this.#rows.get(row) ?? this.#floor, token, `row ${toStringBinary(row)}`);
  }
}
