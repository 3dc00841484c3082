/** Where a dialect's pool comes from: a URL (the dialect opens and owns it) or the user's pool. */
export type PoolSource<P> = { url: string; description: string } | { pool: P };

/**
 * The pool of a client-server dialect (PostgreSQL, MariaDB/MySQL): opened from a URL, it is
 * the dialect's and `close()` ends it; handed in by the user, it is only used, never closed.
 */
export class DialectPool<P extends { end(): Promise<void> }> {
  readonly pool: P;
  /** For messages: the URL without password, or `<database> (user pool)`. */
  readonly description: string;
  readonly #owned: boolean;

  constructor(source: PoolSource<P>, database: string, open: (url: string) => P) {
    if ('pool' in source) {
      this.pool = source.pool;
      this.#owned = false;
      this.description = `${database} (user pool)`;
    } else {
      this.pool = open(source.url);
      this.#owned = true;
      this.description = source.description;
    }
  }

  async close(): Promise<void> {
    if (this.#owned) await this.pool.end();
  }
}
