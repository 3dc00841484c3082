/**
 * A call's cancellation whose `AbortSignal` is made only when a wait needs it. The locksmith
 * server passes one per call under {@link deferredSignal} (its calls' options), in place of a
 * `signal`: most calls find their rows free and never wait, and an `AbortController` per call
 * (with the garbage it makes) was a visible share of the server's CPU.
 *
 * Contract, as for a `signal` option: a call whose cancellation has already happened when it
 * starts is refused with an `AbortedError` (cause: the signal's reason), even if its row is
 * free; a wait listens to {@link DeferredSignal.signal}. Given together with a `signal`, the
 * `signal` wins. Internal: a symbol key, so it is never one of the options a user names.
 */
export interface DeferredSignal {
  /** Whether the call was cancelled; reading it makes no signal. */
  readonly aborted: boolean;
  /** The call's signal, made on first use (already aborted if the call was cancelled). */
  readonly signal: AbortSignal;
}

export const deferredSignal: unique symbol = Symbol('locksmith.deferredSignal');
