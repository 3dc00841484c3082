import {
  CALLS,
  type CallArgs,
  type CallResult,
  type CallSpec,
  type Method,
} from '../wire/calls.js';

/** What a caller may say about one call: give up when `signal` aborts, or after `timeoutMs`. */
export interface CallLimits {
  signal?: AbortSignal | undefined;
  /** The call's round-trip timeout (milliseconds; 0: none); default: the client's. */
  timeoutMs?: number | undefined;
}

/** What a typed call sends through: the connection's untyped call. */
export interface CallTransport {
  call(
    method: Method,
    args: unknown[],
    options: CallLimits & { idempotent?: boolean | undefined },
  ): Promise<unknown>;
}

/** A call of the protocol, typed from the call table: its arguments in, its result out. */
export type TypedCall = <M extends Method>(
  method: M,
  args: CallArgs<M>,
  options?: CallLimits,
) => Promise<CallResult<M>>;

/**
 * The client's one way to make a call: the table encodes the arguments, says whether the call
 * may be resent after a lost connection, and decodes the result (a malformed one is the
 * server's `PROTOCOL_ERROR`).
 */
export function typedCall(transport: CallTransport): TypedCall {
  return <M extends Method>(method: M, args: CallArgs<M>, options?: CallLimits) => {
    const spec = CALLS[method] as unknown as CallSpec<unknown[], unknown[], unknown, CallResult<M>>;
    // A fresh literal, not a spread of the caller's options: this runs on every call.
    const sent = transport.call(method, spec.encodeArgs(...args), {
      signal: options?.signal,
      timeoutMs: options?.timeoutMs,
      idempotent: spec.resend,
    });
    return sent.then(spec.decodeResult);
  };
}
