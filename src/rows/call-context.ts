/**
 * How a host that runs calls on a region (the locksmith server) follows one call through the
 * row store. One object per call, under the {@link callContext} key of the call's options: a
 * symbol, so it is never one of the options a user names, and the row store knows nothing of
 * the host's handlers or connections.
 *
 * - Cancellation without an `AbortSignal` per call: most calls find their rows free and never
 *   wait, and a controller per call (with the garbage it makes) would be a visible share of the
 *   server's CPU. A call whose context is already `aborted` when it starts is refused with an
 *   `AbortedError` (cause: the signal's reason) even if its row is free; a wait listens to
 *   `signal`, which the context makes on first use. Given together with a `signal` option, the
 *   `signal` wins.
 * - `waiting()`: the call is about to wait, for a row another holds (once per row it waits
 *   for) or for its write's batch to be made durable (once per write: a `batch` may call it
 *   once per mutation). The server gives the call's handler back there, so a waiting call
 *   occupies none (a handler held through an fsync capped a group commit at the number of
 *   handlers). It must be idempotent and must not throw.
 */
export interface RowCallContext {
  /** Whether the call was cancelled; reading it makes no signal. */
  readonly aborted: boolean;
  /** The call's signal, made on first use (already aborted if the call was cancelled). */
  readonly signal: AbortSignal;
  waiting(): void;
}

export const callContext: unique symbol = Symbol('locksmith.rows.callContext');
