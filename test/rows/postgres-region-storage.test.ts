// Issue 23, first part: a region's log and snapshots in PostgreSQL (the test database), with
// fencing in the write's own transaction. Real server, real processes (kill -9, SIGSTOP).
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { connect } from '../../src/client/locksmith-client.js';
import { systemClock } from '../../src/core/clock.js';
import { FencedError, InvalidArgumentError, LockIOError } from '../../src/core/errors.js';
import { Get, Put, Region } from '../../src/rows/index.js';
import { PostgresCatalogStore } from '../../src/rows/postgres-catalog-store.js';
import {
  PostgresRegionStorage,
  type PostgresRegionStorageOptions,
  postgresRegionStorage,
} from '../../src/rows/postgres-region-storage.js';
import { checkTableDescriptor } from '../../src/rows/table-descriptor.js';
import { LocksmithServer } from '../../src/server/server.js';
import { POSTGRES_URL } from '../fixtures/db-servers.js';
import { collectOutput, eventually, exitOf, orphanProof, tempDir } from '../helpers.js';

const WRITER = join(import.meta.dirname, '../fixtures/pg-storage-writer.js');
const prefixes: string[] = [];
const dirs = tempDir();
let dirCount = 0;

/** A table prefix of its own, dropped after the file. */
function freshPrefix(): string {
  const p = `lsm_${randomBytes(4).toString('hex')}`;
  prefixes.push(p);
  return p;
}

async function sql<T = Record<string, unknown>>(
  text: string,
  params: unknown[] = [],
): Promise<T[]> {
  const c = new pg.Client({ connectionString: POSTGRES_URL });
  await c.connect();
  try {
    return (await c.query(text, params)).rows as T[];
  } finally {
    await c.end();
  }
}

after(async () => {
  dirs[Symbol.dispose]();
  for (const p of prefixes) {
    await sql(
      `DROP TABLE IF EXISTS ${p}_schema, ${p}_regions, ${p}_log, ${p}_snapshots, ${p}_tables`,
    ).catch(() => undefined);
  }
});

const text = (records: Uint8Array[]) => records.map((r) => Buffer.from(r).toString());
const values = (cells: readonly { value: Uint8Array }[]) =>
  cells.map((c) => Buffer.from(c.value).toString());

function options(
  prefix: string,
  extra: Partial<PostgresRegionStorageOptions> = {},
): PostgresRegionStorageOptions {
  return {
    database: POSTGRES_URL,
    tablePrefix: prefix,
    region: 't/r1',
    directory: join(dirs.path, `region-${++dirCount}`),
    durability: 'fsync',
    ...extra,
  };
}

