import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { relative, resolve, sep } from 'node:path';
import type pg from 'pg';
import {
  AlreadyClosedError,
  FencedError,
  InvalidArgumentError,
  LockIOError,
  LocksmithError,
} from '../core/errors.js';
import { describe } from '../store/describe-error.js';
import { PostgresCatalogStore } from './postgres-catalog-store.js';
import { connectStorage, storageDatabase } from './postgres-storage-connection.js';
import {
  claimRegion,
  ensureStorageSchema,
  type StorageTables,
  tablesOf,
} from './postgres-storage-schema.js';
import type {
  OpenRegionStorage,
  Recovered,
  RegionStorage,
  StorageOpenOptions,
} from './region-storage.js';
import { firstTokenAbove, type RowLockTokenStore, TOKEN_BLOCK } from './row-lock-tokens.js';

/** At most this many records, and about this many bytes, go into one append statement. */
const MAX_BATCH_RECORDS = 1_000;
const MAX_BATCH_BYTES = 8 * 1024 * 1024;
/** The largest record (bytea travels hex-encoded inside an array parameter: twice this). */
export const MAX_POSTGRES_RECORD_BYTES = 64 * 1024 * 1024;
/** Snapshot records are written in chunks of about this many bytes. */
const SNAPSHOT_CHUNK_BYTES = 4 * 1024 * 1024;

export interface PostgresRegionStorageOptions extends StorageOpenOptions {
  /** `postgres://user@host:port/database` (or `postgresql://`). */
  database: string;
  /** The region's name in the tables: any non-empty text up to 1,000 characters, no NUL. */
  region: string;
  /** A local directory for what the region keeps beside its data; created if missing. */
  directory: string;
  /** Table name prefix, an SQL identifier (default `locksmith`); see `postgres-storage-schema.ts`. */
  tablePrefix?: string | undefined;
}

interface Pending {
  record: Buffer;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * A region's log and snapshots in PostgreSQL: the {@link RegionStorage} contract with the
 * database's durability and replication, and no shared filesystem.
 *
 * - **Fencing in the write's transaction.** Every append batch is one statement that bumps the
 *   region's `next_seq` only where `epoch` and `generation` are still this owner's, and inserts
 *   the records only through that update's row: a deposed owner (a newer open happened, even a
 *   paused process resumed long after) changes nothing, and its batch rejects with
 *   `FencedError`. A checkpoint's transaction ends with the same check before it commits.
 *   There is no window between a check and the write, unlike a file storage's.
 * - **Group commit.** `append` queues synchronously (call order is log order); one statement
 *   at a time carries every record queued meanwhile (up to 1,000 records or 8 MB), and
 *   resolves each once its transaction committed (`synchronous_commit` on with durability
 *   `fsync`; off with `none`, where a PostgreSQL crash may lose the last moments of
 *   acknowledged writes but never tears a batch).
 * - **Checkpoints** run on a second connection: the snapshot's records are inserted in chunks
 *   under a new snapshot id, then one short transaction end switches the region to it and
 *   deletes the log it covers and the old snapshot. Appends go on meanwhile.
 * - **Open** takes the region's row lock, refuses a newer epoch (`FencedError`, nothing
 *   changed), records its epoch and a new generation, reads the snapshot and the log after it,
 *   lets `accept` see them, and only then commits: an owner still writing is fenced from the
 *   moment this commits, and every batch it committed before is in what was read.
 * - After a failed append or checkpoint (fenced, or the connection lost with the outcome
 *   unknown) every later append and checkpoint rejects.
 */
export class PostgresRegionStorage implements RegionStorage {
  readonly directory: string;
  readonly region: string;
  readonly epoch: number;
  readonly #tables: StorageTables;
  readonly #writer: pg.Client;
  readonly #checkpointer: pg.Client;
  readonly #generation: string;
  readonly #appendSql: string;
  #queue: Pending[] = [];
  #flushing: Promise<void> | undefined;
  /** The sequence number the next queued record gets. */
  #assigned: number;
  /** Every record below this one is committed. */
  #committedBelow: number;
  #waiters: { seq: number; resolve: () => void }[] = [];
  #appendedBytes = 0;
  #coveredBytes = 0;
  #checkpointTail: Promise<void> = Promise.resolve();
  #checkpointsQueued = 0;
  #poison: unknown;
  #closed = false;
  #closing: Promise<void> | undefined;
  readonly stats = { batches: 0, records: 0, bytes: 0, checkpoints: 0 };

