/**
 * What a database locker does when a keep-alive (a lease renewal, a held-connection update)
 * fails with an error, so that ownership is unknown: ActiveMQ's `IOExceptionHandler`, applied
 * inside the locker's `keepAlive()` (the hook: the supervisor needs no change).
 *
 * The policy answers `'owner'` (keepAlive resolves true: ownership was confirmed after all),
 * `'lost'` (keepAlive resolves false: the supervisor stops the service at once, whatever its
 * `stopOnError`) or `'unknown'` (keepAlive rejects with the error: the supervisor logs it and,
 * without `stopOnError`, stays master). `recheck()` asks the database again whether we
 * still own the lock (true/false), and rejects when it cannot tell.
 */
export interface IOErrorPolicy {
  readonly name: string;
  handle(error: unknown, context: IOErrorContext): Promise<IOErrorVerdict>;
}

export type IOErrorVerdict = 'owner' | 'lost' | 'unknown';

export interface IOErrorContext {
  /** The locker's name, for messages. */
  locker: string;
  /** One more ownership check against the database. */
  recheck(): Promise<boolean>;
}

/**
 * ActiveMQ's `DefaultIOExceptionHandler` with its defaults (`ignoreSQLExceptions` true, and an
 * empty match string that matches every SQL error): every database error is ignored. Kept for
 * faithfulness only: during an outage the master keeps serving while its lease expires, and
 * there are two masters until its next successful renewal returns false.
 */
export const ignoreIOErrors: IOErrorPolicy = Object.freeze({
  name: 'ignore (ActiveMQ DefaultIOExceptionHandler)',
  handle: async (): Promise<IOErrorVerdict> => 'unknown',
});

/**
 * ActiveMQ's `LeaseLockerIOExceptionHandler` (AMQ-5174): SQL errors are not ignored;
 * ownership is asked of the locker again; only an authoritative "no" (false) stops the
 * service, while an error during that check counts as "still owner".
 */
export const leaseLockerIOErrorPolicy: IOErrorPolicy = Object.freeze({
  name: 'lease-locker (ActiveMQ LeaseLockerIOExceptionHandler)',
  handle: async (_error: unknown, context: IOErrorContext): Promise<IOErrorVerdict> => {
    // Faithful: the renewal still throws after a good check (ActiveMQ rethrows).
    try {
      return (await context.recheck()) ? 'unknown' : 'lost';
    } catch {
      return 'unknown';
    }
  },
});

/**
 * The safe default: ownership must be confirmed or mastership ends. One recheck; true keeps
 * mastership (the error was transient), false or an error gives it up at once, long before
 * the lease could expire under a master that still serves. (For the lease locker the
 * self-fencing deadline is a second net; for the held-transaction locker a failed keep-alive
 * is ActiveMQ's own behaviour: false, never a throw.)
 */
export const stopOnUnknownOwnership: IOErrorPolicy = Object.freeze({
  name: 'stop on unknown ownership (default)',
  handle: async (_error: unknown, context: IOErrorContext): Promise<IOErrorVerdict> => {
    try {
      return (await context.recheck()) ? 'owner' : 'lost';
    } catch {
      return 'lost';
    }
  },
});

export function isIOErrorPolicy(value: unknown): value is IOErrorPolicy {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as IOErrorPolicy).handle === 'function' &&
    typeof (value as IOErrorPolicy).name === 'string'
  );
}