describe('PostgreSQL region storage', () => {
  it('recovers every appended record in call order; concurrent appends share statements (group commit)', async () => {
    const prefix = freshPrefix();
    const { storage, recovered } = await PostgresRegionStorage.open(options(prefix));
    assert.deepEqual(recovered, { snapshot: [], log: [] });
    await Promise.all(Array.from({ length: 300 }, (_, i) => storage.append(Buffer.from(`r${i}`))));
    assert.equal(storage.stats.records, 300);
    assert.ok(storage.stats.batches < 300, `batches ${storage.stats.batches}`);
    assert.equal(storage.logBytes, 300 * 2 + 290 + 200);
    await storage.close();
    await assert.rejects(storage.append(Buffer.from('late')), /closed/);

    const again = await PostgresRegionStorage.open(options(prefix));
    assert.deepEqual(
      text(again.recovered.log),
      Array.from({ length: 300 }, (_, i) => `r${i}`),
    );
    assert.equal(again.storage.logBytes, 300 * 2 + 290 + 200);
    await again.storage.close();
  });

  it('a checkpoint replaces the log it covers; appends go on during it; reopen = snapshot + later log', async () => {
    const prefix = freshPrefix();
    const { storage } = await PostgresRegionStorage.open(options(prefix));
    for (let i = 0; i < 50; i++) await storage.append(Buffer.from(`a${i}`));
    const state = Array.from({ length: 50 }, (_, i) => `a${i}`);
    const during: Promise<void>[] = [];
    const done = storage.checkpoint(() => {
      // Appends queued after the capture are not covered.
      for (let i = 0; i < 5; i++) during.push(storage.append(Buffer.from(`b${i}`)));
      return state.map((s) => Buffer.from(`snap:${s}`));
    });
    assert.equal(storage.checkpointing, true);
    await done;
    await Promise.all(during);
    assert.equal(storage.checkpointing, false);
    assert.equal(storage.logBytes, 5 * 2);
    assert.equal(storage.stats.checkpoints, 1);
    const logRows = await sql(`SELECT seq FROM ${prefix}_log ORDER BY seq`);
    assert.equal(logRows.length, 5, 'the covered log was deleted');
    await storage.close();

    const again = await PostgresRegionStorage.open(options(prefix));
    assert.deepEqual(
      text(again.recovered.snapshot),
      state.map((s) => `snap:${s}`),
    );
    assert.deepEqual(text(again.recovered.log), ['b0', 'b1', 'b2', 'b3', 'b4']);
    // A second checkpoint leaves one snapshot only.
    await again.storage.checkpoint(() => [Buffer.from('only')]);
    await again.storage.close();
    const snaps = await sql<{ n: string }>(`SELECT count(*) AS n FROM ${prefix}_snapshots`);
    assert.equal(Number(snaps[0]?.n), 1);
    const third = await PostgresRegionStorage.open(options(prefix));
    assert.deepEqual(text(third.recovered.snapshot), ['only']);
    assert.deepEqual(third.recovered.log, []);
    await third.storage.close();
  });

  it('a newer open fences the older one in its own transaction: its appends and checkpoints are refused and never committed', async () => {
    const prefix = freshPrefix();
    const a = await PostgresRegionStorage.open(options(prefix, { epoch: 1 }));
    await a.storage.append(Buffer.from('a-before'));
    const b = await PostgresRegionStorage.open(options(prefix, { epoch: 2 }));
    assert.deepEqual(text(b.recovered.log), ['a-before']);
    await assert.rejects(a.storage.append(Buffer.from('a-after')), FencedError);
    await assert.rejects(a.storage.append(Buffer.from('a-later')), FencedError);
    await assert.rejects(
      a.storage.checkpoint(() => []),
      FencedError,
    );
    await b.storage.append(Buffer.from('b-1'));
    // An older epoch is refused before anything changes; so is a standalone open.
    await assert.rejects(PostgresRegionStorage.open(options(prefix, { epoch: 1 })), FencedError);
    await assert.rejects(PostgresRegionStorage.open(options(prefix)), FencedError);
    const row = await sql<{ epoch: string }>(`SELECT epoch FROM ${prefix}_regions`);
    assert.equal(Number(row[0]?.epoch), 2);
    await b.storage.append(Buffer.from('b-2'));
    // The same epoch opened again (a restarted master) fences the earlier open too.
    const c = await PostgresRegionStorage.open(options(prefix, { epoch: 2 }));
    assert.deepEqual(text(c.recovered.log), ['a-before', 'b-1', 'b-2']);
    await assert.rejects(b.storage.append(Buffer.from('b-3')), FencedError);
    const logged = await sql<{ record: Buffer }>(`SELECT record FROM ${prefix}_log ORDER BY seq`);
    assert.deepEqual(text(logged.map((r) => r.record)), ['a-before', 'b-1', 'b-2']);
    await Promise.all([a.storage.close(), b.storage.close(), c.storage.close()]);
    // Deleting the region (a dropped table) is refused to an older epoch, done by its owner.
    const destroy = (epoch?: number) =>
      PostgresRegionStorage.destroy({
        database: POSTGRES_URL,
        tablePrefix: prefix,
        region: 't/r1',
        ...(epoch === undefined ? {} : { epoch }),
      });
    await assert.rejects(destroy(1), FencedError);
    await assert.rejects(destroy(), FencedError);
    assert.equal((await sql(`SELECT seq FROM ${prefix}_log`)).length, 3);
    await destroy(2);
    assert.equal((await sql(`SELECT seq FROM ${prefix}_log`)).length, 0);
    assert.equal((await sql(`SELECT region FROM ${prefix}_regions`)).length, 0);
    const fresh = await PostgresRegionStorage.open(options(prefix, { epoch: 1 }));
    assert.deepEqual(fresh.recovered, { snapshot: [], log: [] });
    await fresh.storage.close();
  });

  it('a connection killed under a writer: pending appends reject as unknown, later ones too; a reopen has every acknowledged record', async () => {
    const prefix = freshPrefix();
    const region = `killed-${prefix}`;
    const { storage } = await PostgresRegionStorage.open(options(prefix, { region, epoch: 1 }));
    const acked: string[] = [];
    let next = 0;
    // 16 appenders, each appending until one of its appends is refused.
    const appenders = Array.from({ length: 16 }, async () => {
      for (;;) {
        const i = next++;
        try {
          await storage.append(Buffer.from(`k${i}`));
          acked.push(`k${i}`);
        } catch (err) {
          return err;
        }
      }
    });
    await eventually(() => acked.length > 100, 10_000, 'acknowledgements');
    await sql(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`,
      [`locksmith region ${region}`.slice(0, 60)],
    );
    for (const err of await Promise.all(appenders)) {
      assert.ok(err instanceof LockIOError && err.code === 'IO_ERROR', String(err));
    }
    await assert.rejects(storage.append(Buffer.from('after')), LockIOError);
    await storage.close();
    const again = await PostgresRegionStorage.open(options(prefix, { region, epoch: 2 }));
    const read = text(again.recovered.log);
    assert.deepEqual(
      read,
      read.map((_, i) => `k${i}`),
      'the log is a whole prefix',
    );
    assert.ok(read.length >= acked.length, `${read.length} read, ${acked.length} acknowledged`);
    await again.storage.close();
  });

  it('an open whose accept throws changes nothing and rethrows what accept threw', async () => {
    const prefix = freshPrefix();
    const first = await PostgresRegionStorage.open(options(prefix, { epoch: 3 }));
    await first.storage.append(Buffer.from('x'));
    const before = await sql(`SELECT epoch, generation FROM ${prefix}_regions`);
    const refusal = new Error('not this state');
    await assert.rejects(
      PostgresRegionStorage.open(options(prefix, { epoch: 4 }), () => {
        throw refusal;
      }),
      (err) => err === refusal,
    );
    assert.deepEqual(await sql(`SELECT epoch, generation FROM ${prefix}_regions`), before);
    await first.storage.append(Buffer.from('still mine'));
    await first.storage.close();
  });

  it('kill -9 of a writer loses no acknowledged record and tears no batch', async () => {
    const prefix = freshPrefix();
    const child = writer(prefix, 'r', 1, 'k');
    await eventually(() => child.acks().length >= 200, 30_000, 'acks from the writer');
    child.proc.kill('SIGKILL');
    await exitOf(child.proc);
    const acked = child.acks();
    const { storage, recovered } = await PostgresRegionStorage.open(
      options(prefix, { region: 'r', epoch: 2 }),
    );
    const got = text(recovered.log);
    // What is there is k-0 … k-(n-1) in order (call order is log order; a batch is whole).
    assert.deepEqual(
      got,
      got.map((_, i) => `k-${i}`),
    );
    for (const i of acked) assert.ok(i < got.length, `acknowledged k-${i} is missing`);
    await storage.close();
  });

  it("SIGSTOP of a writer while another server opens the region: what it acknowledged is in the new owner's read, and once resumed it is fenced", async () => {
    const prefix = freshPrefix();
    const child = writer(prefix, 'r', 1, 'p');
    await eventually(() => child.acks().length >= 100, 30_000, 'acks from the writer');
    child.proc.kill('SIGSTOP');
    const ackedBefore = new Set(child.acks());
    let owner: Awaited<ReturnType<typeof PostgresRegionStorage.open>> | undefined;
    try {
      owner = await PostgresRegionStorage.open(options(prefix, { region: 'r', epoch: 2 }));
    } finally {
      child.proc.kill('SIGCONT');
    }
    const read = new Set(text(owner.recovered.log));
    for (const i of ackedBefore) assert.ok(read.has(`p-${i}`), `acknowledged p-${i} was not read`);
    await eventually(() => child.failed() !== undefined, 30_000, 'the writer to be refused');
    assert.equal(child.failed(), 'FENCED');
    // Nothing the old writer sent after the open was committed: the log is what was read.
    const logged = await sql<{ record: Buffer }>(
      `SELECT record FROM ${prefix}_log WHERE region = 'r' ORDER BY seq`,
    );
    assert.deepEqual(text(logged.map((r) => r.record)), text(owner.recovered.log));
    // Every ack the writer printed (before or after the pause) was read by the new owner.
    for (const i of child.acks())
      assert.ok(read.has(`p-${i}`), `p-${i} acknowledged after the open`);
    await owner.storage.close();
  });

  it('refuses hostile options and records with a coded InvalidArgumentError, before connecting', async () => {
    const prefix = freshPrefix();
    const bad: [Partial<PostgresRegionStorageOptions>, RegExp][] = [
      [{ region: '' }, /region must be text/],
      [{ region: 'a\0b' }, /region must be text/],
      [{ region: 'x'.repeat(1001) }, /region must be text/],
      [{ tablePrefix: 'x; DROP TABLE pg_class' }, /SQL identifier/],
      [{ tablePrefix: 'a'.repeat(51) }, /too long|SQL identifier/],
      [{ epoch: 0 }, /epoch must be/],
      [{ epoch: 1.5 }, /epoch must be/],
      [{ epoch: '2' as unknown as number }, /epoch must be/],
      [{ durability: 'sometimes' as 'none' }, /durability/],
      [{ database: 'mysql://root@127.0.0.1/test' }, /postgres:\/\//],
      [{ directory: '' }, /directory/],
    ];
    for (const [extra, message] of bad) {
      await assert.rejects(
        PostgresRegionStorage.open(options(prefix, extra)),
        (err: unknown) =>
          err instanceof InvalidArgumentError &&
          err.code === 'INVALID_ARGUMENT' &&
          message.test(err.message),
        JSON.stringify(extra).slice(0, 80),
      );
    }
    const { storage } = await PostgresRegionStorage.open(options(prefix));
    await assert.rejects(storage.append('text' as unknown as Uint8Array), InvalidArgumentError);
    await assert.rejects(
      storage.checkpoint(() => [42 as unknown as Uint8Array]),
      InvalidArgumentError,
    );
    // A refused call does not poison the storage.
    await storage.append(Buffer.from('fine'));
    await storage.close();
    // A password never shows in a connection failure.
    await assert.rejects(
      PostgresRegionStorage.open(
        options(prefix, { database: 'postgres://u:hunter2@127.0.0.1:1/test' }),
      ),
      (err: unknown) => err instanceof LockIOError && !err.message.includes('hunter2'),
    );
  });

  it('a user without CREATE on the schema works on tables an administrator created', async () => {
    // A schema of its own: the user gets USAGE on it, never CREATE.
    const schema = `lsm_s_${randomBytes(4).toString('hex')}`;
    const role = `lsm_user_${randomBytes(4).toString('hex')}`;
    const prefix = `${schema}.t`;
    await sql(`CREATE SCHEMA ${schema}`);
    await sql(`CREATE ROLE ${role} LOGIN`);
    try {
      // The administrator creates the tables (by a first open) and grants the four.
      const { storage } = await PostgresRegionStorage.open(options(prefix));
      await storage.close();
      await sql(`GRANT USAGE ON SCHEMA ${schema} TO ${role}`);
      await sql(
        `GRANT SELECT, INSERT, UPDATE, DELETE ON ${prefix}_schema, ${prefix}_regions, ${prefix}_log, ${prefix}_snapshots, ${prefix}_tables TO ${role}`,
      );
      const url = POSTGRES_URL.replace(/\/\/[^@/]*@/, `//${role}@`);
      const mine = await PostgresRegionStorage.open(
        options(prefix, { database: url, region: 'u' }),
      );
      await mine.storage.append(Buffer.from('by the user'));
      await mine.storage.checkpoint(() => [Buffer.from('snap')]);
      await mine.storage.close();
      // Without the tables it cannot create them: a clear error, not a hang.
      await assert.rejects(
        PostgresRegionStorage.open(options(`${schema}.other`, { database: url })),
        (err: unknown) => err instanceof LockIOError && /permission denied/.test(err.message),
      );
    } finally {
      await sql(`DROP SCHEMA ${schema} CASCADE`);
      await sql(`DROP ROLE ${role}`);
    }
  });

  it('refuses tables of a newer schema version, and regions outside the root', async () => {
    const prefix = freshPrefix();
    const { storage } = await PostgresRegionStorage.open(options(prefix));
    await storage.close();
    await sql(`UPDATE ${prefix}_schema SET version = 2`);
    await assert.rejects(
      PostgresRegionStorage.open(options(prefix)),
      (err: unknown) => err instanceof LockIOError && /schema version 2/.test(err.message),
    );
    const root = join(dirs.path, 'root');
    const open = postgresRegionStorage({
      database: POSTGRES_URL,
      root,
      tablePrefix: freshPrefix(),
    });
    await assert.rejects(
      open(join(root, '..', 'elsewhere'), { durability: 'fsync' }, () => {}),
      InvalidArgumentError,
    );
    const opened = await open(join(root, 'tables', 't', 'r1'), { durability: 'fsync' }, () => {});
    assert.equal((opened.storage as PostgresRegionStorage).region, 'tables/t/r1');
    await opened.storage.close();
  });
});

