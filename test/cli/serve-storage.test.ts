// `serve --storage postgres://…`: two servers with data directories of their own (no shared
// filesystem), master/slave through lease-database on the test PostgreSQL: kill -9 of the
// master, and the other serves every acknowledged row. Misuse is a one-line usage error.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pg from 'pg';
import { connect } from '../../src/client/locksmith-client.js';
import { Get, Put } from '../../src/rows/index.js';
import { POSTGRES_URL } from '../fixtures/db-servers.js';
import { cliPath, exitOf, orphanProof, run, tempDir, waitForLine } from '../helpers.js';
import { freePort } from '../store/etcd-cluster.js';

async function sql(text: string): Promise<void> {
  const c = new pg.Client({ connectionString: POSTGRES_URL });
  await c.connect();
  try {
    await c.query(text);
  } finally {
    await c.end();
  }
}

describe('serve --storage postgres://', () => {
  it('two servers on their own data directories: kill -9 of the master, the other serves every acknowledged row', async () => {
    using dirs = tempDir();
    const prefix = `lsm_${randomBytes(4).toString('hex')}`;
    const lockTable = `LOCK_${randomBytes(4).toString('hex').toUpperCase()}`;
    const start = async (name: string) => {
      const port = await freePort();
      const proc = orphanProof(
        spawn(
          process.execPath,
          [
            cliPath,
            'serve',
            ...['--data', join(dirs.path, name), '--port', String(port)],
            ...['--storage', POSTGRES_URL, '--storage-prefix', prefix],
            ...['--ha', 'lease-database', '--db', POSTGRES_URL, '--lock-table', lockTable],
            ...['--lease', '2s', '--renew', '500ms'],
          ],
          { stdio: ['ignore', 'pipe', 'pipe'] },
        ),
      );
      return { proc, address: `127.0.0.1:${port}` };
    };
    const a = await start('a');
    let b: Awaited<ReturnType<typeof start>> | undefined;
    try {
      await waitForLine(a.proc, /master \(token/, 30_000);
      b = await start('b');
      await waitForLine(b.proc, /slave/, 30_000);
      const client = await connect(`locksmith://${a.address},${b.address}`);
      await client.createTable('t', ['f']);
      const acked: number[] = [];
      for (let i = 0; i < 50; i++) {
        await client.table('t').put(new Put(`r${i}`).add('f', 'q', `v${i}`));
        acked.push(i);
      }
      a.proc.kill('SIGKILL');
      await exitOf(a.proc);
      await waitForLine(b.proc, /master \(token/, 30_000);
      // The same client follows the new master; every row it was told is stored is there.
      for (const i of acked) {
        const row = await client.table('t').get(new Get(`r${i}`));
        assert.equal(Buffer.from(row.cells[0]?.value ?? []).toString(), `v${i}`);
      }
      await client.close();
    } finally {
      a.proc.kill('SIGKILL');
      b?.proc.kill('SIGKILL');
      await exitOf(a.proc);
      if (b !== undefined) await exitOf(b.proc);
      await sql(
        `DROP TABLE IF EXISTS ${prefix}_schema, ${prefix}_regions, ${prefix}_log, ${prefix}_snapshots, ${prefix}_tables, ${lockTable}`,
      );
    }
  });

  it('misuse is a one-line usage error (exit 2)', async () => {
    using dir = tempDir();
    const data = ['--data', join(dir.path, 'd'), '--port', '0'];
    for (const [args, message] of [
      [['--storage', 'mysql://root@127.0.0.1/test'], /--storage: .*postgres:\/\//],
      [['--storage', POSTGRES_URL, '--storage-prefix', 'x;drop'], /SQL identifier/],
      [['--storage-prefix', 'abc'], /only with --storage/],
      [['--storage', POSTGRES_URL, '--ha', 'shared-file'], /shared-file needs/],
    ] as const) {
      const r = await run([cliPath, 'serve', ...data, ...args]);
      assert.equal(r.code, 2, r.stderr);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.match(r.stderr, message);
    }
  });
});
