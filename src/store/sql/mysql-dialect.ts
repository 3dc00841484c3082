import mysql from 'mysql2/promise';
import { ConnectionDeath } from './connection-death.js';
import type { Dialect, SqlConnection, SqlResult } from './dialect.js';
import { DialectPool, type PoolSource } from './dialect-pool.js';
import { queryWithin } from './query-within.js';

function result(out: unknown): SqlResult {
  if (Array.isArray(out)) return { rows: out as Record<string, unknown>[], affected: 0 };
  const header = out as { affectedRows?: number };
  return { rows: [], affected: header.affectedRows ?? 0 };
}

class MysqlConnection implements SqlConnection {
  readonly #conn: mysql.PoolConnection;
  readonly #death = new ConnectionDeath();
  #done = false;
  sessionId: number | undefined;
  readonly #kill: (id: number) => void;
  /** mysql2 never settles a statement pending on a connection it destroys: we do. */
  readonly #destroyed: Promise<never>;
  #rejectPending: (err: Error) => void = () => {};

  constructor(conn: mysql.PoolConnection, kill: (id: number) => void) {
    this.#conn = conn;
    this.#kill = kill;
    this.#destroyed = new Promise<never>((_, reject) => {
      this.#rejectPending = reject;
    });
    this.#destroyed.catch(() => {});
    const die = (error: unknown) => this.#death.report(error);
    // The callback-style connection underneath emits the fatal errors and the close.
    const raw = conn.connection as unknown as NodeJS.EventEmitter & {
      stream?: NodeJS.EventEmitter;
    };
    const onEnd = () => die(new Error('connection ended'));
    const onClose = () => die(new Error('connection closed'));
    raw.on('error', die);
    raw.on('end', onEnd);
    raw.stream?.on('close', onClose);
    this.#detach = () => {
      raw.off('error', die);
      raw.off('end', onEnd);
      raw.stream?.off('close', onClose);
    };
  }

  /** Removes our listeners before the connection goes back to a pool (maybe the user's). */
  readonly #detach: () => void;

  get broken(): boolean {
    return this.#death.dead;
  }

  onBroken(listener: (error: unknown) => void): void {
    this.#death.onDeath(listener);
  }

  async query(sql: string, params: readonly unknown[] = []): Promise<SqlResult> {
    const [out] = await Promise.race([this.#conn.query(sql, params as unknown[]), this.#destroyed]);
    return result(out);
  }

  async release(): Promise<void> {
    if (this.#done) return;
    this.#done = true;
    this.#detach();
    if (this.#death.dead) this.#conn.destroy();
    else this.#conn.release();
  }

  destroy(): void {
    if (this.#done) return;
    this.#done = true;
    this.#death.markDead();
    this.#conn.destroy();
    this.#rejectPending(new Error('connection destroyed'));
    // The server would keep a blocked lock wait of this session until its timeout.
    if (this.sessionId !== undefined) this.#kill(this.sessionId);
  }
}

/** MariaDB/MySQL (InnoDB) through `mysql2`: a URL (we own the pool) or the user's pool. */
export class MysqlDialect implements Dialect {
  readonly kind = 'mysql';
  readonly description: string;
  readonly nowMs = 'CAST(FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000) AS SIGNED)';
  readonly nowUs = 'CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000000) AS SIGNED)';
  readonly #pool: mysql.Pool;
  readonly #source: DialectPool<mysql.Pool>;

  constructor(source: PoolSource<mysql.Pool>) {
    this.#source = new DialectPool(source, 'MySQL', (uri) =>
      mysql.createPool({
        uri,
        connectionLimit: 4,
        connectTimeout: 10_000,
        supportBigNumbers: true,
        // affectedRows = rows matched, even when the values did not change.
        flags: ['FOUND_ROWS'],
      }),
    );
    this.#pool = this.#source.pool;
    this.description = this.#source.description;
  }

  greatest(a: string, b: string): string {
    return `GREATEST(${a}, ${b})`;
  }

  async connect(): Promise<SqlConnection> {
    const raw = await this.#pool.getConnection();
    const conn = new MysqlConnection(raw, (id) => this.#kill(id));
    try {
      const r = await conn.query('SELECT CONNECTION_ID() AS id');
      conn.sessionId = Number(r.rows[0]?.id);
    } catch (err) {
      conn.destroy();
      throw err;
    }
    return conn;
  }

  /** Ends session `id` on the server, from another pooled connection; failures ignored. */
  #kill(id: number): void {
    this.#pool.query(`KILL ${Math.floor(id)}`).catch(() => {});
  }

  async query(sql: string, params: readonly unknown[] = []): Promise<SqlResult> {
    const [out] = await this.#pool.query(sql, params as unknown[]);
    return result(out);
  }

  queryWithin(
    sql: string,
    params: readonly unknown[],
    ms: number,
    onTimeout: () => Error,
  ): Promise<SqlResult> {
    return queryWithin(
      ms,
      onTimeout,
      () => this.query(sql, params),
      async () => {
        const conn = await this.#pool.getConnection();
        return {
          run: async () => result((await conn.query(sql, params as unknown[]))[0]),
          release: () => conn.release(),
          drop: () => {
            const id = conn.threadId;
            conn.destroy();
            // The server would keep the statement waiting until its lock wait timeout.
            if (typeof id === 'number') this.#kill(id);
          },
        };
      },
    );
  }

  async beginRowLock(conn: SqlConnection, lockStatement: string, waitMs: number): Promise<boolean> {
    // InnoDB's lock wait timeout is whole seconds, at least 1.
    await conn.query(
      `SET SESSION innodb_lock_wait_timeout = ${Math.max(1, Math.ceil(waitMs / 1000))}`,
    );
    await conn.query('START TRANSACTION');
    try {
      await conn.query(lockStatement);
      return true;
    } catch (err) {
      if ((err as { errno?: number }).errno === 1205) {
        await conn.query('ROLLBACK');
        return false;
      }
      throw err;
    }
  }

  async limitLockWaits(conn: SqlConnection, ms: number): Promise<void> {
    // Row locks (InnoDB) and table metadata locks (DDL) have a timeout each, whole seconds.
    const s = Math.max(1, Math.ceil(ms / 1000));
    await conn.query(`SET SESSION innodb_lock_wait_timeout = ${s}, lock_wait_timeout = ${s}`);
  }

  createTableStatements(table: string): string[] {
    return [
      `CREATE TABLE IF NOT EXISTS ${table} (ID BIGINT NOT NULL PRIMARY KEY, TIME BIGINT, BROKER_NAME VARCHAR(250), EPOCH BIGINT DEFAULT 0) ENGINE=InnoDB`,
      `INSERT IGNORE INTO ${table} (ID, TIME, BROKER_NAME, EPOCH) VALUES (1, 0, NULL, 0)`,
    ];
  }

  addEpochColumnStatement(table: string): string {
    return `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS EPOCH BIGINT DEFAULT 0`;
  }

  close(): Promise<void> {
    return this.#source.close();
  }
}