describe('a Region on the PostgreSQL storage', () => {
  it('puts survive a reopen from another local directory, across checkpoints; a newer epoch fences the old region', async () => {
    const prefix = freshPrefix();
    const rootA = join(dirs.path, 'machine-a');
    const rootB = join(dirs.path, 'machine-b');
    // The same region name from two "machines": nothing of the data is in their directories.
    const region = (root: string, epoch: number) =>
      Region.open({
        families: ['f'],
        dir: join(root, 't', 'r'),
        epoch,
        checkpointBytes: 4096,
        openStorage: postgresRegionStorage({ database: POSTGRES_URL, root, tablePrefix: prefix }),
      });
    const a = await region(rootA, 1);
    await Promise.all(
      Array.from({ length: 400 }, (_, i) => a.put(new Put(`r${i}`).add('f', 'q', `v${i}`))),
    );
    await a.flush();
    const checkpoints = Number(
      (
        await sql<{ n: string }>(`SELECT count(DISTINCT snapshot_id) AS n FROM ${prefix}_snapshots`)
      )[0]?.n,
    );
    assert.ok(checkpoints >= 1, 'a checkpoint ran');
    const b = await region(rootB, 2);
    for (const i of [0, 199, 399]) {
      assert.deepEqual(values((await b.get(new Get(`r${i}`))).cells), [`v${i}`]);
    }
    await assert.rejects(a.put(new Put('late').add('f', 'q', 'x')), { code: 'FENCED' });
    assert.equal((await b.get(new Get('late'))).cells.length, 0);
    await b.put(new Put('r0').add('f', 'q', 'new'));
    await b.close();
    await a.close().catch(() => undefined);
    const c = await region(rootA, 3);
    assert.deepEqual(values((await c.get(new Get('r0'))).cells), ['new']);
    assert.equal((await c.get(new Get('late'))).cells.length, 0);
    await c.close();
  });
});

