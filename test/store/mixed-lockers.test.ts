// Both database lockers on one lock table: at most one master, whatever the mix and the order.
// A DatabaseLocker is master while its transaction holds the lock row; a LeaseDatabaseLocker
// while its lease (TIME on the database's clock) is live. Each must wait for the other kind.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LockObtainFailedError } from '../../src/core/errors.js';
import { DatabaseLocker } from '../../src/store/database-locker.js';
import { LeaseDatabaseLocker } from '../../src/store/lease-database-locker.js';
import type { Locker } from '../../src/store/locker.js';
import { KINDS, type Kind, urlOf } from '../fixtures/db-servers.js';
import { masterToken, spawnFixture } from '../fixtures/fixture-process.js';
import { assertCleanRun, verifyRun } from '../fixtures/verify-run.js';
import { eventually, exitOf, sleep } from '../helpers.js';
import { scratchTables, tracked } from './store-helpers.js';

type LockerKind = 'lease' | 'database';
const ORDERS: [LockerKind, LockerKind][] = [
  ['lease', 'database'],
  ['database', 'lease'],
];

const LEASE = 1_000;
const PERIOD = 250;

describe('mixed database lockers on one table', () => {
  const { dir, table } = scratchTables();

  const make = (
    which: LockerKind,
    kind: Kind,
    t: string,
    extra: { failIfLocked?: boolean; leaseHolderId?: string } = {},
  ): Locker =>
    which === 'lease'
      ? new LeaseDatabaseLocker({
          database: urlOf(kind, dir.path),
          lockTableName: t,
          leaseMs: LEASE,
          ...extra,
        })
      : new DatabaseLocker({
          database: urlOf(kind, dir.path),
          lockTableName: t,
          acquireIntervalMs: 200,
          takeoverPauseMs: 0,
          failIfLocked: extra.failIfLocked,
        });

  for (const kind of KINDS) {
    for (const [first, second] of ORDERS) {
      it(`${kind}: ${first} master, then ${second}: the ${second} locker waits (and with failIfLocked fails naming the holder) until the ${first} one stops`, async () => {
        const t = table(kind);
        const a = make(first, kind, t, { leaseHolderId: 'holder-A' });
        const ma = await a.start({ keepAlivePeriodMs: PERIOD });
        try {
          const failing = make(second, kind, t, { failIfLocked: true, leaseHolderId: 'B' });
          try {
            await assert.rejects(failing.start({ keepAlivePeriodMs: PERIOD }), (err: Error) => {
              assert.ok(err instanceof LockObtainFailedError, String(err));
              if (first === 'lease') {
                assert.match(err.message, /leased by holder-A until \d{4}-\d\d-\d\dT/);
              } else {
                assert.match(err.message, /lock row/i);
              }
              return true;
            });
          } finally {
            await failing.stop(); // the old code made it master
          }
          const b = make(second, kind, t, { leaseHolderId: 'holder-B' });
          try {
            const started = tracked(b.start({ keepAlivePeriodMs: PERIOD }));
            // Well past a lease (the old code let the second one in at once), renewing as a
            // supervisor would.
            for (let i = 0; i < 8; i++) {
              await sleep(PERIOD);
              assert.equal(await a.keepAlive(), true, 'the first master lost its lock');
              assert.equal(started.settled, false, `the ${second} locker became master too`);
            }
            assert.equal(ma.signal.aborted, false);
            await a.stop();
            assert.equal(ma.closed, true);
            const mb = await started.promise;
            assert.ok(mb.token > ma.token, `token ${mb.token} after ${ma.token}`);
            assert.equal(await b.keepAlive(), true);
          } finally {
            await b.stop();
          }
        } finally {
          await a.stop();
        }
      });
    }

    it(`${kind}: 2 lease and 2 database contender processes, 10 rounds each: the verify server sees no overlap`, async () => {
      const t = table(kind);
      const run = await verifyRun('db-contender', 4, (port, id) => [
        'mixed',
        urlOf(kind, dir.path),
        t,
        String(port),
        String(id),
        '10',
        '100',
      ]);
      assertCleanRun(run, 10);
    });
  }

  for (const kind of KINDS) {
    for (const [first, second] of ORDERS) {
      it(`${kind}, processes: supervised ${first} master, then supervised ${second}: one master at a time, handover on stop`, async (t) => {
        const tb = table(kind);
        const args = (k: LockerKind) => [
          k,
          urlOf(kind, dir.path),
          tb,
          String(LEASE),
          String(PERIOD),
        ];
        const a = spawnFixture('db-supervised', args(first));
        try {
          await eventually(() => a.line(/^master \d+/) !== undefined, 15_000);
          const tokenA = masterToken(a);
          const b = spawnFixture('db-supervised', args(second));
          try {
            await eventually(() => b.line(/^waiting$/) !== undefined, 15_000);
            await sleep(2 * LEASE + 500);
            assert.equal(b.line(/^master/), undefined, `the ${second} process became master too`);
            assert.equal(a.line(/^demoted/), undefined, `the ${first} master was demoted`);
            const t0 = performance.now();
            a.proc.stdin?.write('stop\n');
            assert.equal((await exitOf(a.proc)).code, 0);
            await eventually(() => b.line(/^master \d+/) !== undefined, 15_000);
            t.diagnostic(
              `handover ${first} → ${second}: ${(performance.now() - t0).toFixed(0)} ms`,
            );
            assert.ok(masterToken(b) > tokenA);
            b.proc.stdin?.write('stop\n');
            assert.equal((await exitOf(b.proc)).code, 0);
          } finally {
            b.proc.kill('SIGKILL');
          }
        } finally {
          a.proc.kill('SIGKILL');
        }
      });
    }
  }
});
