import { StaleTokenError } from './errors.js';
import { checkToken } from './options.js';

export { StaleTokenError };

/**
 * Fencing tokens are integers that strictly increase with every grant of a resource.
 *
 * Where a token is persisted, the next one is `max(previous + 1, floor)` with `floor` the wall
 * clock in microseconds: the stored value guarantees strict increase while it survives, and
 * the clock floor keeps tokens increasing even if the stored value is lost (a deleted or
 * recreated lock file), as long as the wall clock has not gone back by more than the time
 * since the last grant. Microseconds since 1970 stay below 2^53 until the year 2255.
 */
export function nextFencingToken(previous: number | undefined, wallMs: number): number {
  const floor = Math.floor(wallMs * 1000);
  const next = previous === undefined || !Number.isSafeInteger(previous) ? floor : previous + 1;
  return Math.max(next, floor);
}

/**
 * The protected side of fencing: admits a write only if its token is not older than the newest
 * token seen so far (equal tokens are the same holder, still admitted). A token that is not a
 * safe integer >= 0 (NaN, Infinity, a string, an object, …) is refused with an
 * `INVALID_ARGUMENT` error and changes nothing: a malformed token can neither pass nor move
 * the floor.
 */
export class FencingGate {
  #highest = Number.NEGATIVE_INFINITY;

  /** Starts with no token seen, or with `floor` as the newest token already seen. */
  constructor(floor?: number) {
    if (floor !== undefined) this.#highest = checkToken(floor, 'FencingGate floor');
  }

  get highest(): number {
    return this.#highest;
  }

  /** Admits a write carrying `token` (see {@link check}) and records `token` as the newest. */
  admit(token: number, resource = 'resource'): void {
    this.check(token, resource);
    this.#highest = token;
  }

  /**
   * Refuses `token` as {@link admit} does, but records nothing: for a protected side that
   * learns newer tokens from the grants themselves ({@link observe}) rather than from writes.
   */
  check(token: number, resource = 'resource'): void {
    checkFence(this.#highest, token, resource);
  }

  /**
   * Records `token` as seen without a write (a grant the protected side witnesses itself); an
   * older one changes nothing. A malformed token is refused as in {@link admit}.
   */
  observe(token: number): void {
    checkToken(token, 'Fencing token');
    if (token > this.#highest) this.#highest = token;
  }
}

/**
 * The check of {@link FencingGate.check} against a newest token kept elsewhere (a table of
 * many resources keeps plain numbers, not a gate object each): refuses a malformed `token`
 * and one older than `highest` with `StaleTokenError`.
 */
export function checkFence(highest: number, token: number, resource: string): void {
  checkToken(token, `Fencing token for ${resource}`);
  if (token < highest) {
    throw new StaleTokenError(
      `Fencing token ${token} for ${resource} is older than ${highest}: the lock was granted to someone else since`,
    );
  }
}
