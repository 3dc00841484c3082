import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgumentError, LockIOError } from '../../src/core/errors.js';
import { checkIdentifier, parseDatabaseUrl, redactUrl } from '../../src/store/index.js';
import { ensureLockTable } from '../../src/store/sql/lock-table.js';
import { openDialect } from '../../src/store/sql/open-dialect.js';
import { admin, dropTable, KINDS, uniqueTable, urlOf } from '../fixtures/db-servers.js';
import { tempDir } from '../helpers.js';

describe('SQL identifiers and URLs', () => {
  it('accepts plain and schema-qualified identifiers, refuses anything that could inject', () => {
    for (const ok of ['ACTIVEMQ_LOCK', 'lock_1', '_x', 'public.ACTIVEMQ_LOCK', 'a'.repeat(63)]) {
      assert.equal(checkIdentifier(ok, 'lockTableName'), ok);
    }
    for (const bad of [
      '',
      '1abc',
      'a-b',
      'a b',
      'x;DROP TABLE y',
      "x'--",
      'x"y',
      'a.b.c',
      '.a',
      'a.',
      'a'.repeat(64),
      'é',
      42,
      null,
    ]) {
      assert.throws(() => checkIdentifier(bad, 'lockTableName'), InvalidArgumentError, String(bad));
    }
  });

  it('parses the three URL schemes and hides passwords in messages', () => {
    assert.deepEqual(parseDatabaseUrl('sqlite:/var/lib/x.db'), {
      kind: 'sqlite',
      path: '/var/lib/x.db',
    });
    assert.deepEqual(parseDatabaseUrl('sqlite://rel/x.db'), { kind: 'sqlite', path: 'rel/x.db' });
    // A value with no scheme is a SQLite file, as every command takes it.
    assert.deepEqual(parseDatabaseUrl('./lease.db'), { kind: 'sqlite', path: './lease.db' });
    assert.deepEqual(parseDatabaseUrl('/var/lib/x.db'), { kind: 'sqlite', path: '/var/lib/x.db' });
    assert.deepEqual(parseDatabaseUrl('lease.db'), { kind: 'sqlite', path: 'lease.db' });
    assert.equal(parseDatabaseUrl('postgresql://u@h/db').kind, 'postgres');
    assert.equal(parseDatabaseUrl('mariadb://u@h/db').kind, 'mysql');
    assert.equal(redactUrl('postgres://user:secret@host/db'), 'postgres://user:***@host/db');
    try {
      parseDatabaseUrl('ftp://user:secret@host/x');
      assert.fail('accepted');
    } catch (err) {
      assert.ok(err instanceof InvalidArgumentError);
      assert.doesNotMatch(err.message, /secret/);
    }
  });
});

for (const kind of KINDS) {
  describe(`lock table on ${kind}`, () => {
    it('creation is idempotent and safe under 8 concurrent start-ups: one row ID=1 with EPOCH', async () => {
      using dir = tempDir();
      const table = uniqueTable();
      const dialects = Array.from({ length: 8 }, () => openDialect(urlOf(kind, dir.path)));
      try {
        await Promise.all(dialects.map((d) => ensureLockTable(d, table)));
        await ensureLockTable(dialects[0] as (typeof dialects)[0], table);
        const r = await (dialects[0] as (typeof dialects)[0]).query(
          `SELECT ID, TIME, BROKER_NAME, EPOCH FROM ${table}`,
        );
        assert.equal(r.rows.length, 1);
        const row = Object.fromEntries(
          Object.entries(r.rows[0] ?? {}).map(([k, v]) => [k.toUpperCase(), v]),
        );
        assert.equal(Number(row.ID), 1);
        assert.equal(Number(row.EPOCH), 0);
        assert.equal(row.BROKER_NAME, null);
      } finally {
        await Promise.all(dialects.map((d) => d.close()));
        await dropTable(kind, table);
      }
    });

    it('never waits for a session holding the table: an uncommitted seed row, an EPOCH-less table held by a master', async () => {
      using dir = tempDir();
      const table = uniqueTable();
      const d = openDialect(urlOf(kind, dir.path));
      // Settles, or says it waited on the holder: the holder never ends by itself here, so
      // a wait would last until the (generous) limit.
      const settles = async (p: Promise<void>) => {
        let timer: NodeJS.Timeout | undefined;
        const limit = new Promise<'waited'>((r) => {
          timer = setTimeout(() => r('waited'), 60_000);
        });
        try {
          return await Promise.race([
            p.then(
              () => 'ok' as const,
              (e: unknown) => e,
            ),
            limit,
          ]);
        } finally {
          clearTimeout(timer);
        }
      };
      const seed = `INSERT INTO ${table} (ID, TIME, BROKER_NAME) VALUES (1, 0, NULL)`;
      const begin = kind === 'sqlite' ? 'BEGIN IMMEDIATE' : 'BEGIN';
      try {
        // 1. Another contender created the table and is seeding it (not yet committed).
        await d.query(
          `CREATE TABLE ${table} (ID BIGINT NOT NULL PRIMARY KEY, TIME BIGINT, BROKER_NAME VARCHAR(250), EPOCH BIGINT DEFAULT 0)`,
        );
        const holder = await d.connect();
        await holder.query(begin);
        await holder.query(seed);
        const first = await settles(ensureLockTable(d, table));
        assert.ok(first instanceof LockIOError, String(first));
        await holder.query('COMMIT');
        holder.destroy();
        assert.equal(await settles(ensureLockTable(d, table)), 'ok');
        await d.query(`DROP TABLE ${table}`);

        // 2. An ActiveMQ table (no EPOCH) whose row a master holds in an open transaction.
        await d.query(
          `CREATE TABLE ${table} (ID BIGINT NOT NULL PRIMARY KEY, TIME BIGINT, BROKER_NAME VARCHAR(250))`,
        );
        await d.query(seed);
        const master = await d.connect();
        await master.query(begin);
        await master.query(
          `SELECT ID FROM ${table} WHERE ID = 1${kind === 'sqlite' ? '' : ' FOR UPDATE'}`,
        );
        const second = await settles(ensureLockTable(d, table));
        assert.ok(
          second instanceof LockIOError && /no EPOCH column.*ADD COLUMN/.test(second.message),
          String(second),
        );
        await master.query('ROLLBACK');
        master.destroy();
        assert.equal(await settles(ensureLockTable(d, table)), 'ok');
        assert.equal((await d.query(`SELECT EPOCH FROM ${table} WHERE ID = 1`)).rows.length, 1);
      } finally {
        await d.close();
        await dropTable(kind, table);
      }
    });
  });
}

describe('lock table schema', () => {
  it('matches ActiveMQ on PostgreSQL: ID bigint not null primary key, TIME bigint, BROKER_NAME varchar(250), plus EPOCH', async () => {
    const table = uniqueTable();
    const d = openDialect(urlOf('postgres', '/tmp'));
    try {
      await ensureLockTable(d, table);
      const cols = (await admin(
        'postgres',
        `SELECT column_name, data_type, character_maximum_length, is_nullable FROM information_schema.columns WHERE table_name = '${table.toLowerCase()}' ORDER BY ordinal_position`,
      )) as Record<string, unknown>[];
      assert.deepEqual(
        cols.map((c) => [c.column_name, c.data_type, c.character_maximum_length, c.is_nullable]),
        [
          ['id', 'bigint', null, 'NO'],
          ['time', 'bigint', null, 'YES'],
          ['broker_name', 'character varying', 250, 'YES'],
          ['epoch', 'bigint', null, 'YES'],
        ],
      );
    } finally {
      await d.close();
      await dropTable('postgres', table);
    }
  });
});