  private constructor(init: {
    options: PostgresRegionStorageOptions;
    tables: StorageTables;
    writer: pg.Client;
    checkpointer: pg.Client;
    generation: string;
    nextSeq: number;
    logBytes: number;
  }) {
    this.directory = init.options.directory;
    this.region = init.options.region;
    this.epoch = init.options.epoch ?? 0;
    this.#tables = init.tables;
    this.#writer = init.writer;
    this.#checkpointer = init.checkpointer;
    this.#generation = init.generation;
    this.#assigned = init.nextSeq;
    this.#committedBelow = init.nextSeq;
    this.#appendedBytes = init.logBytes;
    const { regions, log } = init.tables;
    this.#appendSql = `WITH r AS (UPDATE ${regions} SET next_seq = next_seq + $3 WHERE region = $1 AND epoch = $4 AND generation = $5 RETURNING next_seq - $3 AS first) INSERT INTO ${log} (region, seq, record) SELECT $1, r.first + t.ord - 1, t.rec FROM r, unnest($2::bytea[]) WITH ORDINALITY AS t(rec, ord)`;
    for (const client of [init.writer, init.checkpointer]) {
      client.on('error', (err) => {
        this.#fail(
          new LockIOError(
            `Region storage ${this.region}: connection to PostgreSQL lost: ${describe(err)}`,
            { cause: err },
          ),
        );
      });
    }
  }

  /**
   * Opens `options.region`, creating the tables and the region if missing. See the class for
   * the order of an open; `accept` runs inside its transaction and may refuse by throwing
   * (nothing changes then).
   */
  static async open(
    options: PostgresRegionStorageOptions,
    accept: (recovered: Recovered) => void = () => {},
  ): Promise<{ storage: PostgresRegionStorage; recovered: Recovered }> {
    const o = validateOptions(options);
    const tables = tablesOf(o.tablePrefix ?? 'locksmith');
    const db = storageDatabase(o.database);
    await mkdir(o.directory, { recursive: true });
    const connect = () => connectStorage(db, `region ${o.region}`, o.durability);
    const writer = await connect();
    let checkpointer: pg.Client | undefined;
    try {
      checkpointer = await connect();
      await ensureStorageSchema(writer, tables);
      const found = await recover(writer, tables, o, accept);
      return {
        storage: new PostgresRegionStorage({
          options: o,
          tables,
          writer,
          checkpointer,
          generation: found.generation,
          nextSeq: found.nextSeq,
          logBytes: found.logBytes,
        }),
        recovered: found.recovered,
      };
    } catch (err) {
      await writer.end().catch(() => undefined);
      await checkpointer?.end().catch(() => undefined);
      if (err instanceof LocksmithError) throw err;
      // What `accept` threw, as it threw it; anything else is the database's.
      if (err instanceof AcceptRefused) throw err.error;
      throw new LockIOError(`Region storage ${o.region}: open failed: ${describe(err)}`, {
        cause: err,
      });
    }
  }

  /**
   * Deletes a region's log, snapshots and row (a dropped table), in one transaction under the
   * region's row lock. Refuses (`FencedError`, nothing deleted) a region a newer epoch than
   * `epoch` owns (standalone: any epoch); a region that does not exist is nothing to do.
   */
  static async destroy(options: {
    database: string;
    region: string;
    tablePrefix?: string | undefined;
    epoch?: number | undefined;
  }): Promise<void> {
    const { epoch, ...rest } = options;
    const o = validateOptions({
      ...rest,
      ...(epoch === undefined ? {} : { epoch }),
      directory: '-',
      durability: 'fsync',
    });
    const t = tablesOf(o.tablePrefix ?? 'locksmith');
    const db = storageDatabase(o.database);
    const client = await connectStorage(db, `region ${o.region}`);
    try {
      await client.query('BEGIN');
      const exists = (
        await client.query(`SELECT to_regclass($1) IS NOT NULL AS present`, [t.regions])
      ).rows[0]?.present;
      if (exists === true) {
        const row = (
          await client.query(`SELECT epoch FROM ${t.regions} WHERE region = $1 FOR UPDATE`, [
            o.region,
          ])
        ).rows[0] as { epoch: string } | undefined;
        const mine = o.epoch ?? 0;
        if (row !== undefined && Number(row.epoch) > mine) {
          throw new FencedError(
            `Region storage ${o.region} belongs to epoch ${row.epoch}, newer than ${mine}: not deleted`,
          );
        }
        await client.query(`DELETE FROM ${t.log} WHERE region = $1`, [o.region]);
        await client.query(`DELETE FROM ${t.snapshots} WHERE region = $1`, [o.region]);
        await client.query(`DELETE FROM ${t.regions} WHERE region = $1`, [o.region]);
      }
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      if (err instanceof LocksmithError) throw err;
      throw new LockIOError(
        `Region storage ${o.region}: deleting it failed: ${describe(err)} (${db.where})`,
        { cause: err },
      );
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  get logBytes(): number {
    return this.#appendedBytes - this.#coveredBytes;
  }

  get checkpointing(): boolean {
    return this.#checkpointsQueued > 0;
  }

  append(record: Uint8Array): Promise<void> {
    if (this.#closed) {
      return Promise.reject(new AlreadyClosedError(`Region storage ${this.region} is closed`));
    }
    if (this.#poison !== undefined) return Promise.reject(this.#poisoned());
    let buffer: Buffer;
    try {
      buffer = checkRecord(record, 'append');
    } catch (err) {
      return Promise.reject(err);
    }
    this.#assigned++;
    this.#appendedBytes += buffer.length;
    const done = new Promise<void>((resolve, reject) => {
      this.#queue.push({ record: buffer, resolve, reject });
    });
    this.#flushing ??= this.#flush();
    return done;
  }

  async #flush(): Promise<void> {
    try {
      while (this.#queue.length > 0 && this.#poison === undefined) {
        let bytes = 0;
        let n = 0;
        while (
          n < this.#queue.length &&
          n < MAX_BATCH_RECORDS &&
          (n === 0 || bytes + (this.#queue[n] as Pending).record.length <= MAX_BATCH_BYTES)
        ) {
          bytes += (this.#queue[n] as Pending).record.length;
          n++;
        }
        const batch = this.#queue.splice(0, n);
        let inserted: number;
        try {
          const r = await this.#writer.query(this.#appendSql, [
            this.region,
            batch.map((p) => p.record),
            n,
            this.epoch,
            this.#generation,
          ]);
          inserted = r.rowCount ?? 0;
        } catch (err) {
          // The outcome is unknown (the commit may or may not have happened): the storage
          // stops here; the next open reads what is there.
          const failure = new LockIOError(
            `Region storage ${this.region}: append failed, outcome unknown: ${describe(err)}`,
            { cause: err },
          );
          for (const p of batch) p.reject(failure);
          this.#fail(failure);
          return;
        }
        if (inserted !== n) {
          const fenced = new FencedError(
            `Region storage ${this.region} is owned by a newer open (epoch ${this.epoch} is no longer the region's, or another server opened it since): this write was not committed`,
          );
          for (const p of batch) p.reject(fenced);
          this.#fail(fenced);
          return;
        }
        this.stats.batches++;
        this.stats.records += n;
        this.stats.bytes += bytes;
        this.#committedBelow += n;
        for (const p of batch) p.resolve();
        this.#wakeWaiters();
      }
    } finally {
      this.#flushing = undefined;
      // An append queued while the last statement ran but after the loop's check.
      if (this.#queue.length > 0 && this.#poison === undefined) this.#flushing = this.#flush();
    }
  }

  /** Resolves once every record below `seq` is committed; rejects once the storage failed. */
  #committed(seq: number): Promise<void> {
    if (this.#poison !== undefined) return Promise.reject(this.#poisoned());
    if (this.#committedBelow >= seq) return Promise.resolve();
    return new Promise<void>((resolve) => this.#waiters.push({ seq, resolve })).then(() => {
      if (this.#poison !== undefined) throw this.#poisoned();
    });
  }

  #wakeWaiters(): void {
    const failed = this.#poison !== undefined;
    const ready = this.#waiters.filter((w) => failed || w.seq <= this.#committedBelow);
    this.#waiters = this.#waiters.filter((w) => !ready.includes(w));
    for (const w of ready) w.resolve();
  }

  #fail(err: unknown): void {
    this.#poison ??= err;
    const failure = this.#poisoned();
    for (const p of this.#queue.splice(0)) p.reject(failure);
    this.#wakeWaiters();
  }

  #poisoned(): Error {
    const poison = this.#poison;
    if (poison instanceof FencedError) {
      return new FencedError(`Region storage ${this.region} is owned by a newer open`, {
        cause: poison,
      });
    }
    return new LockIOError(`Region storage ${this.region} is unusable after a failed write`, {
      cause: poison,
    });
  }

  checkpoint(capture: () => Iterable<Uint8Array>): Promise<void> {
    if (this.#closed) {
      return Promise.reject(new AlreadyClosedError(`Region storage ${this.region} is closed`));
    }
    if (this.#poison !== undefined) return Promise.reject(this.#poisoned());
    // Synchronous: the capture covers every record queued so far, and nothing after.
    const covered = this.#assigned;
    const coveredBytes = this.#appendedBytes;
    let records: Buffer[];
    try {
      records = Array.from(capture(), (r) => checkRecord(r, 'checkpoint'));
    } catch (err) {
      return Promise.reject(err);
    }
    this.#checkpointsQueued++;
    const run = this.#checkpointTail.then(async () => {
      try {
        await this.#committed(covered);
        await this.#writeCheckpoint(records, covered);
        this.#coveredBytes = Math.max(this.#coveredBytes, coveredBytes);
        this.stats.checkpoints++;
      } finally {
        this.#checkpointsQueued--;
      }
    });
    this.#checkpointTail = run.catch(() => undefined);
    return run;
  }

  async #writeCheckpoint(records: Buffer[], covered: number): Promise<void> {
    const { regions, log, snapshots } = this.#tables;
    const c = this.#checkpointer;
    const id = newSnapshotId();
    await c.query('BEGIN');
    try {
      for (let part = 0; part < records.length; ) {
        let bytes = 0;
        let end = part;
        while (end < records.length && (end === part || bytes < SNAPSHOT_CHUNK_BYTES)) {
          bytes += (records[end] as Buffer).length;
          end++;
        }
        await c.query(
          `INSERT INTO ${snapshots} (region, snapshot_id, part, record) SELECT $1, $2, $3 + t.ord - 1, t.rec FROM unnest($4::bytea[]) WITH ORDINALITY AS t(rec, ord)`,
          [this.region, id, part, records.slice(part, end)],
        );
        part = end;
      }
      // The fence, last: the region's row stays locked only from here to the commit.
      const r = await c.query(
        `UPDATE ${regions} SET snapshot_id = $2, snapshot_seq = $3 WHERE region = $1 AND epoch = $4 AND generation = $5`,
        [this.region, id, covered, this.epoch, this.#generation],
      );
      if (r.rowCount !== 1) {
        throw new FencedError(
          `Region storage ${this.region} is owned by a newer open: checkpoint not committed`,
        );
      }
      await c.query(`DELETE FROM ${snapshots} WHERE region = $1 AND snapshot_id <> $2`, [
        this.region,
        id,
      ]);
      await c.query(`DELETE FROM ${log} WHERE region = $1 AND seq < $2`, [this.region, covered]);
      await c.query('COMMIT');
    } catch (err) {
      await c.query('ROLLBACK').catch(() => undefined);
      const failure =
        err instanceof FencedError
          ? err
          : new LockIOError(`Region storage ${this.region}: checkpoint failed: ${describe(err)}`, {
              cause: err,
            });
      this.#fail(failure);
      throw failure;
    }
  }

  /**
   * The region's row-lock token ceiling, kept in its row: the first token is above every
   * ceiling an earlier owner recorded (on any machine) and above `wallMs` in µs. The first
   * block is recorded before this resolves; a later `reserve` records its block in the
   * background (fenced like a write), warning if that fails, while tokens also follow the
   * wall clock.
   */
  async openTokens(wallMs: number): Promise<RowLockTokenStore> {
    const { regions } = this.#tables;
    const stored = Number(
      (
        await this.#writer.query(`SELECT token_ceiling FROM ${regions} WHERE region = $1`, [
          this.region,
        ])
      ).rows[0]?.token_ceiling,
    );
    const firstToken = firstTokenAbove(stored, wallMs);
    const ceiling = firstToken + TOKEN_BLOCK - 1;
    await this.#recordCeiling(ceiling);
    return {
      firstToken,
      ceiling,
      reserve: (from) => {
        const next = from + TOKEN_BLOCK - 1;
        this.#recordCeiling(next).catch((err: unknown) => {
          process.emitWarning(
            `Region storage ${this.region}: cannot record row-lock token ceiling ${next}: ${describe(err)}; tokens rely on the wall clock until the next reservation`,
          );
        });
        return next;
      },
      close: () => {},
    };
  }

  async #recordCeiling(ceiling: number): Promise<void> {
    if (this.#poison !== undefined) throw this.#poisoned();
    const r = await this.#writer.query(
      `UPDATE ${this.#tables.regions} SET token_ceiling = GREATEST(token_ceiling, $2) WHERE region = $1 AND epoch = $3 AND generation = $4`,
      [this.region, String(ceiling), this.epoch, this.#generation],
    );
    if (r.rowCount !== 1) {
      throw new FencedError(
        `Region storage ${this.region} is owned by a newer open: token ceiling not recorded`,
      );
    }
  }

  /**
   * Waits for every queued append and checkpoint, then closes both connections. Idempotent.
   * Appends and checkpoints called after it reject with `AlreadyClosedError`.
   */
  close(): Promise<void> {
    this.#closed = true;
    this.#closing ??= (async () => {
      await this.#flushing;
      await this.#checkpointTail;
      await this.#writer.end().catch(() => undefined);
      await this.#checkpointer.end().catch(() => undefined);
    })();
    return this.#closing;
  }
}

