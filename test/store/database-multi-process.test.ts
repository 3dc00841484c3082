import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LockViolationError } from '../../src/core/errors.js';
import { KINDS, urlOf } from '../fixtures/db-servers.js';
import { masterToken, spawnFixture } from '../fixtures/fixture-process.js';
import { assertCleanRun, verifyRun } from '../fixtures/verify-run.js';
import { eventually, exitOf, sleep } from '../helpers.js';
import { killMasterFailover, scratchTables } from './store-helpers.js';

const CONTENDERS = 3;
const ROUNDS = 10;

describe('database lockers across processes', () => {
  const { dir, table } = scratchTables();

  for (const locker of ['lease', 'database'] as const) {
    for (const kind of KINDS) {
      it(`${CONTENDERS} ${locker} contenders on ${kind} over ${ROUNDS} rounds each: the verify server sees no overlap`, async () => {
        const t = table(kind);
        const run = await verifyRun('db-contender', CONTENDERS, (port, id) => [
          locker,
          urlOf(kind, dir.path),
          t,
          String(port),
          String(id),
          String(ROUNDS),
          '100',
        ]);
        assertCleanRun(run, ROUNDS);
      });
    }
  }

  it('the same witness catches a broken lease locker that ignores expiry', async () => {
    const t = table('postgres');
    const { result } = await verifyRun('db-contender', CONTENDERS, (port, id) => [
      'broken-lease',
      urlOf('postgres', dir.path),
      t,
      String(port),
      String(id),
      String(40),
      '100',
    ]);
    assert.equal(result.ok, false);
    assert.ok(result.failures[0] instanceof LockViolationError, String(result.failures[0]));
  });

  it('SIGSTOP of the lease master past its lease, then SIGCONT: the slave took over, the old master demotes at once with an older token', async (t) => {
    const tb = table('postgres');
    const args = ['lease', urlOf('postgres', dir.path), tb, '1000', '250'];
    const a = spawnFixture('db-supervised', args);
    await eventually(() => a.line(/^master \d+/) !== undefined, 10_000);
    const tokenA = masterToken(a);
    const b = spawnFixture('db-supervised', args);
    await eventually(() => b.line(/^waiting$/) !== undefined, 10_000);
    a.proc.kill('SIGSTOP');
    await eventually(() => b.line(/^master \d+/) !== undefined, 5_000);
    const tokenB = masterToken(b);
    const t0 = performance.now();
    a.proc.kill('SIGCONT');
    await eventually(() => a.line(/^demoted/) !== undefined, 3_000);
    t.diagnostic(`old master demoted ${(performance.now() - t0).toFixed(0)} ms after SIGCONT`);
    // Its renewals stalled past the lease: a self-fenced lease says so (LEASE_EXPIRED).
    assert.match(a.line(/^demoted/) ?? '', new RegExp(`^demoted ${tokenA} LEASE_EXPIRED$`));
    assert.ok(tokenB > tokenA);
    assert.equal(b.line(/^demoted/), undefined, 'the new master kept its lease');
    for (const c of [a, b]) c.proc.stdin?.write('stop\n');
    await Promise.all([exitOf(a.proc), exitOf(b.proc)]);
  });

  it('graceful stop of the lease master: the standby is master within about one renew period, not at the lease expiry', async (t) => {
    const LEASE = 3_000;
    const PERIOD = 250;
    const tb = table('postgres');
    const args = ['lease', urlOf('postgres', dir.path), tb, String(LEASE), String(PERIOD)];
    const a = spawnFixture('db-supervised', args);
    await eventually(() => a.line(/^master \d+/) !== undefined, 10_000);
    const tokenA = masterToken(a);
    const b = spawnFixture('db-supervised', args);
    await eventually(() => b.line(/^waiting$/) !== undefined, 10_000);
    await sleep(400); // b read a lease ~2.6 s from expiry
    assert.equal(b.line(/^master/), undefined);
    const t0 = performance.now();
    a.proc.stdin?.write('stop\n'); // service stopped, then the lease released (holder NULL, TIME 0)
    await eventually(() => b.line(/^master \d+/) !== undefined, 10_000);
    const failover = performance.now() - t0;
    t.diagnostic(`failover after a graceful stop: ${failover.toFixed(0)} ms (renew ${PERIOD})`);
    assert.equal((await exitOf(a.proc)).code, 0);
    assert.ok(masterToken(b) > tokenA);
    // One poll period, plus the stop's own statements and process scheduling; not a lease.
    assert.ok(failover < PERIOD + 500, `failover took ${failover} ms (lease ${LEASE})`);
    b.proc.stdin?.write('stop\n');
    assert.equal((await exitOf(b.proc)).code, 0);
  });

  for (const [locker, kind, lease, period] of [
    ['lease', 'postgres', 1_000, 250],
    ['lease', 'mysql', 1_000, 250],
    ['database', 'mysql', 200, 200],
    ['database', 'sqlite', 200, 200],
  ] as const) {
    it(`kill -9 of the ${locker} master on ${kind}: a slave takes over within the stated bound`, async (t) => {
      const tb = table(kind);
      const args = [locker, urlOf(kind, dir.path), tb, String(lease), String(period)];
      const { a, b, tokenA, tokenB, failover } = await killMasterFailover(
        'db-supervised',
        args,
        400,
      );
      // Lease: the dead master's lease runs out at most one lease after its last renewal; the
      // slave sleeps until that expiry (database clock). Held transaction: the database frees
      // the row when the connection drops; the slave (blocked in the database, or polling
      // SQLite every interval) then pauses period + queryTimeout (2 000) before serving.
      const bound =
        locker === 'lease' ? lease + 300 : (kind === 'sqlite' ? lease : 0) + period + 2_000 + 300;
      t.diagnostic(`failover after kill -9: ${failover.toFixed(0)} ms (bound ${bound} ms)`);
      assert.ok(tokenB > tokenA, `token ${tokenB} after ${tokenA}`);
      assert.ok(failover < bound, `failover took ${failover} ms`);
      b.proc.stdin?.write('stop\n');
      assert.equal((await exitOf(b.proc)).code, 0);
      await exitOf(a.proc);
    });
  }
});
