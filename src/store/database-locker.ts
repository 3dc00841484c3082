import { LockIOError, LockLostError, LockObtainFailedError } from '../core/errors.js';
import {
  customOption,
  durationOption,
  positiveDurationOption,
  readOptions,
  type SpecOf,
  withAliases,
  withDefault,
} from '../core/option-spec.js';
import { abortableSleep } from '../core/wait.js';
import { AbstractLocker, type AcquireContext } from './abstract-locker.js';
import {
  checkStatement,
  DATABASE_LOCKER_COMMON_SPEC,
  type DatabaseLockerCommonOptions,
} from './database-locker-options.js';
import { describe } from './describe-error.js';
import { type Dialect, type SqlConnection, withTimeout } from './sql/dialect.js';
import { DATABASE_HOLD_MS, ensureLockTable, type LockRow, readLockRow } from './sql/lock-table.js';
import { type DatabaseSource, openDialect } from './sql/open-dialect.js';

/**
 * Keep-alive period suggested to the supervisor (ms). ActiveMQ's JDBC default is 30 000; a
 * keep-alive is what notices a half-open connection, and the takeover pause of the next master
 * is this period plus {@link DEFAULT_DATABASE_QUERY_TIMEOUT}, so a shorter period is both safer
 * and faster.
 */
export const DEFAULT_DATABASE_KEEP_ALIVE_PERIOD = 5_000;
/** Limit on the keep-alive statement (ms): past it the keep-alive is false. */
export const DEFAULT_DATABASE_QUERY_TIMEOUT = 2_000;

export interface DatabaseLockerOptions extends DatabaseLockerCommonOptions {
  /**
   * Override of the lock statement run inside the transaction (default
   * `SELECT * FROM <table> WHERE ID = 1 FOR UPDATE`; SQLite `SELECT ID FROM <table> WHERE
   * ID = 1` after `BEGIN IMMEDIATE`). ActiveMQ's own default has no WHERE clause.
   */
  lockStatement?: string | undefined;
  /** Limit on the keep-alive statement, ms (2 000); past it keepAlive is false. Alias `queryTimeout`. */
  queryTimeoutMs?: number | undefined;
  /**
   * How long a new master waits after taking the row lock before it reports mastership, so a
   * previous master whose connection was killed has noticed (by the connection's error, or at
   * the latest by its next keep-alive failing) and stopped. Default keep-alive period +
   * `queryTimeoutMs`; 0 is ActiveMQ's behaviour (no pause).
   */
  takeoverPauseMs?: number | undefined;
}

export const DATABASE_LOCKER_SPEC = {
  ...DATABASE_LOCKER_COMMON_SPEC,
  lockStatement: customOption('a non-empty SQL string', (value, label) =>
    checkStatement(value, label),
  ),
  queryTimeoutMs: withAliases(
    withDefault(positiveDurationOption(), DEFAULT_DATABASE_QUERY_TIMEOUT),
    'queryTimeout',
  ),
  takeoverPauseMs: {
    ...durationOption(),
    defaultText: 'the keep-alive period + queryTimeoutMs',
  },
} as const satisfies SpecOf<DatabaseLockerOptions>;

interface Held {
  conn: SqlConnection;
  token: number;
}

/**
 * ActiveMQ's `DefaultDatabaseLocker`: mastership is a row lock held by an open transaction on
 * a dedicated connection, for as long as the process is master.
 *
 * - Acquire: on a fresh connection, `BEGIN`, then the lock statement (SELECT … FOR UPDATE),
 *   waiting in the database at most `acquireIntervalMs` (PostgreSQL `lock_timeout`,
 *   InnoDB `innodb_lock_wait_timeout` in whole seconds), then again. SQLite: `BEGIN IMMEDIATE`
 *   (the database's write lock) with busy timeout 0, retried every interval, so the event
 *   loop never blocks. A stop during the wait drops the connection, which ends the wait.
 *   `failIfLocked` rejects instead of waiting (ActiveMQ ignores it here).
 * - Fencing token: inside the held transaction EPOCH becomes `max(EPOCH + 1, database time in
 *   µs)`. The write commits only at a graceful stop (the transaction is held until then); after
 *   a crash it is rolled back, and the next master's token is still larger because of the
 *   database-time floor. So tokens strictly increase across takeovers and restarts as long as
 *   the database's clock does not go back by more than the time between two grants.
 * - `keepAlive()`: `UPDATE … SET TIME = now WHERE ID = 1` on the held connection within
 *   `queryTimeoutMs`; true iff 1 row. Any error is false, never a throw (ActiveMQ).
 * - Loss of the connection (killed, network, database restart) is loss of the lock: `lost`
 *   fires at once and keepAlive is false.
 * - `stop()`: commits (EPOCH becomes durable) and closes the connection; the row lock goes
 *   with it. The first start fails fast when the database is unreachable.
 *
 * Weaknesses (ActiveMQ's, documented): a half-open master connection keeps the lock until the
 * database notices (TCP keepalive); the takeover pause covers a master that is alive but slow
 * to notice, not a database that never frees the lock.
 */
