/** PostgreSQL as the benchmarks of the PostgreSQL storage find and leave it. */
import pg from 'pg';

/** The database's version and durability settings, or undefined when it does not answer. */
export async function postgresAnswers(url: string): Promise<string | undefined> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  try {
    await c.connect();
    const { rows } = await c.query(
      "SELECT version() AS v, current_setting('synchronous_commit') AS sc, current_setting('fsync') AS f",
    );
    const r = rows[0] as { v: string; sc: string; f: string };
    return `${r.v.split(' on ')[0]} (synchronous_commit ${r.sc}, fsync ${r.f})`;
  } catch {
    return undefined;
  } finally {
    await c.end().catch(() => undefined);
  }
}

/** Drops the storage tables of one prefix (`--storage-prefix`) a benchmark made. */
export async function dropStoragePrefix(url: string, prefix: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(
      `DROP TABLE IF EXISTS ${prefix}_schema, ${prefix}_regions, ${prefix}_log, ${prefix}_snapshots, ${prefix}_tables`,
    );
  } finally {
    await c.end();
  }
}
