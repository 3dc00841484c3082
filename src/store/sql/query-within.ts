import { type SqlResult, withTimeout } from './dialect.js';

/** One pooled connection, as {@link queryWithin} uses it. */
export interface DroppableConnection {
  /** Runs the statement on this connection. */
  run(): Promise<SqlResult>;
  /** Gives the connection back to its pool: the statement finished in time. */
  release(): void;
  /**
   * Ends the connection (and, where the server would otherwise go on with it, its session):
   * the statement is abandoned and the pool forgets the connection.
   */
  drop(): void;
}

/**
 * {@link Dialect.queryWithin} for the dialects with a pool of network connections: the
 * statement runs on a connection of its own, limited to `ms` (0: no limit, then `query()` is
 * used as is). Past the limit, or on any failure, it rejects (with `onTimeout()` when late)
 * and the connection is dropped rather than given back: a statement blocked in the database
 * (behind another session's row lock) then holds neither a pooled connection nor a later
 * `close()`.
 */
export async function queryWithin(
  ms: number,
  onTimeout: () => Error,
  query: () => Promise<SqlResult>,
  connect: () => Promise<DroppableConnection>,
): Promise<SqlResult> {
  if (ms <= 0) return query();
  const conn = await connect();
  try {
    const out = await withTimeout(conn.run(), ms, onTimeout);
    conn.release();
    return out;
  } catch (err) {
    conn.drop();
    throw err;
  }
}