export class DatabaseLocker extends AbstractLocker {
  readonly lockTableName: string;
  readonly createTablesOnStartup: boolean;
  readonly queryTimeoutMs: number;
  readonly takeoverPauseMs: number | undefined;
  readonly defaultKeepAlivePeriodMs = DEFAULT_DATABASE_KEEP_ALIVE_PERIOD;
  readonly #source: DatabaseSource;
  readonly #lockStatement: string | undefined;
  #dialect: Dialect | undefined;
  #held: Held | undefined;
  #everStarted = false;

  constructor(options: DatabaseLockerOptions) {
    const o = readOptions(options, 'DatabaseLocker options', DATABASE_LOCKER_SPEC);
    super(o, `database lock ${o.lockTableName}`);
    this.#dialect = openDialect(o.database);
    this.#source = o.database as DatabaseSource;
    this.#lockStatement = o.lockStatement;
    this.lockTableName = o.lockTableName;
    this.createTablesOnStartup = o.createTablesOnStartup;
    this.queryTimeoutMs = o.queryTimeoutMs;
    this.takeoverPauseMs = o.takeoverPauseMs;
  }

  /** The database session holding the lock (PostgreSQL backend pid, MySQL connection id). */
  get sessionId(): number | undefined {
    return this.#held?.conn.sessionId;
  }

  #lockSql(dialect: Dialect): string {
    if (this.#lockStatement !== undefined) return this.#lockStatement;
    return dialect.kind === 'sqlite'
      ? `SELECT ID FROM ${this.lockTableName} WHERE ID = 1`
      : `SELECT * FROM ${this.lockTableName} WHERE ID = 1 FOR UPDATE`;
  }

  protected async doStart(context: AcquireContext): Promise<number> {
    try {
      return await this.#acquire(context);
    } catch (err) {
      const dialect = this.#dialect;
      this.#dialect = undefined;
      await dialect?.close().catch(() => {});
      throw err;
    }
  }

