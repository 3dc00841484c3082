import {
  AbortedError,
  AlreadyClosedError,
  ConnectionLostError,
  DeadlockError,
  FencedError,
  InternalError,
  InvalidArgumentError,
  LimitExceededError,
  LockIOError,
  LockLostError,
  LockObtainFailedError,
  LocksmithError,
  type LocksmithErrorCode,
  LockTimeoutError,
  NotMasterError,
  ProtocolError,
  TableError,
  UnauthenticatedError,
  UnknownRowLockError,
  UnsupportedOperationError,
} from '../core/errors.js';
import { StaleTokenError } from '../core/fencing.js';
import { describeValue } from '../core/options.js';

/** An error as it crosses the wire: its code, its message, and whether a retry may succeed. */
export interface WireError {
  readonly code: LocksmithErrorCode;
  readonly message: string;
  readonly retryable: boolean;
}

/**
 * Codes a caller may retry as they are (after a backoff): the same call can succeed later
 * without anything else changing. `CONNECTION_LOST` is not here: whether a call the server
 * may have applied can be repeated depends on the call, and the client decides that.
 */
const RETRYABLE = new Set<LocksmithErrorCode>([
  'LOCK_TIMEOUT',
  'DEADLOCK',
  'LIMIT_EXCEEDED',
  'NOT_MASTER',
]);

/** The error class for each code, so a remote error is the same class as a local one. */
const MAKERS: Record<LocksmithErrorCode, (message: string) => LocksmithError> = {
  INVALID_ARGUMENT: (m) => new InvalidArgumentError(m),
  IO_ERROR: (m) => new LockIOError(m),
  LOCK_OBTAIN_FAILED: (m) => new LockObtainFailedError(m),
  LOCK_TIMEOUT: (m) => new LockTimeoutError(m),
  LOCK_RELEASE_FAILED: (m) => new LockIOError(m, { code: 'LOCK_RELEASE_FAILED' }),
  ALREADY_CLOSED: (m) => new AlreadyClosedError(m),
  LOCK_LOST: (m) => new LockLostError(m, { code: 'LOCK_LOST' }),
  LEASE_EXPIRED: (m) => new LockLostError(m, { code: 'LEASE_EXPIRED' }),
  LOCK_UNCONFIRMED: (m) => new LockLostError(m, { code: 'LOCK_UNCONFIRMED' }),
  SESSION_EXPIRED: (m) => new LockLostError(m, { code: 'SESSION_EXPIRED' }),
  ABORTED: (m) => new AbortedError(m),
  UNSUPPORTED_OPERATION: (m) => new UnsupportedOperationError(m),
  PROTOCOL_ERROR: (m) => new ProtocolError(m),
  LOCK_VIOLATION: (m) => new LocksmithError('LOCK_VIOLATION', m),
  UNKNOWN_ROW_LOCK: (m) => new UnknownRowLockError(m),
  DEADLOCK: (m) => new DeadlockError(m),
  STALE_TOKEN: (m) => new StaleTokenError(m),
  CONNECTION_LOST: (m) => new ConnectionLostError(m),
  UNAUTHENTICATED: (m) => new UnauthenticatedError(m),
  LIMIT_EXCEEDED: (m) => new LimitExceededError(m),
  TABLE_NOT_FOUND: (m) => new TableError('TABLE_NOT_FOUND', m),
  TABLE_EXISTS: (m) => new TableError('TABLE_EXISTS', m),
  FENCED: (m) => new FencedError(m),
  NOT_MASTER: (m) => new NotMasterError(m),
  MASTER_CHANGED: (m) => new LockLostError(m, { code: 'MASTER_CHANGED' }),
  INTERNAL: (m) => new InternalError(m),
};

export function isErrorCode(code: unknown): code is LocksmithErrorCode {
  return typeof code === 'string' && Object.hasOwn(MAKERS, code);
}

export function isRetryable(code: LocksmithErrorCode): boolean {
  return RETRYABLE.has(code);
}

/**
 * What the server sends for `err`. A `LocksmithError` keeps its code and message; anything
 * else is a bug or an unexpected failure of the server, sent as `INTERNAL` with the message
 * only (no stack, no cause: the server's log has those).
 */
export function toWireError(err: unknown): WireError {
  if (err instanceof LocksmithError) {
    return { code: err.code, message: err.message, retryable: RETRYABLE.has(err.code) };
  }
  const message = err instanceof Error ? err.message : describeValue(err);
  return { code: 'INTERNAL', message: `Internal server error: ${message}`, retryable: false };
}

/** The local error class for a code received from a server; an unknown code is `INTERNAL`. */
export function fromWireError(code: unknown, message: unknown): LocksmithError {
  const text = typeof message === 'string' ? message : 'The server sent no message';
  if (!isErrorCode(code)) {
    return new InternalError(
      `The server answered with unknown error code ${describeValue(code)}: ${text}`,
    );
  }
  return MAKERS[code](text);
}
