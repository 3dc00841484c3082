import {
  CALLS,
  type CallArgs,
  type CallResult,
  type CallSpec,
  type Method,
  waitArgOf,
} from '../wire/calls.js';

/** What a caller may say about one call: give up when `signal` aborts, or after `timeoutMs`. */
export interface CallLimits {
  signal?: AbortSignal | undefined;
  /** The call's round-trip timeout (milliseconds; 0: none); default: the client's. */
  timeoutMs?: number | undefined;
  /**
   * How long the call may wait on the server for a row lock (its `waitMs`, the default filled
   * in): each send carries what is left of it, and the call fails with `LOCK_TIMEOUT` once it
   * is up while no server can be reached (see `CallOptions.wait`).
   */
  waitMs?: number | undefined;
}

/** What a typed call sends through: the connection's untyped call. */
export interface CallTransport {
  call(
    method: Method,
    args: unknown[],
    options: {
      signal?: AbortSignal | undefined;
      timeoutMs?: number | undefined;
      idempotent?: boolean | undefined;
      wait?: { until: number; arg: number } | undefined;
      session?: number | undefined;
    },
  ): Promise<unknown>;
}

/** A call of the protocol, typed from the call table: its arguments in, its result out. */
export type TypedCall = <M extends Method>(
  method: M,
  args: CallArgs<M>,
  options?: CallLimits,
) => Promise<CallResult<M>>;

/** Each call with a server-side wait, and where that wait sits in its arguments. */
const WAIT_ARGS = new Map<Method, number>(
  Object.entries(CALLS).flatMap(([method, spec]) => {
    const at = waitArgOf(spec.shape);
    return at === undefined ? [] : [[method as Method, at]];
  }),
);

/**
 * The client's one way to make a call: the table encodes the arguments, says whether the call
 * may be resent after a lost connection, and decodes the result (a malformed one is the
 * server's `PROTOCOL_ERROR`). With `session`, every call is made in that session of the ones
 * the connection carries besides its own (see `LocksmithSession`).
 */
export function typedCall(transport: CallTransport, session?: number): TypedCall {
  return <M extends Method>(method: M, args: CallArgs<M>, options?: CallLimits) => {
    const spec = CALLS[method] as unknown as CallSpec<unknown[], unknown[], unknown, CallResult<M>>;
    const waitMs = options?.waitMs;
    const arg = waitMs !== undefined && waitMs > 0 ? WAIT_ARGS.get(method) : undefined;
    // A fresh literal, not a spread of the caller's options: this runs on every call.
    const sent = transport.call(method, spec.encodeArgs(...args), {
      signal: options?.signal,
      timeoutMs: options?.timeoutMs,
      idempotent: spec.resend,
      wait:
        arg === undefined || !Number.isFinite(waitMs)
          ? undefined
          : { until: performance.now() + (waitMs as number), arg },
      session,
    });
    return sent.then(spec.decodeResult);
  };
}
