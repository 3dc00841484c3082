/**
 * `locksmith elect --locker etcd`, real processes on a real 3-member etcd cluster: one master
 * at a time across kill -9 and SIGSTOP of the master's elect (the commands' own logs show no
 * overlap), exclusion with `etcdctl elect` on the same election, and the usage errors. Skipped
 * when etcd is not installed.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import {
  type Elect,
  electedPair,
  killMaster,
  readLines,
  recordingCommand,
  runElect,
  spawnElect,
  terminate,
  tokenOf,
} from '../fixtures/elect-process.js';
import {
  cliPath,
  eventually,
  exitOf,
  fixture,
  orphanProof,
  run,
  sleep,
  tempDir,
} from '../helpers.js';
import { ETCDCTL, EtcdCluster, etcdMissing } from '../store/etcd-cluster.js';

const missing = etcdMissing();
/** The lease every contender here uses: 2 s, renewed every 500 ms (the default 1/4). */
const LEASE = ['--lease', '2s'];
const LEASE_MS = 2000;
/** Generous: the machine runs other suites; bounds come from the lease, this is the noise. */
const MARGIN_MS = 10_000;

const skip = (t: TestContext): boolean => {
  if (missing !== undefined) t.skip(missing);
  return missing !== undefined;
};

let electionCount = 0;
const election = () => `locksmith-test/elect-${process.pid}-${++electionCount}`;

/** The log's lines per token (stamp-writer's `<token> <pid> <ms>`), in order of first line. */
function runs(log: string): { token: bigint; first: number; last: number; lines: number }[] {
  const byToken = new Map<string, { token: bigint; first: number; last: number; lines: number }>();
  for (const line of readLines(log)) {
    const [token, , at] = line.split(' ') as [string, string, string];
    const t = Number(at);
    const r = byToken.get(token);
    if (r === undefined) byToken.set(token, { token: BigInt(token), first: t, last: t, lines: 1 });
    else {
      r.first = Math.min(r.first, t);
      r.last = Math.max(r.last, t);
      r.lines++;
    }
  }
  return [...byToken.values()].sort((a, b) => a.first - b.first);
}

/** `etcdctl elect <name> <proposal>`, its stdout lines collected. */
function etcdctlElect(
  endpoints: string[],
  name: string,
  proposal: string,
): { child: ChildProcess; lines: string[] } {
  const child = orphanProof(
    spawn(ETCDCTL, [`--endpoints=${endpoints.join(',')}`, 'elect', name, proposal], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ETCDCTL_API: '3' },
    }),
  );
  const lines: string[] = [];
  let partial = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    const parts = (partial + chunk.toString()).split('\n');
    partial = parts.pop() ?? '';
    lines.push(...parts);
  });
  return { child, lines };
}

