import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import {
  InvalidArgumentError,
  LockIOError,
  type LockLossCode,
  LockLostError,
  LockObtainFailedError,
} from '../core/errors.js';
import {
  booleanOption,
  customOption,
  durationOption,
  positiveDurationOption,
  readOptions,
  type SpecOf,
  stringOption,
  withAliases,
  withDefault,
} from '../core/option-spec.js';
import { abortableSleep } from '../core/wait.js';
import { AbstractLocker, type AcquireContext } from './abstract-locker.js';
import {
  DATABASE_LOCKER_COMMON_SPEC,
  type DatabaseLockerCommonOptions,
} from './database-locker-options.js';
import { describe } from './describe-error.js';
import { type IOErrorPolicy, isIOErrorPolicy, stopOnUnknownOwnership } from './io-error-policy.js';
import { MAX_RENEW_FRACTION, MIN_LEASE_MS } from './lease-rules.js';
import { checkLeaseStatements, type LeaseStatements, leaseStatements } from './lease-statements.js';
import { DEFAULT_ACQUIRE_INTERVAL_MS } from './locker.js';
import { watchSelfFencing } from './self-fencing-watch.js';
import { type Dialect, withTimeout } from './sql/dialect.js';
import {
  ensureLockTable,
  isUnreachable,
  type LockRow,
  readLockRow,
  rowLockStatement,
} from './sql/lock-table.js';
import { type DatabaseSource, openDialect } from './sql/open-dialect.js';

export interface LeaseDatabaseLockerOptions
  extends Omit<DatabaseLockerCommonOptions, 'acquireIntervalMs'> {
  /**
   * The lease, ms (10 000, at least 1 000: a shorter lease leaves no time to renew it on a
   * busy machine). ActiveMQ's semantics: also the retry period while another holds it, and
   * its name for it, `lockAcquireSleepInterval`, is accepted as an alias.
   */
  leaseMs?: number | undefined;
  /**
   * Who holds the lease; must be unique among the contenders (at most 250 characters).
   * Default `<hostname>:<pid>:<8 random hex digits>`: unique per locker instance, readable in
   * the table. (ActiveMQ defaults to the broker name; two brokers with the same name would
   * renew each other's lease, which the EPOCH check in our renewal also prevents.)
   */
  leaseHolderId?: string | undefined;
  /**
   * ActiveMQ's skew check (ms, default 0): above 0, the database's time is queried once per
   * start and, when it differs from the local clock by more than this, the difference
   * (db − local) becomes {@link LeaseDatabaseLocker.timeOffset} and a WARN is logged. Our
   * expiry never needs it (it is judged on the database's clock in the statement); the
   * offset is what an ActiveMQ broker on the same table would apply.
   */
  maxAllowableDiffFromDBTimeMs?: number | undefined;
  /**
   * Self-fencing: mastership ends (`lost`) when no renewal succeeded for `lease − margin` ms
   * on the local monotonic clock, counted from when the last good renewal was SENT (the
   * database's expiry is later than that), even if the database call hangs. The margin is
   * the budget to stop the service and absorb clock-rate drift. Default lease / 4; must be
   * > 0 and < lease.
   */
  selfFencingMarginMs?: number | undefined;
  /**
   * A stall of the event loop longer than this (ms) ends mastership like a missed renewal:
   * during a stall the master could not have reacted to its deadline. Default: the margin.
   */
  maxEventLoopLagMs?: number | undefined;
  /** Acquire errors reject `start()` instead of being retried (false, AMQ-5162). */
  handleStartException?: boolean | undefined;
  /** Create the table and seed row if missing (true; ActiveMQ's locker: false). */
  createTablesOnStartup?: boolean | undefined;
  /** Limit per statement, ms (default: the lease). 0: none. Alias `queryTimeout`. */
  queryTimeoutMs?: number | undefined;
  statements?: Partial<LeaseStatements> | undefined;
  /** What a failing renewal means (default {@link stopOnUnknownOwnership}). */
  ioErrorPolicy?: IOErrorPolicy | undefined;
}

const { acquireIntervalMs: _interval, ...COMMON_WITHOUT_INTERVAL } = DATABASE_LOCKER_COMMON_SPEC;