describe('row-lock tokens on the PostgreSQL storage', () => {
  it('keep increasing when another machine opens the region, even one whose wall clock is an hour behind', async () => {
    const prefix = freshPrefix();
    const open = (machine: string, epoch: number, behindMs: number) => {
      const root = join(dirs.path, `tokens-${machine}`);
      return Region.open({
        families: ['f'],
        dir: join(root, 't', 'r'),
        epoch,
        clock: { ...systemClock, wall: () => Date.now() - behindMs },
        openStorage: postgresRegionStorage({ database: POSTGRES_URL, root, tablePrefix: prefix }),
      });
    };
    const a = await open('a', 1, 0);
    const first = await a.lockRow('row');
    const tokenA = first.token;
    await first.release();
    await a.close();
    // Machine b starts with nothing on its disk and a clock an hour behind a's.
    const b = await open('b', 2, 3_600_000);
    const second = await b.lockRow('row');
    assert.ok(second.token > tokenA, `${second.token} > ${tokenA}`);
    await second.release();
    await b.close();
    // The negative control: the same on files, two directories: b's tokens fall behind a's.
    const files = async (machine: string, behindMs: number) => {
      const region = await Region.open({
        families: ['f'],
        dir: join(dirs.path, `files-${machine}`),
        clock: { ...systemClock, wall: () => Date.now() - behindMs },
      });
      const lock = await region.lockRow('row');
      const token = lock.token;
      await lock.release();
      await region.close();
      return token;
    };
    const onA = await files('a', 0);
    assert.ok((await files('b', 3_600_000)) < onA, 'files on another machine do not carry tokens');
  });
});

