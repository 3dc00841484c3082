import assert from 'node:assert/strict';
import { readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { LockViolationError } from '../../src/core/errors.js';
import { masterToken, spawnFixture } from '../fixtures/fixture-process.js';
import { assertCleanRun, verifyRun } from '../fixtures/verify-run.js';
import { eventually, exitOf, sleep, tempDir } from '../helpers.js';
import { killMasterFailover } from './store-helpers.js';

const CONTENDERS = 3;
const ROUNDS = 40;

/** A verify run of SharedFileLocker contenders (`broken`: one that skips the kernel lock). */
const storeRun = (dir: string, kind: 'shared-file' | 'broken') =>
  verifyRun('store-contender', CONTENDERS, (port, id) => [
    dir,
    String(port),
    String(id),
    String(ROUNDS),
    '20',
    kind,
  ]);

describe('store lockers across processes', () => {
  it('a: 3 SharedFileLocker contenders over many rounds: the verify server sees no overlap', async () => {
    using dir = tempDir();
    assertCleanRun(await storeRun(dir.path, 'shared-file'), ROUNDS);
  });

  it('a: the same witness catches a broken locker that skips the kernel lock', async () => {
    using dir = tempDir();
    const { result } = await storeRun(dir.path, 'broken');
    assert.equal(result.ok, false);
    assert.ok(result.failures[0] instanceof LockViolationError, String(result.failures[0]));
    assert.match(result.failures[0]?.message ?? '', /got lock, but \d+ already holds the lock/);
  });

  it('b: kill -9 of the master: a slave is master within interval + keep-alive period', async (t) => {
    using dir = tempDir();
    const INTERVAL = 100;
    const PERIOD = 100;
    // b is polling as a slave for three intervals before the kill.
    const { a, b, tokenA, tokenB, failover } = await killMasterFailover(
      'store-supervised',
      [dir.path, String(INTERVAL), String(PERIOD)],
      3 * INTERVAL,
    );
    t.diagnostic(
      `failover after kill -9: ${failover.toFixed(0)} ms (bound ${INTERVAL + PERIOD} ms + 500 ms slack)`,
    );
    assert.ok(tokenB > tokenA, `token ${tokenB} after ${tokenA}`);
    // Bound: the dead master's kernel lock is freed at once; the slave retries within one
    // interval (earlier on the inotify hint), then pauses one keep-alive period (AMQ-4705).
    assert.ok(failover < INTERVAL + PERIOD + 500, `failover took ${failover} ms`);
    assert.ok(failover >= PERIOD - 5, 'the post-acquire pause was kept');
    b.proc.stdin?.write('stop\n');
    assert.equal((await exitOf(b.proc)).code, 0);
    await exitOf(a.proc);
  });

  it('b: a graceful stop leaves the released mark: the standby skips the post-acquire pause; kill -9 still pays it', async (t) => {
    using dir = tempDir();
    const INTERVAL = 100;
    const PAUSE = 1_500; // the keep-alive period, paid after a wait-then-acquire
    const args = [dir.path, String(INTERVAL), String(PAUSE)];
    const failover = async (
      master: ReturnType<typeof spawnFixture>,
      how: 'graceful' | 'kill',
    ): Promise<{ ms: number; standby: ReturnType<typeof spawnFixture> }> => {
      const standby = spawnFixture('store-supervised', args);
      await eventually(() => standby.line(/^waiting$/) !== undefined, 10_000);
      await sleep(3 * INTERVAL); // polling as a slave
      assert.equal(standby.line(/^master/), undefined);
      const before = masterToken(master);
      const t0 = performance.now();
      if (how === 'graceful') master.proc.stdin?.write('stop\n');
      else master.proc.kill('SIGKILL');
      await eventually(() => standby.line(/^master \d+/) !== undefined, 10_000);
      const ms = performance.now() - t0;
      assert.ok(masterToken(standby) > before);
      const exit = await exitOf(master.proc);
      if (how === 'graceful') assert.equal(exit.code, 0);
      return { ms, standby };
    };
    const a = spawnFixture('store-supervised', args);
    await eventually(() => a.line(/^master \d+/) !== undefined, 10_000);
    // a stops gracefully (service stopped, then the mark, then the release): b serves at once.
    const graceful = await failover(a, 'graceful');
    // b is killed: no mark, c pauses the whole keep-alive period.
    const killed = await failover(graceful.standby, 'kill');
    // c stops gracefully after a killed predecessor: its own mark counts, d skips the pause.
    const again = await failover(killed.standby, 'graceful');
    t.diagnostic(
      `graceful ${graceful.ms.toFixed(0)} ms, kill -9 ${killed.ms.toFixed(0)} ms, graceful after a kill ${again.ms.toFixed(0)} ms (pause ${PAUSE} ms)`,
    );
    assert.ok(graceful.ms < PAUSE / 3, `graceful takeover took ${graceful.ms} ms`);
    assert.ok(again.ms < PAUSE / 3, `graceful takeover took ${again.ms} ms`);
    assert.ok(killed.ms >= PAUSE - 5, `kill -9 takeover took ${killed.ms} ms, under the pause`);
    assert.ok(killed.ms < PAUSE + INTERVAL + 500, `kill -9 takeover took ${killed.ms} ms`);
    again.standby.proc.stdin?.write('stop\n');
    assert.equal((await exitOf(again.standby.proc)).code, 0);
  });

  for (const theft of ['rewrite', 'delete'] as const) {
    it(`c: another process that ${theft}s the lock file makes the master demote`, async () => {
      using dir = tempDir();
      const a = spawnFixture('store-supervised', [dir.path, '50', '50']);
      await eventually(() => a.line(/^master \d+/) !== undefined, 10_000);
      const token = masterToken(a);
      const path = join(dir.path, 'lock');
      // This test process is the "other process": it holds no lock, it only writes.
      if (theft === 'rewrite') {
        const bytes = readFileSync(path);
        bytes.fill(7, 8, 24); // another holder's nonce, same format
        writeFileSync(path, bytes);
      } else {
        unlinkSync(path);
      }
      await eventually(() => a.line(/^demoted/) !== undefined, 5_000);
      // Noticed by the locker's own watch of the file (or a keep-alive, whichever is first):
      // either way a `lost` with LOCK_LOST, so no `keepalive-failed` is needed.
      assert.equal(a.line(/^demoted/), `demoted ${token} LOCK_LOST`);
      // The service was stopped before the demotion was reported.
      assert.ok(
        a.lines.indexOf('service-stop') < a.lines.findIndex((l) => l.startsWith('demoted')),
      );
      // restartAllowed: it waits again and, the kernel lock being free, is master again.
      await eventually(() => a.lines.filter((l) => /^master/.test(l)).length === 2, 5_000);
      const again = Number(a.lines.filter((l) => /^master/.test(l))[1]?.split(' ')[1]);
      assert.ok(again > token);
      a.proc.stdin?.write('stop\n');
      assert.equal((await exitOf(a.proc)).code, 0);
      assert.ok(a.line(/^stopped$/));
    });
  }
});
