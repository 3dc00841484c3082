import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { dropTable, type Kind, uniqueTable, urlOf } from '../fixtures/db-servers.js';
import { type Elect, readLines, spawnElect } from '../fixtures/elect-process.js';
import { eventually, exitOf, fixture, sleep, tempDir } from '../helpers.js';

// The old master's elect is paused (SIGSTOP, or its event loop blocked by a busy loop) for
// PAUSE_MS, several lease periods, while its command keeps running and a standby waits. The
// commands stamp a shared log every 50 ms on CLOCK_MONOTONIC; the claim is that no line of the
// new master's command comes before the last line of the old one (0 overlap). How long after
// the pause began the old command stopped, and when the standby took over, are reported.

const PAUSE_MS = 5000;

interface LockerCase {
  name: string;
  kind: 'lease-database' | 'database' | 'shared-file';
  db?: Kind;
  timing: string[];
  /** Whether the standby can become master while the old one is paused. */
  takesOverDuringPause: boolean;
}

const CASES: LockerCase[] = [
  ...(['sqlite', 'postgres', 'mysql'] as const).flatMap((db): LockerCase[] => [
    {
      name: `lease-database (${db})`,
      kind: 'lease-database',
      db,
      // The settings: a 2 s lease renewed every 500 ms.
      timing: ['--lease', '2s', '--renew', '500ms'],
      takesOverDuringPause: true,
    },
    {
      name: `database (${db})`,
      kind: 'database',
      db,
      timing: ['--renew', '500ms', '--acquire-interval', '200ms'],
      // The paused master's session keeps its row lock.
      takesOverDuringPause: false,
    },
  ]),
  {
    name: 'shared-file',
    kind: 'shared-file',
    timing: ['--renew', '300ms', '--acquire-interval', '200ms'],
    // The kernel lock stays with the paused process's open file.
    takesOverDuringPause: false,
  },
];

/** The log's lines per token, in the order the tokens first appear. */
function runs(log: string): { token: string; first: number; last: number; lines: number }[] {
  const byToken = new Map<string, { token: string; first: number; last: number; lines: number }>();
  for (const line of readLines(log)) {
    const [token, , at] = line.split(' ');
    const t = Number(at);
    const r = byToken.get(token as string);
    if (r === undefined)
      byToken.set(token as string, { token: token as string, first: t, last: t, lines: 1 });
    else {
      r.first = Math.min(r.first, t);
      r.last = Math.max(r.last, t);
      r.lines++;
    }
  }
  return [...byToken.values()].sort((a, b) => a.first - b.first);
}

const sharedNow = () => Number(process.hrtime.bigint()) / 1e6;