export const LEASE_DATABASE_LOCKER_SPEC = {
  ...COMMON_WITHOUT_INTERVAL,
  leaseMs: withAliases(
    withDefault(durationOption(MIN_LEASE_MS), DEFAULT_ACQUIRE_INTERVAL_MS),
    'lockAcquireSleepInterval',
  ),
  leaseHolderId: { ...stringOption(250), defaultText: '<hostname>:<pid>:<8 random hex digits>' },
  maxAllowableDiffFromDBTimeMs: withAliases(
    withDefault(durationOption(), 0),
    'maxAllowableDiffFromDBTime',
  ),
  selfFencingMarginMs: { ...positiveDurationOption(), defaultText: 'leaseMs / 4' },
  maxEventLoopLagMs: { ...positiveDurationOption(), defaultText: 'selfFencingMarginMs' },
  handleStartException: withDefault(booleanOption(), false),
  queryTimeoutMs: withAliases({ ...durationOption(), defaultText: 'leaseMs' }, 'queryTimeout'),
  statements: customOption(
    'an object of SQL strings: acquire, renew, release, select, dbTime',
    checkLeaseStatements,
  ),
  ioErrorPolicy: withDefault(
    customOption('an I/O error policy (a name and a handle() method)', (value) => {
      if (!isIOErrorPolicy(value)) {
        throw new InvalidArgumentError('ioErrorPolicy must have a name and a handle() method');
      }
      return value;
    }),
    stopOnUnknownOwnership,
    'stopOnUnknownOwnership',
  ),
} as const satisfies SpecOf<LeaseDatabaseLockerOptions>;

interface Held {
  epoch: number;
  /** Monotonic ms after which we no longer count ourselves master. */
  deadline: number;
  lost: boolean;
  readonly stop: AbortController;
  readonly lostPromise: Promise<false>;
  resolveLost(): void;
}

/**
 * ActiveMQ's `LeaseDatabaseLocker` (AMQ-3654), made safe: one master per lease row.
 *
 * - Lease = `leaseMs` (>= 1 s; ActiveMQ's `lockAcquireSleepInterval`, also the retry
 *   period); renewal = each `keepAlive()`, i.e. the supervisor's `keepAlivePeriodMs`, by
 *   default lease / 4 ({@link defaultKeepAlivePeriodMs}). `start()` refuses a period over 3/8
 *   of the lease (ActiveMQ's JDBC default of 30 s against a 10 s lease lets the lease expire;
 *   ActiveMQ only warns) and warns about a period of 0.
 * - Acquire: the `acquire` statement, then the row is read back (holder = us, EPOCH = the
 *   token) and one renewal confirms it. Held elsewhere: `failIfLocked` rejects; otherwise the
 *   locker sleeps until the lease's expiry on the database's clock or for one renew period
 *   (`keepAlivePeriodMs`; the lease when that is 0 or longer), whichever is shorter, and
 *   tries again: a lease released on stop is taken over within about one renew period.
 * - No post-acquire pause: a previous master that lost its lease without knowing it has
 *   self-fenced (`lease − margin` after its last renewal) before the lease could expire, and
 *   a released lease (holder NULL, TIME 0) was given back by a master that had stopped.
 * - `keepAlive()`: the `renew` statement; 1 row → true; 0 → false (owner logged); an error →
 *   the I/O error policy decides (see `io-error-policy.ts`). Resolves false at once when the
 *   self-fencing deadline passes while it waits.
 * - Self-fencing and event-loop-lag watchdog: see the options; either emits `lost`.
 * - `stop()`: releases (holder NULL, TIME 0, where holder and EPOCH are ours) and closes the
 *   pool it opened.
 * - The first `start()` fails fast with a {@link LockIOError} when the database is
 *   unreachable or the table cannot be created; once it has worked, later acquire errors are
 *   logged and retried (unless `handleStartException`).
 *
 * Failure windows: after `kill -9` of the master a slave takes over at most one lease after
 * the master's last renewal (plus one poll); after a graceful stop, within about one renew
 * period. A paused or partitioned master stops at `lease − margin` after its last renewal was
 * sent, before the lease can expire.
 */
