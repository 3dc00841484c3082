import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { admin, dropTable, type Kind, uniqueTable, urlOf } from '../fixtures/db-servers.js';
import {
  type Elect,
  electedPair,
  killMaster,
  recordingCommand,
  runElect,
  spawnElect,
  terminate,
  tokenOf,
} from '../fixtures/elect-process.js';
import { assertCleanRun, verifyRun } from '../fixtures/verify-run.js';
import { cliPath, exitOf, run, sleep, tempDir } from '../helpers.js';

interface Scenario {
  kind: 'lease-database' | 'database';
  /** Timing options for the contenders. */
  timing: string[];
  /**
   * The failover bound the locker promises for these timings, in ms: checked with a generous
   * margin (twice it, plus 5 s) against a loaded machine; the measured time is reported.
   */
  failoverMs: number;
  /** What `--fail-if-locked` says while another process is master. */
  busy: (table: string) => RegExp;
}

const SCENARIOS: Scenario[] = [
  {
    kind: 'lease-database',
    // A 1 s lease renewed every 250 ms: a kill -9 failover takes at most one lease (+ a poll).
    timing: ['--lease', '1s', '--renew', '250ms'],
    failoverMs: 1250,
    busy: (table) =>
      new RegExp(
        `stopped: another process is master \\(--fail-if-locked\\): Lease ${table} .* is held by`,
      ),
  },
  {
    kind: 'database',
    // The row lock frees when the master's connection dies; the slave retries every 200 ms (on
    // PostgreSQL and MariaDB it waits in the database) and pauses renew + query timeout
    // (300 ms + 2 s) before it reports mastership.
    timing: ['--renew', '300ms', '--acquire-interval', '200ms'],
    failoverMs: 2500,
    busy: (table) =>
      new RegExp(
        `stopped: another process is master \\(--fail-if-locked\\): Lock row of ${table} .* is held by`,
      ),
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
): Promise<{ failover: number; newcomerMs: number }> {
  let newcomerMs = 0;
  const log = join(dir, 'runs.log');
  const locker = ['--locker', kind, '--db', db, '--table', table];
  const start = (id: string): Elect => spawnElect(locker, id, recordingCommand(log), timing);
  const a = start('a');
  const b = start('b');
  try {
    // 1.5 s: several renewals and acquire attempts; the slave stays out.
    const { first, second, command: run1 } = await electedPair(a, b, log, 1500);

    // While a master holds the lock, --fail-if-locked gives up at once.
    const busy = await runElect(locker, 'f', ['true'], ['--fail-if-locked']);
    assert.equal(busy.code, 1);
    assert.match(busy.stderr, busyPattern(table));
    // It looked, found a master and gave up: it never claims to wait.
    assert.doesNotMatch(busy.stderr, /waiting as slave/);
    if (kind === 'database') {
      // The takeover pause (renew + query timeout) is announced, not sat through silently.
      assert.match(
        first.lines[0] ?? '',
        /trying to become master .*pausing 2\.3 s before taking over, as ActiveMQ's DatabaseLocker does/,
      );
    }

    const { failover, command: run2 } = await killMaster(
      first,
      second,
      log,
      run1,
      failoverMs * 2 + 5000,
    );

    // A graceful stop releases the lock: the next contender is master at once.
    await terminate(second, run2);
    const t0 = Date.now();
    const after = await runElect(
      locker,
      'c',
      ['sh', '-c', 'exit 4'],
      [...timing, '--fail-if-locked'],
    );
    // Released, not expired: --fail-if-locked would exit 1 on a lease or row still held.
    assert.equal(after.code, 4, after.stderr);
    newcomerMs = Date.now() - t0;
    assert.match(after.stderr, /became master with token (\d+)/);
    assert.ok(tokenOf(after.stderr) > run2.token);
    return { failover, newcomerMs };
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

    it(`elect --locker lease-database (${db}): a lease past 2^31-1 ms is refused before anything is taken; a 500 h lease works and SIGTERM releases it`, async () => {
      using dir = tempDir();
      const url = urlOf(db, dir.path);
      const tb = table();
      const locker = ['--locker', 'lease-database', '--db', url, '--table', tb];
      const refused = await run([
        cliPath,
        'elect',
        ...locker,
        '--id',
        'huge',
        '--lease',
        '600h',
        '--',
        'true',
      ]);
      assert.equal(refused.code, 2, refused.stderr);
      assert.match(refused.stderr, /Invalid --lease "600h": longer than the longest duration/);
      assert.equal(refused.stderr.trim().split('\n').length, 1, refused.stderr);
      if (db === 'sqlite') assert.ok(!existsSync(join(dir.path, 'lock.db')));
      else {
        const found = await admin(
          db,
          db === 'postgres'
            ? `SELECT 1 FROM information_schema.tables WHERE upper(table_name) = '${tb}'`
            : `SELECT 1 FROM information_schema.tables WHERE table_schema = DATABASE() AND upper(table_name) = '${tb}'`,
        );
        assert.equal(found.length, 0, 'no table was created');
      }

      // 500 h fits in a timer: master at once, no TimeoutOverflowWarning, and a SIGTERM gives
      // the lease back (a --fail-if-locked newcomer with the same lease is master at once).
      const long = ['--lease', '500h', '--renew', '1s'];
      const pidFile = join(dir.path, 'pid');
      const master = spawnElect(
        locker,
        'long',
        ['sh', '-c', `echo $$ > ${pidFile}; exec sleep 1000`],
        long,
      );
      try {
        await master.line(/became master/, 1, 20_000);
        await sleep(1500); // a renewal
        master.child.kill('SIGTERM');
        assert.deepEqual(await exitOf(master.child), { code: 143, signal: null });
        assert.ok(
          !master.lines.some((l) => /TimeoutOverflowWarning|warning/i.test(l)),
          JSON.stringify(master.lines),
        );
        const next = await run([
          cliPath,
          'elect',
          ...locker,
          '--id',
          'next',
          ...long,
          '--fail-if-locked',
          '--',
          'true',
        ]);
        assert.equal(next.code, 0, next.stderr);
        assert.doesNotMatch(next.stderr, /TimeoutOverflowWarning/);
      } finally {
        master.child.kill('SIGKILL');
      }
    });

    for (const scenario of SCENARIOS) {
      it(`elect --locker ${scenario.kind} (${db}): one master, kill -9 failover within the bound, larger token, graceful release`, async (t) => {
        using dir = tempDir();
        const r = await failover(scenario, urlOf(db, dir.path), table(), dir.path);
        t.diagnostic(
          `failover after kill -9: ${r.failover} ms (bound ${scenario.failoverMs} ms); master after a graceful release: ${r.newcomerMs} ms`,
        );
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
