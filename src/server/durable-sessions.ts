import { AlreadyClosedError } from '../core/errors.js';
import type { RowLock } from '../rows/row-lock.js';
import type { LockRecords } from './dispatch.js';
import type { Session } from './session.js';
import type { JournalLock, JournalSession, SessionJournal } from './session-journal.js';

/**
 * What a server with durable sessions records, and in which order: a session when it opens,
 * each grant once its session's record is durable (a grant recorded without its session would
 * be dropped at recovery although its client was told), each release once its grant's record
 * is written (else a late grant record would bring back a lock nobody holds), each session's
 * end once its opening record is written. Every record resolves once durable; a failed one
 * goes to `onError` unless a call waits for it (a grant, an unlock), which then fails.
 *
 * Nothing is recorded after {@link detach}: a server that closes or steps down leaves its
 * sessions in the journal for whoever opens it next.
 */
export class DurableSessions implements LockRecords {
  readonly #journal: SessionJournal;
  readonly #onError: (err: unknown) => void;
  /** Sessions whose opening record is not durable yet. */
  readonly #opening = new Map<Session, Promise<void>>();
  /** Grants whose record is not durable yet, by lock id. */
  readonly #granting = new Map<string, Promise<void>>();
  #detached = false;

  constructor(journal: SessionJournal, onError: (err: unknown) => void) {
    this.#journal = journal;
    this.#onError = onError;
  }

  opened(session: Session): void {
    if (this.#detached) return;
    const written = this.#journal.opened(journalSession(session));
    this.#opening.set(session, written);
    written.then(
      () => {
        if (this.#opening.get(session) === written) this.#opening.delete(session);
      },
      (err: unknown) => this.#onError(err),
    );
  }

  granted(session: Session, table: string, lock: RowLock): Promise<void> {
    if (this.#detached) return Promise.reject(detachedError());
    const record = journalLock(session, table, lock);
    const opening = this.#opening.get(session);
    const written =
      opening === undefined
        ? this.#journal.granted(record)
        : opening.then(() => this.#journal.granted(record));
    this.#granting.set(lock.lockId, written);
    const done = (): void => {
      if (this.#granting.get(lock.lockId) === written) this.#granting.delete(lock.lockId);
    };
    written.then(done, done);
    return written;
  }

  released(lockId: string): Promise<void> {
    if (this.#detached) return Promise.resolve();
    const granting = this.#granting.get(lockId);
    const record = () => (this.#detached ? undefined : this.#journal.released(lockId));
    return granting === undefined ? this.#journal.released(lockId) : granting.then(record, record);
  }

  /** The session ended (closed by its client, or its lease ran out): its record goes. */
  ended(session: Session): void {
    if (this.#detached) return;
    const opening = this.#opening.get(session);
    this.#opening.delete(session);
    const record = () => (this.#detached ? undefined : this.#journal.ended(session.key));
    (opening === undefined ? Promise.resolve().then(record) : opening.then(record, record)).catch(
      (err: unknown) => this.#onError(err),
    );
  }

  /**
   * From now on the journal reads the locks that stand from `sessions` (every session of the
   * server) instead of keeping a copy: call once the recorded locks are put back. A lock is a
   * session's from the tick its grant is recorded ({@link granted} is called as it is added)
   * until before its release is recorded, as `SessionJournal.followLocks` requires.
   */
  follow(sessions: () => Iterable<Session>): void {
    this.#journal.followLocks(function* () {
      for (const session of sessions()) {
        for (const [, { table, lock }] of session.locks) yield journalLock(session, table, lock);
      }
    });
  }

  /** From now on nothing is recorded (the server closes or steps down). */
  detach(): void {
    this.#detached = true;
  }
}

function journalSession(session: Session): JournalSession {
  return {
    key: session.key,
    leaseMs: session.leaseMs,
    releaseOnDisconnect: session.releaseOnDisconnect,
    client: session.client,
  };
}

function journalLock(session: Session, table: string, lock: RowLock): JournalLock {
  return {
    lockId: lock.lockId,
    table,
    row: lock.rowKey,
    token: lock.token,
    session: session.key,
    renew: lock.leaseRemainingMs === Number.POSITIVE_INFINITY,
  };
}

function detachedError(): AlreadyClosedError {
  return new AlreadyClosedError(
    'The server is closing or stepping down: the grant cannot be recorded',
  );
}
