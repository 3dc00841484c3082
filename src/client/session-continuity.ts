/**
 * What a WELCOME means for the session the client had, decided in one place:
 *
 * - `new`: the client had no session; this is its first (or the next after a loss).
 * - `resumed`: the same session, on the same server or on a new master that put it back
 *   from the session journal (durable sessions): its locks that the WELCOME lists are still
 *   held, with their ids and tokens.
 * - `masterChanged`: a server of another epoch than the one that opened the session opened a
 *   new session instead (it keeps sessions in memory only): everything the session held is
 *   lost (`MASTER_CHANGED`), and the WELCOME's session is a fresh one.
 * - `sessionExpired`: same epoch, but the server opened a new session instead of resuming.
 */
export type SessionContinuity = 'new' | 'resumed' | 'masterChanged' | 'sessionExpired';

export function sessionContinuity(
  had: { readonly epoch: number } | undefined,
  welcome: { readonly resumed: boolean; readonly epoch: number },
): SessionContinuity {
  if (had === undefined) return 'new';
  if (welcome.resumed) return 'resumed';
  return welcome.epoch !== had.epoch ? 'masterChanged' : 'sessionExpired';
}

/** A WELCOME's `epoch`: a non-negative safe integer; absent (a server before epochs): 0. */
export function welcomeEpoch(value: unknown): number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : 0;
}
