/**
 * The error vocabulary shared by every lock family.
 *
 * Every error locksmith throws is a {@link LocksmithError} with a stable `code`. The class
 * tree mirrors Lucene's where the distinction matters to callers: {@link LockObtainFailedError}
 * and {@link LockReleaseFailedError} are {@link LockIOError}s (Java `IOException`s), while
 * {@link AlreadyClosedError} is not (Java's `AlreadyClosedException` is an
 * `IllegalStateException`). Catch by class or switch on `code`; messages name the resource.
 */

export type LocksmithErrorCode =
  | 'INVALID_ARGUMENT'
  | 'IO_ERROR'
  | 'LOCK_OBTAIN_FAILED'
  | 'LOCK_TIMEOUT'
  | 'LOCK_RELEASE_FAILED'
  | 'ALREADY_CLOSED'
  | 'LOCK_LOST'
  | 'LEASE_EXPIRED'
  | 'LOCK_UNCONFIRMED'
  | 'ABORTED'
  | 'UNSUPPORTED_OPERATION'
  | 'PROTOCOL_ERROR'
  | 'LOCK_VIOLATION'
  | 'UNKNOWN_ROW_LOCK'
  | 'DEADLOCK'
  | 'STALE_TOKEN'
  | 'SESSION_EXPIRED'
  | 'CONNECTION_LOST'
  | 'UNAUTHENTICATED'
  | 'LIMIT_EXCEEDED'
  | 'TABLE_NOT_FOUND'
  | 'TABLE_EXISTS'
  | 'FENCED'
  | 'NOT_MASTER'
  | 'NOT_SERVING_REGION'
  | 'MASTER_CHANGED'
  | 'INTERNAL';

export interface LocksmithErrorOptions {
  cause?: unknown;
}

/**
 * Codes a caller may retry as they are (after a backoff): the same call can succeed later
 * without anything else changing. `CONNECTION_LOST` is not here: whether a call the server
 * may have applied can be repeated depends on the call, and the client decides that.
 */
const RETRYABLE_CODES: ReadonlySet<LocksmithErrorCode> = new Set<LocksmithErrorCode>([
  'LOCK_TIMEOUT',
  'DEADLOCK',
  'LIMIT_EXCEEDED',
  'NOT_MASTER',
  'NOT_SERVING_REGION',
]);

/**
 * The base of every locksmith error. Throw a subclass: each code has one class
 * ({@link errorFromCode}), the same for an error raised here and one received from a server.
 */
export class LocksmithError extends Error {
  readonly code: LocksmithErrorCode;

  constructor(code: LocksmithErrorCode, message: string, options?: LocksmithErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.name = new.target.name;
  }

  /** Whether the same call may succeed if repeated as it is, after a backoff. */
  get retryable(): boolean {
    return RETRYABLE_CODES.has(this.code);
  }
}

/** A caller passed a value that can never be valid (bad name, negative duration, …). */
export class InvalidArgumentError extends LocksmithError {
  constructor(message: string, options?: LocksmithErrorOptions) {
    super('INVALID_ARGUMENT', message, options);
  }
}

/** An I/O failure; the Java `IOException` of the originals. `cause` holds the OS error. */
export class LockIOError extends LocksmithError {
  constructor(
    message: string,
    options?: LocksmithErrorOptions & {
      code?:
        | 'IO_ERROR'
        | 'LOCK_OBTAIN_FAILED'
        | 'LOCK_TIMEOUT'
        | 'LOCK_RELEASE_FAILED'
        | 'PROTOCOL_ERROR';
    },
  ) {
    super(options?.code ?? 'IO_ERROR', message, options);
  }
}

/** The lock is held by someone else (Lucene's `LockObtainFailedException`). */
export class LockObtainFailedError extends LockIOError {
  constructor(
    message: string,
    options?: LocksmithErrorOptions & { code?: 'LOCK_OBTAIN_FAILED' | 'LOCK_TIMEOUT' },
  ) {
    super(message, { ...options, code: options?.code ?? 'LOCK_OBTAIN_FAILED' });
  }
}

/** A wait for a lock ran out of time. Still a {@link LockObtainFailedError}, as in Lucene. */
export class LockTimeoutError extends LockObtainFailedError {
  constructor(message: string, options?: LocksmithErrorOptions) {
    super(message, { ...options, code: 'LOCK_TIMEOUT' });
  }
}

/** Releasing failed in a way a human should look at (Lucene's `LockReleaseFailedException`). */
export class LockReleaseFailedError extends LockIOError {
  constructor(message: string, options?: LocksmithErrorOptions) {
    super(message, { ...options, code: 'LOCK_RELEASE_FAILED' });
  }
}

/** The lock (or other object) was already closed or invalidated: not an I/O error. */
export class AlreadyClosedError extends LocksmithError {
  constructor(message: string, options?: LocksmithErrorOptions) {
    super('ALREADY_CLOSED', message, options);
  }
}