  async #acquire({ signal, keepAlivePeriodMs }: AcquireContext): Promise<number> {
    this.#dialect ??= openDialect(this.#source);
    const dialect = this.#dialect;
    if (this.createTablesOnStartup) {
      try {
        await ensureLockTable(dialect, this.lockTableName);
      } catch (err) {
        if (!this.#everStarted) throw err;
        this.logger.warn(`Lock table check failed, retrying: ${describe(err)} (${this.name})`);
      }
    }
    const interval = this.acquireIntervalMs;
    let waited = false;
    // Set once a session of this start was lost (the database restarted or killed it): from
    // then on failures are an outage to wait out, not a misconfiguration to report at once.
    let outage = false;
    for (;;) {
      if (signal.aborted) throw signal.reason;
      let conn: SqlConnection | undefined;
      const onAbort = () => conn?.destroy();
      signal.addEventListener('abort', onAbort, { once: true });
      try {
        conn = await dialect.connect();
        if (signal.aborted) throw signal.reason;
        const got = await dialect.beginRowLock(
          conn,
          this.#lockSql(dialect),
          this.failIfLocked ? 1 : Math.max(1, interval),
        );
        if (!got) {
          await conn.release();
          conn = undefined;
          if (this.failIfLocked) {
            throw new LockObtainFailedError(
              `Lock row of ${this.lockTableName} on ${dialect.description} is held by another session (${this.name})`,
            );
          }
          if (!waited) {
            this.logger.info(
              `Lock row of ${this.lockTableName} on ${dialect.description} is held by another session. This broker is now in slave mode waiting a lock to be acquired (${this.name})`,
            );
            waited = true;
          } else {
            this.logger.debug(`Lock row still held; retrying (${this.name})`);
          }
          // PostgreSQL and MariaDB waited in the database already; SQLite never waits there.
          if (dialect.kind === 'sqlite')
            await abortableSleep(interval, signal, this.clock, 'lock acquire');
          continue;
        }
        const lease = await this.#liveLease(dialect, conn);
        if (lease !== undefined) {
          // A lease locker (ours or an ActiveMQ broker's) is master until its TIME: the row
          // lock alone does not show it, since a lease holder holds no transaction.
          await conn.query('ROLLBACK');
          await conn.release();
          conn = undefined;
          const by = `leased by ${lease.holder ?? '(nobody)'} until ${formatDbTime(lease.time)} (database time now ${formatDbTime(lease.now)})`;
          if (this.failIfLocked) {
            throw new LockObtainFailedError(
              `Lock row of ${this.lockTableName} on ${dialect.description} is ${by} (${this.name})`,
            );
          }
          if (!waited) {
            this.logger.info(
              `Lock row of ${this.lockTableName} on ${dialect.description} is ${by}. This broker is now in slave mode waiting a lock to be acquired (${this.name})`,
            );
            waited = true;
          } else {
            this.logger.debug(`Lock row still ${by}; retrying (${this.name})`);
          }
          // Until the lease's expiry, or one interval if that comes first (it may be renewed,
          // or released early: either way the next look decides).
          await abortableSleep(
            Math.max(1, Math.min(interval, lease.time - lease.now + 1)),
            signal,
            this.clock,
            'lock acquire',
          );
          continue;
        }
        const token = await this.#claim(dialect, conn);
        const held: Held = { conn, token };
        conn.onBroken((error) => {
          if (this.#held !== held) return;
          this.logger.warn(
            `Connection holding the lock was lost: ${describe(error)} (${this.name})`,
          );
          this.markLost(
            new LockLostError(
              `Connection holding the lock row of ${this.lockTableName} on ${dialect.description} was lost: ${describe(error)} (${this.name})`,
              { cause: error },
            ),
          );
        });
        const pause =
          this.takeoverPauseMs ??
          (keepAlivePeriodMs > 0 ? keepAlivePeriodMs + this.queryTimeoutMs : 0);
        if (pause > 0) {
          await abortableSleep(pause, signal, this.clock, 'takeover pause');
          if (conn.broken || !(await this.#update(conn).catch(() => false))) {
            // Lost before we ever acted as master: nothing to report, wait again.
            this.logger.warn(
              `Lock row of ${this.lockTableName} was lost during the takeover pause of ${pause} ms; waiting again (${this.name})`,
            );
            conn.destroy();
            conn = undefined;
            waited = true;
            continue;
          }
        }
        this.#held = held;
        this.#everStarted = true;
        this.logger.info(
          `Lock row of ${this.lockTableName} on ${dialect.description} acquired, fencing token ${token} (${this.name})`,
        );
        return token;
      } catch (err) {
        if (conn !== undefined && sessionLost(conn, err)) outage = true;
        conn?.destroy();
        if (signal.aborted) throw signal.reason;
        if (err instanceof LockObtainFailedError) throw err;
        if (!this.#everStarted && !waited && !outage) {
          throw new LockIOError(
            `Failed to acquire lock on ${dialect.description}: ${describe(err)} (${this.name})`,
            { cause: err },
          );
        }
        this.logger.info(
          `Failed to acquire lock. Sleeping for ${interval} milli(s) before trying again: ${describe(err)} (${this.name})`,
        );
        await abortableSleep(interval, signal, this.clock, 'lock acquire');
      } finally {
        signal.removeEventListener('abort', onAbort);
      }
    }
  }

  /**
   * Inside the held transaction, with the row lock: the lease the row records, if it is live
   * (TIME not before the database's now), so a lease master is not joined by this one.
   */
  async #liveLease(
    dialect: Dialect,
    conn: SqlConnection,
  ): Promise<(LockRow & { time: number; now: number }) | undefined> {
    const forUpdate = dialect.kind === 'sqlite' ? '' : ' FOR UPDATE';
    const row = readLockRow(
      (
        await conn.query(
          `SELECT BROKER_NAME, TIME, ${dialect.nowMs} AS NOW_MS FROM ${this.lockTableName} WHERE ID = 1${forUpdate}`,
        )
      ).rows[0],
    );
    const { time, now } = row;
    if (time === undefined || now === undefined || time < now) return undefined;
    return { ...row, time, now };
  }

  /**
   * Inside the held transaction: bump EPOCH (our token), and mark the row as held by us for a
   * day (BROKER_NAME, TIME), so that whoever reads it inside the lock sees a live hold. None of
   * it is visible outside until the commit at stop, which first resets the hold.
   */
  async #claim(dialect: Dialect, conn: SqlConnection): Promise<number> {
    const t = this.lockTableName;
    await conn.query(
      `UPDATE ${t} SET TIME = ${dialect.nowMs} + ${DATABASE_HOLD_MS}, BROKER_NAME = ?, EPOCH = ${dialect.greatest('COALESCE(EPOCH, 0) + 1', dialect.nowUs)} WHERE ID = 1`,
      [this.name.slice(0, 250)],
    );
    const row = readLockRow((await conn.query(`SELECT EPOCH FROM ${t} WHERE ID = 1`)).rows[0]);
    if (row.epoch === undefined) throw new LockIOError(`Lock row of ${t} has no EPOCH`);
    return row.epoch;
  }

