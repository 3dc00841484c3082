import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { uniqueTable } from '../fixtures/db-servers.js';
import { type FixtureProcess, masterToken, spawnFixture } from '../fixtures/fixture-process.js';
import {
  PrivateDatabaseServer,
  privateServerUnavailable,
  type ServerKind,
} from '../fixtures/private-db-server.js';
import { eventually, exitOf, sleep } from '../helpers.js';

// A real database restart, on a private server (its own data directory and port: the shared
// servers on 5432/3306 are never stopped). A supervised master runs in a child process, a
// standby in another; the database is crashed (SIGKILL of all its processes) or shut down fast,
// kept down, and started again on the same port and data.

const LEASE = 1_000; // lease locker: lease (lockAcquireSleepInterval) ...
const RENEW = 250; // ... renewed every 250 ms
const INTERVAL = 200; // held-transaction locker: acquire interval ...
const PERIOD = 200; // ... and keep-alive period (takeover pause = PERIOD + 2 000 ms queryTimeout)
const OUTAGE = 1_500; // longer than the lease and every retry interval: both processes notice

const masters = (p: FixtureProcess) => p.lines.filter((l) => /^master \d+/.test(l)).length;

async function stopChild(p: FixtureProcess): Promise<void> {
  if (p.proc.exitCode !== null || p.proc.signalCode !== null) return;
  p.proc.stdin?.write('stop\n');
  const timer = setTimeout(() => p.proc.kill('SIGKILL'), 5_000);
  await exitOf(p.proc);
  clearTimeout(timer);
}

for (const kind of ['postgres', 'mysql'] as const satisfies readonly ServerKind[]) {
  const missing = privateServerUnavailable(kind);
  describe(`${kind} restart: the master stops before the lock can pass, and a master serves again when the database returns`, {
    skip: missing === undefined ? false : `skipped: ${missing}`,
  }, () => {
    let server: PrivateDatabaseServer;
    before(async () => {
      server = await PrivateDatabaseServer.create(kind);
    });
    after(async () => {
      await server?.[Symbol.asyncDispose]();
    });

    // Both stop modes on both databases: a crash for one locker, a fast shutdown for the other.
    const cases = [
      ['lease', kind === 'postgres' ? 'crash' : 'shutdown'],
      ['database', kind === 'postgres' ? 'shutdown' : 'crash'],
    ] as const;
    for (const [locker, mode] of cases) {
      it(`${locker} locker, database ${mode === 'crash' ? 'killed (kill -9)' : 'shut down (fast)'}`, async (t) => {
        const table = uniqueTable();
        const args =
          locker === 'lease'
            ? [locker, server.url, table, String(LEASE), String(RENEW)]
            : [locker, server.url, table, String(INTERVAL), String(PERIOD)];
        const a = spawnFixture('db-supervised', args);
        let b: FixtureProcess | undefined;
        try {
          await eventually(
            () => a.line(/^master \d+/) !== undefined && a.line(/^service-start/) !== undefined,
            15_000,
          );
          const tokenA = masterToken(a);
          const standby = spawnFixture('db-supervised', args);
          b = standby;
          await eventually(() => standby.line(/^waiting$/) !== undefined, 10_000);
          // Let the standby settle into its wait (a few acquire attempts).
          await sleep(locker === 'lease' ? LEASE : 3 * INTERVAL);
          assert.equal(masters(standby), 0);

          const t0 = performance.now();
          await (mode === 'crash' ? server.kill() : server.shutdown());
          const down = performance.now() - t0;
          await eventually(() => a.line(/^demoted/) !== undefined, 10_000);
          const demoted = performance.now() - t0;
          // The service was stopped first, and the demotion is the loss of the lock.
          assert.ok(a.lines.indexOf('service-stop') >= 0, a.lines.join('\n'));
          assert.ok(
            a.lines.indexOf('service-stop') < a.lines.findIndex((l) => l.startsWith('demoted')),
          );
          assert.match(a.line(/^demoted/) ?? '', new RegExp(`^demoted ${tokenA} LOCK_LOST$`));
          if (locker === 'lease') {
            // The last renewal was sent at most RENEW before the stop, so the lease cannot expire
            // (and nobody else can take it) before LEASE - RENEW after it: the master must have
            // stopped serving by then.
            assert.ok(demoted < LEASE - RENEW, `demoted ${demoted.toFixed(0)} ms after the stop`);
          } else {
            // The held connection dies with the server: the lock is lost at once (at the latest
            // the next keep-alive fails within its query timeout).
            assert.ok(demoted < PERIOD + 2_000, `demoted ${demoted.toFixed(0)} ms after the stop`);
          }

          // Keep the database down for a while: nobody becomes master, nobody gives up.
          await sleep(OUTAGE);
          assert.equal(masters(a), 1);
          assert.equal(masters(standby), 0);
          for (const p of [a, standby]) {
            assert.equal(p.line(/^error/), undefined, p.lines.join('\n'));
            assert.equal(p.proc.exitCode, null, p.lines.join('\n'));
          }

          const t1 = performance.now();
          await server.start();
          const ready = performance.now() - t1;
          const t2 = performance.now();
          await eventually(() => masters(a) + masters(standby) === 2, 15_000);
          const recovered = performance.now() - t2;
          const next = masters(a) === 2 ? a : standby;
          const tokenNext = Number(
            next.lines
              .filter((l) => /^master \d+/.test(l))
              .at(-1)
              ?.split(' ')[1],
          );
          const who = next === a ? 'the old master' : 'the standby';
          t.diagnostic(
            `${kind} ${mode}, ${locker} locker: server down in ${down.toFixed(0)} ms; old master demoted ${demoted.toFixed(0)} ms after the stop; server up again in ${ready.toFixed(0)} ms; ${who} master ${recovered.toFixed(0)} ms after that`,
          );
          // Bound: the retry interval (the lease for the lease locker), plus for the held
          // transaction the takeover pause, plus slack for a loaded machine.
          const bound = locker === 'lease' ? LEASE + 1_500 : INTERVAL + PERIOD + 2_000 + 1_500;
          assert.ok(
            recovered < bound,
            `master again after ${recovered.toFixed(0)} ms (bound ${bound})`,
          );
          assert.ok(tokenNext > tokenA, `token ${tokenNext} after ${tokenA}`);
          await eventually(
            () => next.lines.filter((l) => /^service-start/.test(l)).length >= 1,
            5_000,
          );

          // Exactly one master from now on: the other stays a standby over several renewals.
          await sleep(3 * (locker === 'lease' ? RENEW : PERIOD));
          assert.equal(
            masters(a) + masters(standby),
            2,
            [...a.lines, '--', ...standby.lines].join('\n'),
          );
          assert.equal(
            next.lines.filter((l) => l.startsWith('demoted')).length,
            next === a ? 1 : 0,
          );
          for (const p of [a, standby]) assert.equal(p.proc.exitCode, null, p.lines.join('\n'));
        } finally {
          await Promise.all([stopChild(a), b === undefined ? undefined : stopChild(b)]);
          if (!server.running) await server.start(); // for the next test
        }
      });
    }
  });
}