/**
 * Why a held lock stopped being ours, as the `code` of a {@link LockLostError}:
 *
 * - `LOCK_LOST`: it is proven gone: the lock file was deleted or replaced, the kernel lock or
 *   the lock row was taken by someone else, the holder's connection or session ended.
 * - `LEASE_EXPIRED`: its lease ran out before it was renewed (a row lock not renewed in time,
 *   a database lease whose self-fencing deadline passed).
 * - `LOCK_UNCONFIRMED`: it could not be confirmed in time (an I/O error or an unreachable
 *   database during a keep-alive, a watchdog deadline): someone else may hold it now, so the
 *   holder must act as if it were lost.
 * - `SESSION_EXPIRED`: the server session that owned it ended (its lease ran out).
 * - `MASTER_CHANGED`: the server that granted it is no longer master (a failover): row locks
 *   and sessions do not survive a change of master, acknowledged data does.
 */
export type LockLossCode =
  | 'LOCK_LOST'
  | 'LEASE_EXPIRED'
  | 'LOCK_UNCONFIRMED'
  | 'SESSION_EXPIRED'
  | 'MASTER_CHANGED';

/**
 * A held lock was lost; delivered as the reason of the handle's `signal` and with its `lost`
 * event. `code` says why ({@link LockLossCode}); every loss is this one class, so
 * `instanceof LockLostError` catches them all.
 */
export class LockLostError extends LocksmithError {
  declare readonly code: LockLossCode;

  constructor(message: string, options?: LocksmithErrorOptions & { code?: LockLossCode }) {
    super(options?.code ?? 'LOCK_LOST', message, options);
  }
}

/**
 * A wait was cancelled through its `AbortSignal`. `name` is `AbortError` so that code checking
 * `err.name === 'AbortError'` keeps working; `cause` is the signal's reason.
 */
export class AbortedError extends LocksmithError {
  constructor(message: string, options?: LocksmithErrorOptions) {
    super('ABORTED', message, options);
    this.name = 'AbortError';
  }
}

/** The operation is not supported by this implementation (Java's `UnsupportedOperationException`). */
export class UnsupportedOperationError extends LocksmithError {
  constructor(message: string, options?: LocksmithErrorOptions) {
    super('UNSUPPORTED_OPERATION', message, options);
  }
}

/** A peer broke a wire protocol (bad byte, early EOF). An I/O error, as in Lucene. */
export class ProtocolError extends LockIOError {
  constructor(message: string, options?: LocksmithErrorOptions) {
    super(message, { ...options, code: 'PROTOCOL_ERROR' });
  }
}

/** An independent witness saw mutual exclusion broken (two holders, release by a non-holder). */
export class LockViolationError extends LocksmithError {
  constructor(message: string, options?: LocksmithErrorOptions) {
    super('LOCK_VIOLATION', message, options);
  }
}

/**
 * A row lock id that is unknown, released, expired, or used on a row it was not granted for
 * (HBase's `UnknownRowLockException`, a do-not-retry error).
 */
export class UnknownRowLockError extends LocksmithError {
  constructor(message: string, options?: LocksmithErrorOptions) {
    super('UNKNOWN_ROW_LOCK', message, options);
  }
}

/** Waiting would close a cycle in the wait-for graph; this waiter was chosen to give up. */
export class DeadlockError extends LocksmithError {
  constructor(message: string, options?: LocksmithErrorOptions) {
    super('DEADLOCK', message, options);
  }
}

/** A write carried a fencing token older than one already seen (`STALE_TOKEN`). */
export class StaleTokenError extends LocksmithError {
  constructor(message: string, options?: LocksmithErrorOptions) {
    super('STALE_TOKEN', message, options);
  }
}

/** True for Node system errors (`ENOENT`, `EACCES`, …), optionally of one of the given codes. */
export function isErrno(err: unknown, ...codes: string[]): err is NodeJS.ErrnoException {
  if (!(err instanceof Error) || typeof (err as NodeJS.ErrnoException).code !== 'string') {
    return false;
  }
  return codes.length === 0 || codes.includes((err as NodeJS.ErrnoException).code as string);
}

/**
 * The connection to a locksmith server is gone or could not be made (`CONNECTION_LOST`). A
 * call that failed with it may or may not have been applied by the server; the client retries
 * only what is safe to repeat.
 */
export class ConnectionLostError extends LocksmithError {
  constructor(message: string, options?: LocksmithErrorOptions) {
    super('CONNECTION_LOST', message, options);
  }
}

/** A server with a token refused a client that did not present it (`UNAUTHENTICATED`). */
export class UnauthenticatedError extends LocksmithError {
  constructor(message: string, options?: LocksmithErrorOptions) {
    super('UNAUTHENTICATED', message, options);
  }
}

/** A per-connection or per-session limit was reached; the message names it (`LIMIT_EXCEEDED`). */
export class LimitExceededError extends LocksmithError {
  constructor(message: string, options?: LocksmithErrorOptions) {
    super('LIMIT_EXCEEDED', message, options);
  }
}

/** `TABLE_NOT_FOUND` (no such table) or `TABLE_EXISTS` (a create found one). */
export class TableError extends LocksmithError {
  constructor(
    code: 'TABLE_NOT_FOUND' | 'TABLE_EXISTS',
    message: string,
    options?: LocksmithErrorOptions,
  ) {
    super(code, message, options);
  }
}