export class LeaseDatabaseLocker extends AbstractLocker {
  readonly lockTableName: string;
  readonly leaseHolderId: string;
  /** The lease, ms; also the retry period while another process holds it. */
  readonly leaseMs: number;
  readonly maxAllowableDiffFromDBTimeMs: number;
  readonly selfFencingMarginMs: number;
  readonly maxEventLoopLagMs: number;
  readonly handleStartException: boolean;
  readonly createTablesOnStartup: boolean;
  readonly queryTimeoutMs: number;
  readonly ioErrorPolicy: IOErrorPolicy;
  readonly defaultKeepAlivePeriodMs: number;
  readonly #source: DatabaseSource;
  readonly #overrides: Partial<LeaseStatements>;
  #dialect: Dialect | undefined;
  #statements: LeaseStatements | undefined;
  #held: Held | undefined;

  /** The self-fencing deadline: `lease − margin` after the last successful renewal was sent. */
  override get validUntil(): number | undefined {
    const held = this.#held;
    return held === undefined || held.lost || !this.held ? undefined : held.deadline;
  }
  #everStarted = false;
  #timeOffset = 0;

  constructor(options: LeaseDatabaseLockerOptions) {
    const o = readOptions(options, 'LeaseDatabaseLocker options', LEASE_DATABASE_LOCKER_SPEC);
    const holder = o.leaseHolderId ?? defaultLeaseHolderId();
    const lease = o.leaseMs;
    super({ ...o, acquireIntervalMs: lease }, `lease ${holder} on ${o.lockTableName}`);
    const margin = o.selfFencingMarginMs ?? lease / 4;
    if (margin >= lease) {
      throw new InvalidArgumentError(
        `selfFencingMarginMs must be > 0 and < the lease (${lease} ms), got ${margin}`,
      );
    }
    this.leaseMs = lease;
    this.maxAllowableDiffFromDBTimeMs = o.maxAllowableDiffFromDBTimeMs;
    this.maxEventLoopLagMs = o.maxEventLoopLagMs ?? margin;
    this.queryTimeoutMs = o.queryTimeoutMs ?? lease;
    this.handleStartException = o.handleStartException;
    this.createTablesOnStartup = o.createTablesOnStartup;
    this.#dialect = openDialect(o.database);
    this.#source = o.database as DatabaseSource;
    this.#overrides = o.statements ?? {};
    this.lockTableName = o.lockTableName;
    this.leaseHolderId = holder;
    this.selfFencingMarginMs = margin;
    this.ioErrorPolicy = o.ioErrorPolicy;
    this.defaultKeepAlivePeriodMs = Math.floor(lease / 4);
  }

  /**
   * The lease rule for renewals: a keep-alive period longer than 3/8 of the lease (or not
   * shorter than it) lets the lease lapse, or the master self-fence, between two renewals.
   * 0 (no keep-alive told) is allowed: mastership then self-fences `lease − margin` after the
   * acquisition unless the caller renews on its own.
   */
  protected override checkKeepAlivePeriod(period: number): void {
    const lease = this.leaseMs;
    if (period > lease * MAX_RENEW_FRACTION) {
      throw new InvalidArgumentError(
        `keepAlivePeriodMs (${period} ms) must be at most 3/8 of the lease (${lease} ms), e.g. ${Math.floor(lease / 4)} ms: a lease renewed more slowly lapses, or its master self-fences, between renewals`,
      );
    }
  }

  /** ActiveMQ's db − local offset from the skew check (0 unless over the maximum). */
  get timeOffset(): number {
    return this.#timeOffset;
  }

  #setup(): { dialect: Dialect; statements: LeaseStatements } {
    this.#dialect ??= openDialect(this.#source);
    this.#statements ??= leaseStatements(this.#dialect, this.lockTableName, this.#overrides);
    return { dialect: this.#dialect, statements: this.#statements };
  }

