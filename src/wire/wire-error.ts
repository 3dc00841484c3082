import {
  errorFromCode,
  InternalError,
  isErrorCode,
  LocksmithError,
  type LocksmithErrorCode,
  NotMasterError,
} from '../core/errors.js';
import { describeValue } from '../core/options.js';
import { ServerKind } from './messages.js';

/** An error as it crosses the wire: its code, its message, and whether a retry may succeed. */
export interface WireError {
  readonly code: LocksmithErrorCode;
  readonly message: string;
  readonly retryable: boolean;
}

export { isErrorCode };

/**
 * What the server sends for `err`. A `LocksmithError` keeps its code and message; anything
 * else is a bug or an unexpected failure of the server, sent as `INTERNAL` with the message
 * only (no stack, no cause: the server's log has those). `retryable` is the code's (see
 * `LocksmithError.retryable`), for clients that do not keep the table of codes.
 */
export function toWireError(err: unknown): WireError {
  if (err instanceof LocksmithError) {
    return { code: err.code, message: err.message, retryable: err.retryable };
  }
  const message = err instanceof Error ? err.message : describeValue(err);
  return { code: 'INTERNAL', message: `Internal server error: ${message}`, retryable: false };
}

/**
 * The one way a server answers with an error: the ERROR frame for call `id` (0: the
 * connection's), with `{ master }` as its details when a `NOT_MASTER` knows where the master is.
 */
export function errorFrame(id: number, err: unknown): unknown[] {
  const wire = toWireError(err);
  const frame: unknown[] = [ServerKind.ERROR, id, wire.code, wire.message, wire.retryable];
  if (err instanceof NotMasterError && err.master !== undefined) frame.push({ master: err.master });
  return frame;
}

/** The local error class for a code received from a server; an unknown code is `INTERNAL`. */
export function fromWireError(code: unknown, message: unknown): LocksmithError {
  const text = typeof message === 'string' ? message : 'The server sent no message';
  if (!isErrorCode(code)) {
    return new InternalError(
      `The server answered with unknown error code ${describeValue(code)}: ${text}`,
    );
  }
  return errorFromCode(code, text);
}