/** A server failed in a way it has no other code for; its log has the details (`INTERNAL`). */
export class InternalError extends LocksmithError {
  constructor(message: string, options?: LocksmithErrorOptions) {
    super('INTERNAL', message, options);
  }
}

/**
 * Storage refused a write because a newer master owns it (`FENCED`): a larger epoch (the
 * mastership's fencing token) has opened the storage, or the storage's guard lock is no longer
 * held. A write that fails with it may or may not have reached the disk, but it is never
 * read back unless the new master had already read it when it took over; the process that
 * got it is no longer master and must stop writing.
 */
export class FencedError extends LocksmithError {
  constructor(message: string, options?: LocksmithErrorOptions) {
    super('FENCED', message, options);
  }
}

/**
 * The server called is not the master (`NOT_MASTER`): a slave, or a master that just lost its
 * mastership. `master` is where the current master listens (`host:port`), when known.
 */
export class NotMasterError extends LocksmithError {
  readonly master: string | undefined;

  constructor(message: string, options?: LocksmithErrorOptions & { master?: string | undefined }) {
    super('NOT_MASTER', message, options);
    this.master = options?.master;
  }
}

/**
 * The region called does not hold the row (`NOT_SERVING_REGION`, HBase's
 * `NotServingRegionException`): the region was split (or moved) while the call was on its way
 * or waiting for a row lock. Nothing of the call was applied; a server sends it again to the
 * region that holds the row now, so a client sees it only where it cannot.
 */
export class NotServingRegionError extends LocksmithError {
  constructor(message: string, options?: LocksmithErrorOptions) {
    super('NOT_SERVING_REGION', message, options);
  }
}

/**
 * The one class of each code: what {@link errorFromCode} makes, and what every local throw
 * of that code uses (a test checks both), so `instanceof` answers the same for an error from a
 * server as for one raised in this process.
 */
const ERROR_CLASSES: {
  readonly [C in LocksmithErrorCode]: (
    message: string,
    options?: LocksmithErrorOptions,
  ) => LocksmithError;
} = {
  INVALID_ARGUMENT: (m, o) => new InvalidArgumentError(m, o),
  IO_ERROR: (m, o) => new LockIOError(m, o),
  LOCK_OBTAIN_FAILED: (m, o) => new LockObtainFailedError(m, o),
  LOCK_TIMEOUT: (m, o) => new LockTimeoutError(m, o),
  LOCK_RELEASE_FAILED: (m, o) => new LockReleaseFailedError(m, o),
  ALREADY_CLOSED: (m, o) => new AlreadyClosedError(m, o),
  LOCK_LOST: (m, o) => new LockLostError(m, { ...o, code: 'LOCK_LOST' }),
  LEASE_EXPIRED: (m, o) => new LockLostError(m, { ...o, code: 'LEASE_EXPIRED' }),
  LOCK_UNCONFIRMED: (m, o) => new LockLostError(m, { ...o, code: 'LOCK_UNCONFIRMED' }),
  SESSION_EXPIRED: (m, o) => new LockLostError(m, { ...o, code: 'SESSION_EXPIRED' }),
  MASTER_CHANGED: (m, o) => new LockLostError(m, { ...o, code: 'MASTER_CHANGED' }),
  ABORTED: (m, o) => new AbortedError(m, o),
  UNSUPPORTED_OPERATION: (m, o) => new UnsupportedOperationError(m, o),
  PROTOCOL_ERROR: (m, o) => new ProtocolError(m, o),
  LOCK_VIOLATION: (m, o) => new LockViolationError(m, o),
  UNKNOWN_ROW_LOCK: (m, o) => new UnknownRowLockError(m, o),
  DEADLOCK: (m, o) => new DeadlockError(m, o),
  STALE_TOKEN: (m, o) => new StaleTokenError(m, o),
  CONNECTION_LOST: (m, o) => new ConnectionLostError(m, o),
  UNAUTHENTICATED: (m, o) => new UnauthenticatedError(m, o),
  LIMIT_EXCEEDED: (m, o) => new LimitExceededError(m, o),
  TABLE_NOT_FOUND: (m, o) => new TableError('TABLE_NOT_FOUND', m, o),
  TABLE_EXISTS: (m, o) => new TableError('TABLE_EXISTS', m, o),
  FENCED: (m, o) => new FencedError(m, o),
  NOT_MASTER: (m, o) => new NotMasterError(m, o),
  NOT_SERVING_REGION: (m, o) => new NotServingRegionError(m, o),
  INTERNAL: (m, o) => new InternalError(m, o),
};

/** Every error code. */
export const ERROR_CODES = Object.keys(ERROR_CLASSES) as readonly LocksmithErrorCode[];

export function isErrorCode(code: unknown): code is LocksmithErrorCode {
  return typeof code === 'string' && Object.hasOwn(ERROR_CLASSES, code);
}

/** The error of `code`, of that code's one class. */
export function errorFromCode(
  code: LocksmithErrorCode,
  message: string,
  options?: LocksmithErrorOptions,
): LocksmithError {
  return ERROR_CLASSES[code](message, options);
}