async function stall(
  c: LockerCase,
  mode: 'SIGSTOP' | 'busy loop',
  table: string,
  dir: string,
): Promise<string> {
  const log = join(dir, 'stamps.log');
  const locker =
    c.kind === 'shared-file'
      ? ['--locker', c.kind, '--dir', join(dir, 'store')]
      : ['--locker', c.kind, '--db', urlOf(c.db as Kind, dir), '--table', table];
  const command = [process.execPath, fixture('stamp-writer'), log];
  const env = { ...process.env, LOCKSMITH_TEST_STALL_MS: String(PAUSE_MS) };
  const start = (id: string): Elect =>
    mode === 'SIGSTOP'
      ? spawnElect(locker, id, command, c.timing)
      : spawnElect(locker, id, command, c.timing, [fixture('elect-in-process')], env);
  const a = start('a');
  let b: Elect | undefined;
  try {
    await a.line(/became master/);
    await eventually(
      () => readLines(log).length >= 3,
      10_000,
      () => "a's command writing",
    );
    b = start('b');
    await b.line(/waiting as slave/);
    await sleep(1000); // a few renewals and acquire attempts of both
    assert.equal(b.lines.filter((l) => /became master/.test(l)).length, 0);

    const pausedAt = sharedNow();
    const pid = a.child.pid as number;
    if (mode === 'SIGSTOP') {
      process.kill(pid, 'SIGSTOP');
      await sleep(PAUSE_MS);
      process.kill(pid, 'SIGCONT');
    } else {
      process.kill(pid, 'SIGUSR2');
      await sleep(PAUSE_MS);
    }
    const resumedAt = sharedNow();
    const duringPause = b.lines.some((l) => /became master/.test(l));
    if (!c.takesOverDuringPause) {
      assert.equal(duringPause, false, `${c.name}: nobody can take over a paused holder`);
    }
    if (c.kind === 'shared-file') {
      // Still master after the pause (no deadline): its command ran on; then a graceful
      // stop hands over.
      await sleep(500);
      assert.equal(a.lines.filter((l) => /lost mastership/.test(l)).length, 0);
      a.child.kill('SIGTERM');
      assert.deepEqual(await exitOf(a.child), { code: 143, signal: null });
    } else {
      // The old master finds its command stopped by the watchdog (or its lease lost) and
      // steps down, alive, back to waiting.
      assert.match(await a.line(/lost mastership/, 1, 20_000), /lost mastership/);
      await a.line(/trying to become master/, 2, 20_000);
    }
    // The next master: the standby, or (SQLite has no queue of waiters) the old master again,
    // with a new token and a new run of its command.
    const standby = b;
    const masters = (e: Elect) => e.lines.filter((l) => /became master/.test(l)).length;
    await eventually(
      () => masters(standby) >= 1 || masters(a) >= 2,
      30_000,
      () => `a new master; a: ${JSON.stringify(a.lines)} b: ${JSON.stringify(standby.lines)}`,
    );
    const tookOverAt = sharedNow();
    await eventually(
      () => runs(log).length >= 2 && (runs(log)[1]?.lines ?? 0) >= 3,
      10_000,
      () => "the next master's command writing",
    );
    const rs = runs(log);
    assert.equal(rs.length, 2, JSON.stringify(rs));
    const [old, next] = rs as [(typeof rs)[0], (typeof rs)[0]];
    assert.ok(BigInt(next.token) > BigInt(old.token), `${next.token} > ${old.token}`);
    const overlap = old.last - next.first;
    assert.ok(
      overlap < 0,
      `${c.name}, ${mode}: the old command wrote ${overlap.toFixed(1)} ms into the new one's run`,
    );
    return (
      `${c.name}, ${mode} ${PAUSE_MS} ms: old command's last line ${(old.last - pausedAt).toFixed(0)} ms after the pause began` +
      ` (resumed at ${(resumedAt - pausedAt).toFixed(0)}); next master ${duringPause ? 'during' : 'after'} the pause, seen at ${(tookOverAt - pausedAt).toFixed(0)} ms;` +
      ` gap between the commands ${(-overlap).toFixed(0)} ms (overlap 0);` +
      ` old elect: ${a.lines.find((l) => /lost mastership/.test(l))?.replace(/^.*lost mastership: /, '') ?? 'kept mastership'}`
    );
  } finally {
    a.child.kill('SIGCONT');
    a.child.kill('SIGKILL');
    b?.child.kill('SIGKILL');
  }
}

describe('elect: a paused master never overlaps the next one', () => {
  const tables: [Kind, string][] = [];
  after(async () => {
    for (const [db, t] of tables) await dropTable(db, t);
  });
  for (const c of process.env.LOCKSMITH_TEST_STALL_ONLY === undefined
    ? CASES
    : CASES.filter((x) => x.name.includes(process.env.LOCKSMITH_TEST_STALL_ONLY as string))) {
    for (const mode of ['SIGSTOP', 'busy loop'] as const) {
      it(`${c.name}: ${mode} of the master's elect for ${PAUSE_MS} ms`, async (t) => {
        using dir = tempDir();
        const table = uniqueTable();
        if (c.db !== undefined) tables.push([c.db, table]);
        t.diagnostic(await stall(c, mode, table, dir.path));
      });
    }
  }
});
