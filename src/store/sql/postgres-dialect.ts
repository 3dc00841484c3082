import pg from 'pg';
import { ConnectionDeath } from './connection-death.js';
import type { Dialect, SqlConnection, SqlResult } from './dialect.js';
import { DialectPool, type PoolSource } from './dialect-pool.js';
import { queryWithin } from './query-within.js';

/** `?` → `$1, $2, …` (our statements never contain a literal `?`). */
export function dollars(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

function pgResult(r: pg.QueryResult): SqlResult {
  return { rows: r.rows as Record<string, unknown>[], affected: r.rowCount ?? 0 };
}

class PgConnection implements SqlConnection {
  readonly #client: pg.PoolClient;
  readonly #death = new ConnectionDeath();
  #done = false;
  sessionId: number | undefined;

  constructor(client: pg.PoolClient) {
    this.#client = client;
    const die = (error: unknown) => this.#death.report(error);
    const onEnd = () => die(new Error('connection ended'));
    client.on('error', die);
    client.on('end', onEnd);
    this.#detach = () => {
      client.off('error', die);
      client.off('end', onEnd);
    };
  }

  /** Removes our listeners before the client goes back to a pool (maybe the user's). */
  readonly #detach: () => void;

  get broken(): boolean {
    return this.#death.dead;
  }

  onBroken(listener: (error: unknown) => void): void {
    this.#death.onDeath(listener);
  }

  async query(sql: string, params: readonly unknown[] = []): Promise<SqlResult> {
    return pgResult(await this.#client.query(dollars(sql), params as unknown[]));
  }

  async release(): Promise<void> {
    if (this.#done) return;
    this.#done = true;
    this.#detach();
    this.#client.release(this.#death.dead ? true : undefined);
  }

  destroy(): void {
    if (this.#done) return;
    this.#done = true;
    this.#death.markDead();
    // release(true) ends the socket; a blocked statement rejects.
    this.#client.release(true);
  }
}

/** PostgreSQL through `pg`: a URL (we own the pool) or the user's `pg.Pool`. */
export class PostgresDialect implements Dialect {
  readonly kind = 'postgres';
  readonly description: string;
  readonly nowMs = 'CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)';
  readonly nowUs = 'CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000) AS BIGINT)';
  readonly #pool: pg.Pool;
  readonly #source: DialectPool<pg.Pool>;
  #listening = false;

  constructor(source: PoolSource<pg.Pool>) {
    this.#source = new DialectPool(
      source,
      'PostgreSQL',
      (connectionString) =>
        new pg.Pool({
          connectionString,
          max: 4,
          connectionTimeoutMillis: 10_000,
          idleTimeoutMillis: 30_000,
          allowExitOnIdle: true,
        }),
    );
    this.#pool = this.#source.pool;
    this.description = this.#source.description;
  }

  /**
   * An idle pooled connection killed by the server makes the pool emit 'error', which would
   * crash the process without a listener. Ours goes on at the first use and comes off in
   * `close()`: a pool the user handed in outlives this dialect (a locker opens a new one at
   * every start), and must not gain a listener per start/stop cycle.
   */
  #use(): pg.Pool {
    if (!this.#listening) {
      this.#listening = true;
      this.#pool.on('error', ignore);
    }
    return this.#pool;
  }

  greatest(a: string, b: string): string {
    return `GREATEST(${a}, ${b})`;
  }

  async connect(): Promise<SqlConnection> {
    const client = await this.#use().connect();
    const conn = new PgConnection(client);
    try {
      const r = await conn.query('SELECT pg_backend_pid() AS pid');
      conn.sessionId = Number(r.rows[0]?.pid);
    } catch (err) {
      conn.destroy();
      throw err;
    }
    return conn;
  }

  async query(sql: string, params: readonly unknown[] = []): Promise<SqlResult> {
    return pgResult(await this.#use().query(dollars(sql), params as unknown[]));
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
        const client = await this.#use().connect();
        // A client ended under a pending statement may still report the error as an event.
        client.on('error', ignore);
        return {
          run: async () => pgResult(await client.query(dollars(sql), params as unknown[])),
          release: () => {
            client.off('error', ignore);
            client.release();
          },
          // Ends the socket: the pool forgets it, the statement is abandoned.
          drop: () => client.release(true),
        };
      },
    );
  }

  async beginRowLock(conn: SqlConnection, lockStatement: string, waitMs: number): Promise<boolean> {
    await conn.query('BEGIN');
    try {
      // SET LOCAL takes no parameters; the value is an integer we produced.
      await conn.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.floor(waitMs))}`);
      await conn.query(lockStatement);
      return true;
    } catch (err) {
      if ((err as { code?: string }).code === '55P03') {
        await conn.query('ROLLBACK');
        return false;
      }
      throw err;
    }
  }

  async limitLockWaits(conn: SqlConnection, ms: number): Promise<void> {
    await conn.query(`SET lock_timeout = ${Math.max(1, Math.floor(ms))}`);
  }

  createTableStatements(table: string): string[] {
    return [
      `CREATE TABLE IF NOT EXISTS ${table} (ID BIGINT NOT NULL PRIMARY KEY, TIME BIGINT, BROKER_NAME VARCHAR(250), EPOCH BIGINT DEFAULT 0)`,
      `INSERT INTO ${table} (ID, TIME, BROKER_NAME, EPOCH) VALUES (1, 0, NULL, 0) ON CONFLICT (ID) DO NOTHING`,
    ];
  }

  addEpochColumnStatement(table: string): string {
    return `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS EPOCH BIGINT DEFAULT 0`;
  }

  /** Ends a pool we opened; takes our 'error' listener off either kind (see `#use`). */
  async close(): Promise<void> {
    try {
      await this.#source.close();
    } finally {
      if (this.#listening) {
        this.#listening = false;
        this.#pool.off('error', ignore);
      }
    }
  }
}

/** The pool's 'error' listener: the connection concerned is dropped by the pool itself. */
function ignore(): void {}