describe('a server on the PostgreSQL storage', () => {
  it('keeps its tables there: rows survive a restart, and a table dropped and created again starts empty', async () => {
    const prefix = freshPrefix();
    const dataDir = join(dirs.path, 'server');
    const listen = () =>
      LocksmithServer.listen({
        dataDir,
        port: 0,
        openStorage: postgresRegionStorage({
          database: POSTGRES_URL,
          root: dataDir,
          tablePrefix: prefix,
        }),
      });
    let server = await listen();
    try {
      let client = await connect(`locksmith://127.0.0.1:${server.port}`);
      await client.createTable('t', ['f']);
      await client.table('t').put(new Put('a').add('f', 'q', '1'));
      await client.close();
      await server.close();
      const regions = await sql<{ region: string }>(
        `SELECT region FROM ${prefix}_regions ORDER BY region`,
      );
      assert.ok(
        regions.some((r) => r.region === 'tables/t'),
        JSON.stringify(regions),
      );

      server = await listen();
      client = await connect(`locksmith://127.0.0.1:${server.port}`);
      assert.deepEqual(values((await client.table('t').get(new Get('a'))).cells), ['1']);
      await client.dropTable('t');
      assert.deepEqual(
        await sql(`SELECT region FROM ${prefix}_regions WHERE region = 'tables/t'`),
        [],
      );
      await client.createTable('t', ['f']);
      assert.equal((await client.table('t').get(new Get('a'))).cells.length, 0);
      await client.table('t').put(new Put('b').add('f', 'q', '2'));
      await client.close();
      await server.close();

      // Another machine: an empty data directory finds the same tables and rows in PostgreSQL.
      const elsewhere = join(dirs.path, 'server-elsewhere');
      server = await LocksmithServer.listen({
        dataDir: elsewhere,
        port: 0,
        openStorage: postgresRegionStorage({
          database: POSTGRES_URL,
          root: elsewhere,
          tablePrefix: prefix,
        }),
      });
      client = await connect(`locksmith://127.0.0.1:${server.port}`);
      assert.deepEqual(await client.listTables(), ['t']);
      assert.deepEqual(values((await client.table('t').get(new Get('b'))).cells), ['2']);
      await client.close();
    } finally {
      await server.close();
    }
  });

  it("the catalog is fenced like a region: a newer owner refuses the older one's create and drop", async () => {
    const prefix = freshPrefix();
    const old = await PostgresCatalogStore.open({
      database: POSTGRES_URL,
      tablePrefix: prefix,
      epoch: 1,
    });
    await old.add(checkTableDescriptor('t1', ['f'], {}));
    await assert.rejects(old.add(checkTableDescriptor('t1', ['f'], {})), { code: 'TABLE_EXISTS' });
    const current = await PostgresCatalogStore.open({
      database: POSTGRES_URL,
      tablePrefix: prefix,
      epoch: 2,
    });
    assert.deepEqual(
      (await current.load()).map((d) => d.name),
      ['t1'],
    );
    await assert.rejects(old.add(checkTableDescriptor('t2', ['f'], {})), FencedError);
    await assert.rejects(old.remove('t1'), FencedError);
    await assert.rejects(
      PostgresCatalogStore.open({ database: POSTGRES_URL, tablePrefix: prefix, epoch: 1 }),
      FencedError,
    );
    await current.remove('t1');
    await current.add(checkTableDescriptor('t3', ['g'], {}));
    const names = await sql<{ name: string }>(`SELECT name FROM ${prefix}_tables ORDER BY name`);
    assert.deepEqual(
      names.map((r) => r.name),
      ['t3'],
    );
    await old.close();
    await current.close();
  });
});

/** The writer fixture on region `region` of `prefix`, its acks and its failure collected. */
function writer(prefix: string, region: string, epoch: number, tag: string) {
  const proc: ChildProcess = orphanProof(
    spawn(process.execPath, [WRITER, POSTGRES_URL, prefix, region, String(epoch), tag], {
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  const output = collectOutput(proc);
  const lines = () =>
    output
      .stdout()
      .split('\n')
      .filter((l) => l.length > 0);
  return {
    proc,
    stderr: output.stderr,
    acks: () =>
      lines()
        .filter((l) => l.startsWith('ack '))
        .map((l) => Number(l.slice(4))),
    failed: () =>
      lines()
        .find((l) => l.startsWith('failed '))
        ?.slice(7),
  };
}
