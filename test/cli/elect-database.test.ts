import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { dropTable, type Kind, uniqueTable, urlOf } from '../fixtures/db-servers.js';
import {
  type Elect,
  electedPair,
  killMaster,
  recordingCommand,
  spawnElect,
  terminate,
  tokenOf,
} from '../fixtures/elect-process.js';
import { assertCleanRun, verifyRun } from '../fixtures/verify-run.js';
import { cliPath, run, tempDir } from '../helpers.js';

interface Scenario {
  kind: 'lease-database' | 'database';
  /** Timing options for the contenders. */
  timing: string[];
  /** The failover bound the locker promises for these timings, with slack, in ms. */
  failoverMs: number;
  /** What `--fail-if-locked` says while another process is master. */
  busy: (table: string) => RegExp;
}

const SCENARIOS: Scenario[] = [
  {
    kind: 'lease-database',
    // A 1 s lease renewed every 250 ms: a kill -9 failover takes at most one lease (+ a poll).
    timing: ['--lease', '1s', '--renew', '250ms'],
    failoverMs: 2500,
    busy: (table) => new RegExp(`stopped: Lease ${table} .* is held by`),
  },
  {
    kind: 'database',
    // The row lock frees when the master's connection dies; the slave retries every 200 ms (on
    // PostgreSQL and MariaDB it waits in the database) and pauses renew + query timeout
    // (300 ms + 2 s) before it reports mastership.
    timing: ['--renew', '300ms', '--acquire-interval', '200ms'],
    failoverMs: 4000,
    busy: () => /stopped: /,
  },
];

/**
 * Two contenders on one database: one master; kill -9 of the master kills its command at
 * once and the slave takes over within the locker's bound, with a larger token; SIGTERM to
 * the new master releases at once (a `--fail-if-locked` newcomer is master immediately).
 */
async function failover(
  { kind, timing, failoverMs, busy: busyPattern }: Scenario,
  db: string,
  table: string,
  dir: string,
): Promise<number> {
  const log = join(dir, 'runs.log');
  const locker = ['--locker', kind, '--db', db, '--table', table];
  const start = (id: string): Elect => spawnElect(locker, id, recordingCommand(log), timing);
  const a = start('a');
  const b = start('b');
  try {
    // 1.5 s: several renewals and acquire attempts; the slave stays out.
    const { first, second, command: run1 } = await electedPair(a, b, log, 1500);

    // While a master holds the lock, --fail-if-locked gives up at once.
    const busy = await run([
      cliPath,
      'elect',
      ...locker,
      '--id',
      'f',
      '--fail-if-locked',
      '--',
      'true',
    ]);
    assert.equal(busy.code, 1);
    assert.match(busy.stderr, busyPattern(table));

    const { failover, command: run2 } = await killMaster(
      first,
      second,
      log,
      run1,
      failoverMs + 2000,
    );
    assert.ok(failover < failoverMs, `failover took ${failover} ms (bound ${failoverMs} ms)`);

    // A graceful stop releases the lock: the next contender is master at once.
    await terminate(second, run2);
    const t0 = Date.now();
    const after = await run([
      cliPath,
      'elect',
      ...locker,
      '--id',
      'c',
      ...timing,
      '--fail-if-locked',
      '--',
      'sh',
      '-c',
      'exit 4',
    ]);
    assert.equal(after.code, 4, after.stderr);
    assert.ok(Date.now() - t0 < failoverMs, `the newcomer took ${Date.now() - t0} ms`);
    assert.match(after.stderr, /became master with token (\d+)/);
    assert.ok(tokenOf(after.stderr) > run2.token);
    return failover;
  } finally {
    a.child.kill('SIGKILL');
    b.child.kill('SIGKILL');
  }
}

const CONTENDERS = 3;

for (const db of ['sqlite', 'postgres', 'mysql'] as const satisfies readonly Kind[]) {
  describe(`elect on ${db}`, () => {
    const tmp = tempDir();
    const tables: string[] = [];
    const table = () => {
      const t = db === 'sqlite' ? 'ELECT_LOCK' : uniqueTable();
      tables.push(t);
      return t;
    };
    after(async () => {
      for (const t of tables) await dropTable(db, t);
      tmp[Symbol.dispose]();
    });

    for (const scenario of SCENARIOS) {
      it(`elect --locker ${scenario.kind} (${db}): one master, kill -9 failover within the bound, larger token, graceful release`, async (t) => {
        using dir = tempDir();
        const ms = await failover(scenario, urlOf(db, dir.path), table(), dir.path);
        t.diagnostic(`failover after kill -9: ${ms} ms (bound ${scenario.failoverMs} ms)`);
      });

      if (db === 'sqlite') continue; // SQLite's witness run is the store tests' (db-contender)
      // Each round is a new elect process that runs its command once; the database locker's
      // rounds each take a takeover pause (renew + query timeout), hence fewer of them.
      const rounds = scenario.kind === 'lease-database' ? 3 : 2;
      it(`${CONTENDERS} elect --locker ${scenario.kind} processes (${db}) over ${rounds} rounds each: the verify server sees no two commands at once`, async (t) => {
        const tb = table();
        const t0 = Date.now();
        const run = await verifyRun('elect-contender', CONTENDERS, (port, id) => [
          String(port),
          String(id),
          String(rounds),
          '--locker',
          scenario.kind,
          '--db',
          urlOf(db, tmp.path),
          '--table',
          tb,
          ...scenario.timing,
        ]);
        assertCleanRun(run, rounds);
        t.diagnostic(`${CONTENDERS * rounds} masterships in ${Date.now() - t0} ms`);
      });
    }
  });
}
