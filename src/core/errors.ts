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
  | 'MASTER_CHANGED'
  | 'INTERNAL';

export interface LocksmithErrorOptions {
  cause?: unknown;
}

export class LocksmithError extends Error {
  readonly code: LocksmithErrorCode;

  constructor(code: LocksmithErrorCode, message: string, options?: LocksmithErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.name = new.target.name;
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