describe('elect --locker etcd (3-member etcd cluster)', { concurrency: false }, () => {
  let cluster: EtcdCluster | undefined;
  before(async () => {
    if (missing === undefined)
      cluster = await EtcdCluster.start(3, { heartbeatMs: 50, electionMs: 500 });
  });
  after(async () => {
    await cluster?.close();
  });
  const etcd = () => (cluster as EtcdCluster).endpoints;
  const lockerArgs = (name: string) => [
    '--locker',
    'etcd',
    '--etcd',
    etcd().join(','),
    '--election',
    name,
  ];

  it('two contenders: one runs the command; kill -9 of the master hands over within the lease, never overlapping', async (t) => {
    if (skip(t)) return;
    using dir = tempDir();
    const log = join(dir.path, 'runs.log');
    const locker = lockerArgs(election());
    const a = spawnElect(locker, 'a', recordingCommand(log), LEASE);
    const b = spawnElect(locker, 'b', recordingCommand(log), LEASE);
    try {
      // Several renewals; the slave stays out.
      const { first, second, command } = await electedPair(a, b, log, 2 * LEASE_MS);
      assert.match(
        second.lines.find((l) => /waiting as slave/.test(l)) ?? '',
        /waiting as slave: etcd election .* is led by/,
      );
      // While a master leads, --fail-if-locked gives up at once.
      const busy = await runElect(locker, 'f', ['true'], [...LEASE, '--fail-if-locked']);
      assert.equal(busy.code, 1, busy.stderr);
      assert.match(busy.stderr, /stopped: another process is master \(--fail-if-locked\)/);

      const { failover, command: next } = await killMaster(
        first,
        second,
        log,
        command,
        LEASE_MS + MARGIN_MS,
      );
      t.diagnostic(`kill -9 -> new master: ${failover} ms (lease ${LEASE_MS} ms)`);
      // A graceful stop resigns: a newcomer is master at once.
      await terminate(second, next);
      const after = await runElect(
        locker,
        'c',
        ['sh', '-c', 'exit 4'],
        [...LEASE, '--fail-if-locked'],
      );
      assert.equal(after.code, 4, after.stderr);
      assert.ok(tokenOf(after.stderr) > next.token);
    } finally {
      a.child.kill('SIGKILL');
      b.child.kill('SIGKILL');
    }
  });

  it("SIGSTOP of the master's elect for several leases: the other takes over, the old command is stopped first", async (t) => {
    if (skip(t)) return;
    using dir = tempDir();
    const log = join(dir.path, 'stamps.log');
    const locker = lockerArgs(election());
    const command = [process.execPath, fixture('stamp-writer'), log];
    const a = spawnElect(locker, 'a', command, LEASE);
    let b: Elect | undefined;
    try {
      await a.line(/became master/);
      await eventually(
        () => readLines(log).length >= 3,
        10_000,
        () => "a's command writing",
      );
      b = spawnElect(locker, 'b', command, LEASE);
      const standby = b;
      await standby.line(/waiting as slave/);
      await sleep(LEASE_MS);
      assert.equal(standby.lines.filter((l) => /became master/.test(l)).length, 0);

      const pid = a.child.pid as number;
      process.kill(pid, 'SIGSTOP');
      // The standby leads once etcd expires the paused master's lease.
      await standby.line(/became master/, 1, LEASE_MS + MARGIN_MS);
      await sleep(2 * LEASE_MS);
      process.kill(pid, 'SIGCONT');
      // The old elect finds its mastership gone and waits again, alive.
      await a.line(/lost mastership/, 1, 20_000);
      await a.line(/trying to become master/, 2, 20_000);
      await eventually(
        () => runs(log).length >= 2 && (runs(log)[1]?.lines ?? 0) >= 3,
        10_000,
        () => "the new master's command writing",
      );
      await sleep(500);
      const rs = runs(log);
      assert.equal(rs.length, 2, JSON.stringify(rs.map((r) => ({ ...r, token: String(r.token) }))));
      const [old, next] = rs as [(typeof rs)[0], (typeof rs)[0]];
      assert.ok(next.token > old.token, `${next.token} > ${old.token}`);
      const overlap = old.last - next.first;
      assert.ok(
        overlap < 0,
        `the old command wrote ${overlap.toFixed(1)} ms into the new one's run`,
      );
      t.diagnostic(`gap between the commands ${(-overlap).toFixed(0)} ms (overlap 0)`);
      // Still only the standby's command runs.
      assert.equal(a.lines.filter((l) => /became master/.test(l)).length, 1);
    } finally {
      a.child.kill('SIGCONT');
      a.child.kill('SIGKILL');
      b?.child.kill('SIGKILL');
    }
  });

  it('elect and `etcdctl elect` on the same election exclude each other, both ways', async (t) => {
    if (skip(t)) return;
    using dir = tempDir();
    const log = join(dir.path, 'runs.log');
    const name = election();
    // etcdctl leads first: elect waits, then leads when etcdctl resigns (SIGINT).
    const ctl = etcdctlElect(etcd(), name, 'from-etcdctl');
    await eventually(
      () => ctl.lines.includes('from-etcdctl'),
      20_000,
      () => 'etcdctl to lead',
    );
    const e = spawnElect(lockerArgs(name), 'e', recordingCommand(log), LEASE);
    let ctl2: ReturnType<typeof etcdctlElect> | undefined;
    try {
      assert.match(await e.line(/waiting as slave/), /led by .*from-etcdctl/);
      await sleep(2 * LEASE_MS);
      assert.equal(e.lines.filter((l) => /became master/.test(l)).length, 0);
      assert.deepEqual(readLines(log), []);
      ctl.child.kill('SIGINT');
      await exitOf(ctl.child);
      await e.line(/became master/, 1, MARGIN_MS);
      await eventually(
        () => readLines(log)[0],
        10_000,
        () => "elect's command",
      );
      const [token, pid] = (readLines(log)[0] as string).split(' ').map(Number) as [number, number];

      // elect leads: a new etcdctl elect waits (prints nothing) until elect stops.
      ctl2 = etcdctlElect(etcd(), name, 'second-etcdctl');
      await sleep(2 * LEASE_MS);
      assert.deepEqual(ctl2.lines, [], 'etcdctl must wait while elect leads');
      await terminate(e, { token, pid });
      const waiting = ctl2;
      await eventually(
        () => waiting.lines.includes('second-etcdctl'),
        MARGIN_MS,
        () => 'etcdctl to lead',
      );
    } finally {
      ctl.child.kill('SIGKILL');
      ctl2?.child.kill('SIGINT');
      e.child.kill('SIGKILL');
      if (ctl2 !== undefined) await exitOf(ctl2.child);
    }
  });
});