/**
 * An {@link OpenRegionStorage} on PostgreSQL: a region's name is its directory below `root`.
 * Its `destroy` deletes a region's rows (a dropped table), refusing one a newer epoch owns;
 * its `openCatalog` keeps the server's table catalog in the same database and prefix.
 */
export function postgresRegionStorage(config: {
  database: string;
  root: string;
  tablePrefix?: string;
}): OpenRegionStorage {
  const root = resolve(config.root);
  const nameOf = (dir: string) => {
    const name = relative(root, resolve(dir));
    if (name === '' || name.startsWith('..') || name.startsWith(sep)) {
      throw new InvalidArgumentError(`region directory ${dir} is not below ${root}`);
    }
    return name.split(sep).join('/');
  };
  const open: OpenRegionStorage = async (dir, options, accept) =>
    PostgresRegionStorage.open(
      {
        ...options,
        database: config.database,
        region: nameOf(dir),
        directory: resolve(dir),
        tablePrefix: config.tablePrefix,
      },
      accept,
    );
  open.destroy = (dir, options) =>
    PostgresRegionStorage.destroy({
      database: config.database,
      region: nameOf(dir),
      tablePrefix: config.tablePrefix,
      epoch: options.epoch,
    });
  open.openCatalog = (_dataDir, options) =>
    PostgresCatalogStore.open({
      database: config.database,
      tablePrefix: config.tablePrefix,
      epoch: options.epoch,
    });
  return open;
}