  /** The keep-alive statement on the held connection; true iff exactly 1 row. */
  async #update(conn: SqlConnection): Promise<boolean> {
    const dialect = this.#dialect;
    if (dialect === undefined) return false;
    const r = await withTimeout(
      conn.query(
        `UPDATE ${this.lockTableName} SET TIME = ${dialect.nowMs} + ${DATABASE_HOLD_MS} WHERE ID = 1`,
      ),
      this.queryTimeoutMs,
      () => new LockIOError(`keep-alive took more than ${this.queryTimeoutMs} ms`),
    );
    return r.affected === 1;
  }

  protected async doKeepAlive(): Promise<boolean> {
    const held = this.#held;
    if (held === undefined || held.conn.broken) return false;
    try {
      return await this.#update(held.conn);
    } catch (err) {
      this.logger.warn(`Keep-alive on the held connection failed: ${describe(err)} (${this.name})`);
      return false;
    }
  }

  protected async doStop(): Promise<void> {
    const held = this.#held;
    this.#held = undefined;
    const dialect = this.#dialect;
    this.#dialect = undefined;
    if (held !== undefined && !held.conn.broken) {
      try {
        // The hold mark goes before the commit: committed, it would read as a day's lease.
        await withTimeout(
          (async () => {
            await held.conn.query(
              `UPDATE ${this.lockTableName} SET TIME = 0, BROKER_NAME = NULL WHERE ID = 1`,
            );
            await held.conn.query('COMMIT');
          })(),
          this.queryTimeoutMs,
          () => new LockIOError('commit timed out'),
        );
        await held.conn.release();
      } catch (err) {
        // Destroyed below: the transaction rolls back, hold mark and EPOCH bump alike (the
        // next token is still larger: EPOCH has the database's time as its floor).
        this.logger.warn(`Releasing the lock row failed: ${describe(err)} (${this.name})`);
      }
    }
    held?.conn.destroy();
    await dialect?.close().catch(() => {});
  }

  override toString(): string {
    return `DatabaseLocker(${this.name})`;
  }
}

/** A database time (epoch ms) for messages: ISO 8601, or `?`. */
function formatDbTime(ms: number): string {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? String(ms) : d.toISOString();
}

/**
 * Whether `err` on `conn` means the session itself died (killed, server shut down or crashed,
 * network gone), as opposed to an error in a statement: the driver marked the connection
 * broken, or the error says so (PostgreSQL SQLSTATE class 08 and 57P01-57P03, mysql2's
 * connection-lost codes), since the driver's close event may come after the rejection.
 */
function sessionLost(conn: SqlConnection, err: unknown): boolean {
  if (conn.broken) return true;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return false;
  return (
    code.startsWith('08') ||
    ['57P01', '57P02', '57P03'].includes(code) ||
    ['PROTOCOL_CONNECTION_LOST', 'ER_SERVER_SHUTDOWN', 'ECONNRESET', 'EPIPE'].includes(code)
  );
}
