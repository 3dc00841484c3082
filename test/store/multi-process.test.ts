import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { LockViolationError } from '../../src/core/errors.js';
import { LockVerifyServer } from '../../src/directory/lock-verify-server.js';
import { exitOf, fixture, orphanProof, tempDir } from '../helpers.js';
import { until } from './store-helpers.js';

/** A child whose stdout lines are all kept, so no line is missed between waits. */
function child(name: string, args: string[]): { proc: ChildProcess; lines: string[] } {
  const proc = orphanProof(
    spawn(process.execPath, [fixture(name), ...args], { stdio: ['pipe', 'pipe', 'inherit'] }),
  );
  const lines: string[] = [];
  let buffer = '';
  proc.stdout?.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    const parts = buffer.split('\n');
    buffer = parts.pop() ?? '';
    lines.push(...parts);
  });
  return { proc, lines };
}

const line = (lines: string[], pattern: RegExp) => lines.find((l) => pattern.test(l));

const CONTENDERS = 3;
const ROUNDS = 40;

describe('store lockers across processes', () => {
  it('a: 3 SharedFileLocker contenders over many rounds: the verify server sees no overlap', async () => {
    using dir = tempDir();
    const server = await LockVerifyServer.listen({ clients: CONTENDERS });
    const children = Array.from({ length: CONTENDERS }, (_, id) =>
      child('store-contender', [
        dir.path,
        String(server.port),
        String(id),
        String(ROUNDS),
        '20',
        'shared-file',
      ]),
    );
    const result = await server.done;
    const exits = await Promise.all(children.map((c) => exitOf(c.proc)));
    assert.deepEqual(result.failures, []);
    assert.equal(result.ok, true);
    assert.equal(result.acquisitions, CONTENDERS * ROUNDS);
    assert.equal(result.releases, CONTENDERS * ROUNDS);
    for (const [i, c] of children.entries()) {
      assert.equal(exits[i]?.code, 0, c.lines.join('\n'));
      assert.ok(line(c.lines, /^done 40$/));
    }
  });

  it('a: the same witness catches a broken locker that skips the kernel lock', async () => {
    using dir = tempDir();
    const server = await LockVerifyServer.listen({ clients: CONTENDERS });
    const children = Array.from({ length: CONTENDERS }, (_, id) =>
      child('store-contender', [
        dir.path,
        String(server.port),
        String(id),
        String(ROUNDS),
        '20',
        'broken',
      ]),
    );
    const result = await server.done;
    await Promise.all(children.map((c) => exitOf(c.proc)));
    assert.equal(result.ok, false);
    assert.ok(result.failures[0] instanceof LockViolationError, String(result.failures[0]));
    assert.match(result.failures[0]?.message ?? '', /got lock, but \d+ already holds the lock/);
  });

  it('b: kill -9 of the master: a slave is master within interval + keep-alive period', async (t) => {
    using dir = tempDir();
    const INTERVAL = 100;
    const PERIOD = 100;
    const a = child('store-supervised', [dir.path, String(INTERVAL), String(PERIOD)]);
    await until(() => line(a.lines, /^master \d+/) !== undefined, 10_000);
    const tokenA = Number(line(a.lines, /^master \d+/)?.split(' ')[1]);
    const b = child('store-supervised', [dir.path, String(INTERVAL), String(PERIOD)]);
    await until(() => line(b.lines, /^waiting$/) !== undefined, 10_000);
    await new Promise((r) => setTimeout(r, 3 * INTERVAL)); // b is polling as a slave
    assert.equal(line(b.lines, /^master/), undefined);
    const t0 = performance.now();
    a.proc.kill('SIGKILL');
    await until(() => line(b.lines, /^master \d+/) !== undefined, 10_000);
    const failover = performance.now() - t0;
    const tokenB = Number(line(b.lines, /^master \d+/)?.split(' ')[1]);
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

  for (const theft of ['rewrite', 'delete'] as const) {
    it(`c: another process that ${theft}s the lock file makes the master demote`, async () => {
      using dir = tempDir();
      const a = child('store-supervised', [dir.path, '50', '50']);
      await until(() => line(a.lines, /^master \d+/) !== undefined, 10_000);
      const token = Number(line(a.lines, /^master \d+/)?.split(' ')[1]);
      const path = join(dir.path, 'lock');
      // This test process is the "other process": it holds no lock, it only writes.
      if (theft === 'rewrite') {
        const bytes = readFileSync(path);
        bytes.fill(7, 8, 24); // another holder's nonce, same format
        writeFileSync(path, bytes);
      } else {
        unlinkSync(path);
      }
      await until(() => line(a.lines, /^demoted/) !== undefined, 5_000);
      assert.equal(line(a.lines, /^demoted/), `demoted ${token} LOCK_LOST`);
      assert.ok(line(a.lines, /^keepalive-failed/));
      // The service was stopped before the demotion was reported.
      assert.ok(
        a.lines.indexOf('service-stop') < a.lines.findIndex((l) => l.startsWith('demoted')),
      );
      // restartAllowed: it waits again and, the kernel lock being free, is master again.
      await until(() => a.lines.filter((l) => /^master/.test(l)).length === 2, 5_000);
      const again = Number(a.lines.filter((l) => /^master/.test(l))[1]?.split(' ')[1]);
      assert.ok(again > token);
      a.proc.stdin?.write('stop\n');
      assert.equal((await exitOf(a.proc)).code, 0);
      assert.ok(line(a.lines, /^stopped$/));
    });
  }
});