async function recover(
  client: pg.Client,
  t: StorageTables,
  o: PostgresRegionStorageOptions,
  accept: (recovered: Recovered) => void,
): Promise<{ recovered: Recovered; generation: string; nextSeq: number; logBytes: number }> {
  const epoch = o.epoch ?? 0;
  await client.query('BEGIN');
  try {
    const { row, generation } = await claimRegion(client, t, o.region, epoch);
    const snapshot = (
      await client.query(
        `SELECT record FROM ${t.snapshots} WHERE region = $1 AND snapshot_id = $2 ORDER BY part`,
        [o.region, row.snapshot_id],
      )
    ).rows.map((r: { record: Buffer }) => r.record);
    const from = Number(row.snapshot_seq);
    const nextSeq = Number(row.next_seq);
    const logRows = (
      await client.query(
        `SELECT seq, record FROM ${t.log} WHERE region = $1 AND seq >= $2 ORDER BY seq`,
        [o.region, from],
      )
    ).rows as { seq: string; record: Buffer }[];
    if (
      logRows.length !== Math.max(0, nextSeq - from) ||
      logRows.some((r, i) => Number(r.seq) !== from + i)
    ) {
      throw new LockIOError(
        `Region storage ${o.region}: the log from ${from} to ${nextSeq - 1} is not whole (${logRows.length} records found): refused`,
      );
    }
    const recovered: Recovered = { snapshot, log: logRows.map((r) => r.record) };
    try {
      accept(recovered);
    } catch (error) {
      throw new AcceptRefused(error);
    }
    await client.query('COMMIT');
    return {
      recovered,
      generation,
      nextSeq,
      logBytes: recovered.log.reduce((sum, r) => sum + r.length, 0),
    };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/** What `accept` threw, carried through the open's rollback unchanged. */
class AcceptRefused extends Error {
  readonly error: unknown;
  constructor(error: unknown) {
    super('accept refused the recovered state');
    this.error = error;
  }
}

function newSnapshotId(): string {
  // A positive 62-bit number: unique per checkpoint, never 0 (no snapshot).
  return String((randomBytes(8).readBigUInt64BE() >> 2n) | 1n);
}

function checkRecord(record: unknown, what: string): Buffer {
  if (!(record instanceof Uint8Array)) {
    throw new InvalidArgumentError(`${what}: a record must be a Uint8Array, got ${typeof record}`);
  }
  if (record.length > MAX_POSTGRES_RECORD_BYTES) {
    throw new InvalidArgumentError(
      `${what}: a record of ${record.length} bytes is larger than ${MAX_POSTGRES_RECORD_BYTES}`,
    );
  }
  return Buffer.isBuffer(record)
    ? record
    : Buffer.from(record.buffer, record.byteOffset, record.byteLength);
}

function validateOptions(options: PostgresRegionStorageOptions): PostgresRegionStorageOptions {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError('options must be an object');
  }
  const { region, directory, durability, epoch } = options;
  if (
    typeof region !== 'string' ||
    region.length === 0 ||
    region.length > 1_000 ||
    region.includes('\0')
  ) {
    throw new InvalidArgumentError(
      `region must be text of 1 to 1,000 characters without NUL, got ${JSON.stringify(region)}`,
    );
  }
  if (typeof directory !== 'string' || directory.length === 0) {
    throw new InvalidArgumentError(`directory must be a path, got ${JSON.stringify(directory)}`);
  }
  if (durability !== 'fsync' && durability !== 'none') {
    throw new InvalidArgumentError(
      `durability must be 'fsync' or 'none', got ${JSON.stringify(durability)}`,
    );
  }
  if (
    epoch !== undefined &&
    (typeof epoch !== 'number' || !Number.isSafeInteger(epoch) || epoch < 1)
  ) {
    throw new InvalidArgumentError(
      `epoch must be a safe integer >= 1 (a fencing token), got ${String(epoch)}`,
    );
  }
  return options;
}
