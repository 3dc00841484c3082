import { checkFence } from '../core/fencing.js';
import { checkToken } from '../core/options.js';
import { toStringBinary } from './bytes.js';

/** Released rows whose newest explicit grant is remembered exactly; older ones share the floor. */
const GRANT_MEMORY = 100_000;

/**
 * The region's fencing: the newest explicit grant of each row, asked by every mutation
 * carrying a token ({@link check}, which records nothing: a write's token never fences out the
 * row's current holder).
 *
 * Contract: a token older than the row's newest explicit grant is refused with
 * `StaleTokenError`; a valid explicit lock's own token (that newest grant) passes, however
 * long it is held and however many rows are locked meanwhile. A held row's newest grant is its
 * holder's, which the caller passes to {@link check}; this class remembers rows only once
 * their explicit lock ended ({@link released}), so a held lock costs nothing here. Memory is
 * bounded: past `memory` rows (`GRANT_MEMORY` by default) the least recently released is
 * forgotten and its token raises a shared floor. Tokens rise across all rows, so the floor can
 * only refuse too much (a stale-looking token on a forgotten free row), never admit a token
 * older than a row's real newest grant; it never applies to a held row.
 */
export class RowFencing {
  /** Newest explicit grant per free row, least recently released first: a plain number each. */
  readonly #rows = new Map<string, number>();
  /** What a forgotten (or never granted) row is held to. */
  #floor = Number.NEGATIVE_INFINITY;
  readonly #memory: number;

  constructor(memory = GRANT_MEMORY) {
    this.#memory = memory;
  }

  /**
   * Records the explicit lock of `row` with `token`, which just ended (unlocked, expired), as
   * the row's newest grant. Every end of an explicit lock must be told here before a mutation
   * of the row is checked again: a row neither held nor remembered is held to the floor.
   */
  released(row: string, token: number): void {
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

  /**
   * Every token below `token` was handed out before this fencing began to learn grants: by an
   * earlier owner of the region (before a restart, a failover) or by the region a split took
   * the rows from. Their newest grants per row are unknown here, so such a token is refused on
   * every row not held now: refusing too much, never admitting a stale one.
   */
  refuseBelow(token: number): void {
    checkToken(token, 'Fencing floor');
    if (token > this.#floor) this.#floor = token;
  }

  /**
   * Refuses a mutation of `row` carrying `token` older than the row's newest grant: `held`,
   * the token of the row's explicit lock when one holds it now, else what {@link released}
   * recorded, else the floor.
   */
  check(row: string, token: number | undefined, held: number | undefined): void {
    if (token === undefined) return;
    checkFence(held ?? this.#rows.get(row) ?? this.#floor, token, `row ${toStringBinary(row)}`);
  }
}