  /** One statement within `queryTimeout`; past it, its connection is dropped (see queryWithin). */
  #query(sql: string, params: readonly unknown[] = []) {
    const { dialect } = this.#setup();
    return dialect.queryWithin(
      sql,
      params,
      this.queryTimeoutMs,
      () =>
        new LockIOError(
          `Statement on ${dialect.description} took more than ${this.queryTimeoutMs} ms (${this.name})`,
        ),
    );
  }

  protected async doStart(context: AcquireContext): Promise<number> {
    try {
      return await this.#acquire(context);
    } catch (err) {
      // Holding nothing: close the pool we opened (a later start opens a new one).
      const dialect = this.#dialect;
      this.#dialect = undefined;
      this.#statements = undefined;
      await dialect?.close().catch(() => {});
      throw err;
    }
  }

  async #acquire({ signal, keepAlivePeriodMs }: AcquireContext): Promise<number> {
    const { dialect, statements } = this.#setup();
    this.#warnPeriods(keepAlivePeriodMs);
    try {
      if (this.createTablesOnStartup) await ensureLockTable(dialect, this.lockTableName);
      await this.#checkSkew(statements);
    } catch (err) {
      if (!this.#everStarted || this.handleStartException) throw err;
      this.logger.warn(`Lease locker set-up failed, retrying: ${describe(err)} (${this.name})`);
    }
    const lease = this.leaseMs;
    const poll = standbyPollPeriod(lease, keepAlivePeriodMs);
    let waited = false;
    for (;;) {
      if (signal.aborted) throw signal.reason;
      let row: LockRow;
      try {
        const sent = this.clock.monotonic();
        const taken = await this.#takeUnderRowLock(dialect, statements, signal, poll);
        if (taken === 'row-locked') {
          const who = `the lock row (a DatabaseLocker's or an ActiveMQ broker's transaction holds it)`;
          if (this.failIfLocked) {
            throw new LockObtainFailedError(
              `Lease ${this.lockTableName} on ${dialect.description} is held by another session: ${who} (${this.name})`,
            );
          }
          if (!waited) {
            this.logger.info(
              `Lease ${this.lockTableName} is held by another session: ${who}. This broker is now in slave mode waiting a lock to be acquired (${this.name})`,
            );
            waited = true;
          } else {
            this.logger.debug(`Lock row of ${this.lockTableName} still locked (${this.name})`);
          }
          // PostgreSQL and MariaDB waited in the database already; SQLite never waits there.
          if (dialect.kind === 'sqlite') {
            await abortableSleep(poll, signal, this.clock, 'lease acquire');
          }
          continue;
        }
        if (taken) {
          const token = await this.#confirm(statements, sent);
          if (token !== undefined) return token;
        }
        row = readLockRow((await this.#query(statements.select)).rows[0]);
      } catch (err) {
        if (err instanceof LockObtainFailedError) throw err;
        if (signal.aborted) throw signal.reason;
        // Fail fast only while the first start has never reached the database (a wrong URL,
        // credentials, database): once it has waited as a slave, an unreachable database is an
        // outage (a restart), and a slave waits it out like a demoted master does.
        if (this.handleStartException || (!this.#everStarted && !waited && isUnreachable(err))) {
          throw new LockIOError(
            `Lease acquire on ${dialect.description} failed: ${describe(err)} (${this.name})`,
            { cause: err },
          );
        }
        this.logger.warn(
          `Lease acquire on ${dialect.description} failed: ${describe(err)}; retrying in ${lease} ms (${this.name})`,
        );
        await abortableSleep(lease, signal, this.clock, 'lease acquire');
        continue;
      }
      const owner = `${row.holder ?? '(nobody)'} until ${row.time ?? '?'} (database time now ${row.now ?? '?'})`;
      if (this.failIfLocked) {
        throw new LockObtainFailedError(
          `Lease ${this.lockTableName} on ${dialect.description} is held by ${owner} (${this.name})`,
        );
      }
      if (!waited) {
        this.logger.info(
          `Lease ${this.lockTableName} is held by ${owner}. This broker is now in slave mode waiting a lock to be acquired (${this.name})`,
        );
        waited = true;
      } else {
        this.logger.debug(`Lease still held by ${owner} (${this.name})`);
      }
      // Wake when the lease expires on the database's clock, or after one poll period if that
      // comes first: a graceful release (holder NULL, TIME 0) frees the lease before its expiry
      // and nothing tells a standby, so it has to look. Waking early is always safe: the
      // acquire statement still takes the lease only when free or expired on the DB clock.
      const untilExpiry =
        row.time !== undefined && row.now !== undefined ? row.time - row.now + 1 : poll;
      await abortableSleep(
        Math.min(poll, Math.max(1, untilExpiry)),
        signal,
        this.clock,
        'lease acquire',
      );
    }
  }

  /**
   * The `acquire` statement inside a transaction that first locks the lock row (SELECT … FOR
   * UPDATE; SQLite: `BEGIN IMMEDIATE`), waiting for it at most `waitMs` in the database. A
   * {@link DatabaseLocker} (ours or ActiveMQ's) is master exactly while its transaction holds
   * that row lock, so a lease is never taken beside it: `'row-locked'` then. Otherwise true
   * when the lease was taken (and committed), false when it is held. A stop ends the wait by
   * dropping the connection (which rolls the transaction back).
   */
  async #takeUnderRowLock(
    dialect: Dialect,
    statements: LeaseStatements,
    signal: AbortSignal,
    waitMs: number,
  ): Promise<boolean | 'row-locked'> {
    const conn = await dialect.connect();
    const onAbort = () => conn.destroy();
    signal.addEventListener('abort', onAbort, { once: true });
    const timed = <T>(p: Promise<T>) =>
      withTimeout(
        p,
        this.queryTimeoutMs,
        () =>
          new LockIOError(
            `Statement on ${dialect.description} took more than ${this.queryTimeoutMs} ms (${this.name})`,
          ),
      );
    try {
      if (signal.aborted) throw signal.reason;
      const got = await dialect.beginRowLock(
        conn,
        rowLockStatement(dialect, this.lockTableName),
        this.failIfLocked ? 1 : Math.max(1, waitMs),
      );
      if (!got) {
        await conn.release();
        return 'row-locked';
      }
      const r = await timed(conn.query(statements.acquire, [this.leaseHolderId, this.leaseMs]));
      await timed(conn.query('COMMIT'));
      await conn.release();
      return r.affected === 1;
    } catch (err) {
      // Rolls back whatever is open; a commit that did get through only delays us (the lease
      // names us, and we wait for it to expire like anyone's).
      conn.destroy();
      throw err;
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** After a 1-row acquire: read back our EPOCH, confirm with one renewal, arm the watchdog. */
  async #confirm(statements: LeaseStatements, sent: number): Promise<number | undefined> {
    const row = readLockRow((await this.#query(statements.select)).rows[0]);
    if (row.holder !== this.leaseHolderId || row.epoch === undefined) return undefined;
    let resolveLost: () => void = () => {};
    const lostPromise = new Promise<false>((resolve) => {
      resolveLost = () => resolve(false);
    });
    const held: Held = {
      epoch: row.epoch,
      deadline: sent + this.leaseMs - this.selfFencingMarginMs,
      lost: false,
      stop: new AbortController(),
      lostPromise,
      resolveLost,
    };
    this.#held = held;
    let renewed = false;
    try {
      renewed = await this.#renew(held);
    } finally {
      // Not confirmed (refused or an I/O error): we do not count ourselves master, and give
      // back what the row may still record as ours (a no-op unless holder and EPOCH match).
      if (!renewed) {
        this.#held = undefined;
        await this.#query(statements.release, [this.leaseHolderId, held.epoch]).catch(() => {});
      }
    }
    if (!renewed) return undefined;
    this.#everStarted = true;
    void watchSelfFencing(this.clock, held, this, {
      expired: () => this.#lose(held, this.#expiredWhy(), 'LEASE_EXPIRED'),
      stalled: (lag) =>
        this.#lose(
          held,
          `event loop stalled ${Math.round(lag)} ms (more than maxEventLoopLagMs ${this.maxEventLoopLagMs} ms), counted as a missed renewal`,
          'LOCK_UNCONFIRMED',
        ),
    });
    this.logger.info(
      `Lease ${this.lockTableName} acquired by ${this.leaseHolderId}, epoch ${held.epoch} (${this.name})`,
    );
    return held.epoch;
  }

  async #checkSkew(statements: LeaseStatements): Promise<void> {
    this.#timeOffset = 0;
    if (this.maxAllowableDiffFromDBTimeMs <= 0) return;
    const local = this.clock.wall();
    const db = readLockRow((await this.#query(statements.dbTime)).rows[0]).now;
    if (db === undefined) throw new LockIOError(`dbTime statement returned no NOW_MS column`);
    const diff = db - local;
    if (Math.abs(diff) > this.maxAllowableDiffFromDBTimeMs) {
      this.#timeOffset = diff;
      this.logger.warn(
        `Local time differs from the database's by ${diff} ms (more than maxAllowableDiffFromDBTimeMs ${this.maxAllowableDiffFromDBTimeMs} ms); offset ${diff} ms (${this.name})`,
      );
    }
  }

  #warnPeriods(period: number): void {
    if (period !== 0) return;
    this.logger.warn(
      `No keep-alive (keepAlivePeriodMs 0): the lease of ${this.leaseMs} ms is never renewed and mastership self-fences after ${this.leaseMs - this.selfFencingMarginMs} ms (${this.name})`,
    );
  }

  /** One renewal of `held`; true extends the self-fencing deadline. Rejects on I/O errors. */
  async #renew(held: Held): Promise<boolean> {
    const { statements } = this.#setup();
    const sent = this.clock.monotonic();
    const r = await this.#query(statements.renew, [this.leaseMs, this.leaseHolderId, held.epoch]);
    if (r.affected !== 1 || held.lost || this.#held !== held) return false;
    if (this.clock.monotonic() >= held.deadline) {
      // Renewed too late: another process may have taken the lease meanwhile.
      this.#lose(held, this.#expiredWhy(), 'LEASE_EXPIRED');
      return false;
    }
    held.deadline = Math.max(held.deadline, sent + this.leaseMs - this.selfFencingMarginMs);
    return true;
  }

  protected async doKeepAlive(): Promise<boolean> {
    const held = this.#held;
    if (held === undefined || held.lost) return false;
    let ok: boolean;
    try {
      ok = await Promise.race([this.#renew(held), held.lostPromise]);
    } catch (err) {
      const verdict = await this.ioErrorPolicy.handle(err, {
        locker: this.name,
        recheck: () => Promise.race([this.#renew(held), held.lostPromise]),
      });
      this.logger.warn(
        `Lease renewal failed (${describe(err)}); ${this.ioErrorPolicy.name}: ${verdict} (${this.name})`,
      );
      if (verdict === 'owner') return true;
      if (verdict === 'lost') return false;
      throw new LockIOError(
        `Lease renewal failed, ownership unknown: ${describe(err)} (${this.name})`,
        {
          cause: err,
        },
      );
    }
    if (!ok && !held.lost) {
      let owner = 'unknown';
      try {
        const row = readLockRow((await this.#query(this.#setup().statements.select)).rows[0]);
        owner = `${row.holder ?? '(nobody)'} epoch ${row.epoch ?? '?'}`;
      } catch {
        // Only for the message.
      }
      this.logger.warn(
        `Lease ${this.lockTableName} is no longer ours; held by ${owner} (${this.name})`,
      );
    }
    return ok;
  }

  #expiredWhy(): string {
    return `lease not renewed for ${this.leaseMs - this.selfFencingMarginMs} ms (lease ${this.leaseMs} ms − margin ${this.selfFencingMarginMs} ms): self-fenced before it can expire`;
  }

  #lose(held: Held, why: string, code: LockLossCode): void {
    if (held.lost) return;
    held.lost = true;
    held.resolveLost();
    this.logger.warn(`Lease ${this.lockTableName} epoch ${held.epoch}: ${why} (${this.name})`);
    this.markLost(
      new LockLostError(`Lease ${this.lockTableName} lost: ${why} (${this.name})`, { code }),
    );
  }

  protected async doStop(): Promise<void> {
    const held = this.#held;
    this.#held = undefined;
    const dialect = this.#dialect;
    const statements = this.#statements;
    this.#dialect = undefined;
    this.#statements = undefined;
    if (held !== undefined) {
      held.lost = true;
      held.stop.abort();
      held.resolveLost();
      // Both are set while anything is held (doStart's failure path clears them together).
      if (dialect !== undefined && statements !== undefined) {
        try {
          await dialect.queryWithin(
            statements.release,
            [this.leaseHolderId, held.epoch],
            this.queryTimeoutMs,
            () => new LockIOError('release timed out'),
          );
        } catch (err) {
          this.logger.warn(
            `Lease release failed (${describe(err)}); it expires on its own (${this.name})`,
          );
        }
      }
    }
    await dialect?.close().catch(() => {});
  }

  override toString(): string {
    return `LeaseDatabaseLocker(${this.name})`;
  }
}

/** `<hostname>:<pid>:<random>`: readable, and unique per locker even within one process. */
export function defaultLeaseHolderId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`.slice(0, 250);
}

/**
 * How often a waiting standby re-reads the lease: the renew period (the supervisor's
 * `keepAlivePeriodMs`), or the lease when that is shorter or the period is 0. One standby
 * then costs the database what the master's renewals cost (one statement per period, plus a
 * read), and a graceful release is taken over within about one period instead of one lease.
 */
export function standbyPollPeriod(lease: number, keepAlivePeriodMs: number): number {
  return keepAlivePeriodMs > 0 ? Math.min(lease, keepAlivePeriodMs) : lease;
}