describe('elect/serve with etcd: usage errors are one line, exit 2', () => {
  it('a missing or misplaced --etcd, --db with etcd, a lease not in whole seconds, a bad URL', async () => {
    using dir = tempDir();
    const url = 'http://127.0.0.1:2379';
    const cases: [string[], RegExp][] = [
      [
        ['elect', '--locker', 'etcd', '--id', 'a', '--', 'true'],
        /--locker etcd needs --etcd <url>/,
      ],
      [['serve', '--data', dir.path, '--ha', 'etcd'], /--ha etcd needs --etcd <url>/],
      [
        [
          'elect',
          '--locker',
          'lease-database',
          '--db',
          'x.db',
          '--etcd',
          url,
          '--id',
          'a',
          '--',
          'true',
        ],
        /--etcd applies only to --locker etcd/,
      ],
      [['serve', '--data', dir.path, '--etcd', url], /--etcd applies only with --ha/],
      [
        ['serve', '--data', dir.path, '--ha', 'shared-file', '--election', 'x'],
        /--election applies only to --ha etcd/,
      ],
      [
        ['elect', '--locker', 'etcd', '--etcd', url, '--db', 'x.db', '--id', 'a', '--', 'true'],
        /--db does not apply to --locker etcd/,
      ],
      [
        [
          'elect',
          '--locker',
          'etcd',
          '--etcd',
          url,
          '--lease',
          '1500ms',
          '--id',
          'a',
          '--',
          'true',
        ],
        /Invalid --lease "1500ms": must be a whole number of seconds/,
      ],
      [
        ['serve', '--data', dir.path, '--ha', 'etcd', '--etcd', url, '--lease', '1500ms'],
        /Invalid --lease "1500ms": must be a whole number of seconds/,
      ],
      [
        ['elect', '--locker', 'etcd', '--etcd', 'ftp://x:1', '--id', 'a', '--', 'true'],
        /--etcd: "ftp:\/\/x:1" must be http:\/\/host:port/,
      ],
      [
        ['serve', '--data', dir.path, '--ha', 'etcd', '--etcd', `${url},not a url`],
        /--etcd: "not a url" is not a URL/,
      ],
      [
        ['serve', '--data', dir.path, '--ha', 'etcd', '--etcd', url, '--etcd-user', 'u'],
        /--etcd-user and --etcd-password-file go together/,
      ],
      [
        [
          'elect',
          '--locker',
          'etcd',
          '--etcd',
          url,
          '--etcd-ca',
          join(dir.path, 'none.pem'),
          '--id',
          'a',
          '--',
          'true',
        ],
        /--etcd-ca: cannot read/,
      ],
    ];
    for (const [args, message] of cases) {
      const result = await run([cliPath, ...args], { timeoutMs: 30_000 });
      assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
      const lines = result.stderr.trim().split('\n');
      assert.equal(lines.length, 1, `${args.join(' ')}: ${result.stderr}`);
      assert.match(lines[0] as string, message);
      assert.match(lines[0] as string, /\(INVALID_ARGUMENT\)$/);
    }
  });
});
