/**
 * The linearizability proof: three `locksmith serve --ha` servers on one data
 * directory, workload clients incrementing counters and writing and reading registers through
 * them, while the master is killed (kill -9, then restarted), paused past its lease (SIGSTOP,
 * then SIGCONT) and, with the lease-database locker, the lock database crashed and restarted.
 * The clients' histories then pass the checker (linearizability.ts): no acknowledged increment
 * lost or applied twice, no read back in time; and several failovers happened.
 *
 * The lock database is a private PostgreSQL server (its own data directory and port), so
 * crashing it never touches the shared one on 5432; without PostgreSQL binaries, the
 * lease-database runs use SQLite and no database fault.
 *
 * Broken fencing: the same scenario with servers whose fencing is broken on purpose
 * (`test/fixtures/unfenced-serve.ts`: a locker that never reports a loss, a storage that
 * acknowledges what a newer master made it refuse, demotions 3 s late) must make the checker
 * report violations: a paused ex-master that resumes mid-write then acknowledges increments
 * the new master never sees. What is broken decides whether it shows: a resumed ex-master
 * without storage checks and without the per-call mastership check still gave no violation
 * (it demotes itself on resume before it answers anything: its calls end CONNECTION_LOST,
 * indeterminate); one that kept serving 3 s after losing its lease gave thousands (duplicate
 * values, lost acknowledged increments).
 *
 * The lock workload (`--locked`: lock a mutex row, read the counter, plain put + 1, unlock)
 * keeps one session per client through the failovers: every session must be resumed, none
 * lost. Its negative control runs servers that recover sessions and locks but put each lock on
 * a shadow row (`test/fixtures/unrestored-locks-serve.ts`): a resumed holder and a waiter
 * whose lockRow was resent then both increment, and the checker must see it.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { connect } from '../../src/client/locksmith-client.js';
import { PrivateDatabaseServer, privateServerUnavailable } from '../fixtures/private-db-server.js';
import { eventually, fixture, sleep, tempDir } from '../helpers.js';
import { EtcdCluster, etcdMissing } from '../store/etcd-cluster.js';
import { Cluster, runWorkload } from './cluster.js';
import { readHistories } from './history.js';
import { type CheckResult, checkHistory, formatViolations, summarize } from './linearizability.js';

const postgresMissing = privateServerUnavailable('postgres');

const LEASE_MS = 2_000;
const CLIENTS = 4;
const DURATION_MS = 20_000;

type Fault = 'kill' | 'pause' | 'database' | 'etcd' | 'etcd-kill' | 'split';

/**
 * How long the `etcd` fault keeps the raft leader stopped, and the `etcd-kill` fault keeps it
 * dead before it is started again on its data: past an election, past a lease.
 */
const ETCD_LEADER_DOWN_MS = 3_000;

/**
 * With the lease-database locker, a slave tries for the lease once per lease: a master paused
 * (or down) for lease + 1 s may well take it back itself when it resumes. Paused (down) for two
 * leases + 1 s, a slave takes over first, so a new master writes while the old one is stopped.
 */
const LEASE_FAULTS = {
  pauseMs: 2 * LEASE_MS + 1_000,
  downMs: 2 * LEASE_MS + 1_000,
  durationMs: 30_000,
};

interface Scenario {
  /** `--ha …` flags of every server. */
  ha: string[];
  /** The faults, in turn, for as long as the clients run. */
  faults: Fault[];
  /** How long a paused master stays paused. */
  pauseMs: number;
  /** The pause after each fault before the next one (default 1.5 s). */
  settleMs?: number;
  /** How long a killed master stays down before it is started again (default 1 s). */
  downMs?: number;
  /** The clients' per-operation timeout (default 5 s). */
  opTimeoutMs?: number;
  /** How long the clients run (default {@link DURATION_MS}). */
  durationMs?: number;
  clients?: number;
  /** How many counters (and mutexes) the clients share (default 4). */
  keys?: number;
  /** The server program (default the CLI): `unfenced-serve` for the broken-fencing run. */
  program?: string;
  database?: PrivateDatabaseServer;
  /** With `--ha etcd`: its cluster, whose raft leader the etcd faults stop or kill for a while. */
  etcd?: EtcdCluster;
  /** The clients increment under explicit row locks (`--locked`) instead. */
  locked?: boolean;
  /** Under `locked`, how long a client works between its read and its put (`--hold`). */
  holdMs?: number;
  /** Each server on a data directory of its own (tables in PostgreSQL: `--storage`). */
  separateData?: boolean;
  /** The table's split keys (default: one region). */
  splits?: string[];
  /** Keys the `split` fault splits the live table at, one per fault, in turn. */
  liveSplits?: string[];
}

interface Outcome {
  /** The table's split keys at the end, as the last master describes it. */
  splitKeys: string[];
  result: CheckResult;
  /** Distinct master tokens seen, minus one. */
  failovers: number;
  faults: string[];
  output: string;
}

async function chaos(t: TestContext, dataDir: string, scenario: Scenario): Promise<Outcome> {
  await using cluster = await Cluster.start({
    size: 3,
    dataDir: join(dataDir, 'data'),
    args: scenario.ha,
    ...(scenario.program === undefined ? {} : { program: scenario.program }),
    ...(scenario.separateData === true ? { separateData: true } : {}),
  });
  const durationMs = scenario.durationMs ?? DURATION_MS;
  const tokens = new Set<number | undefined>();
  const servers = new Set<number>();
  const first = await cluster.master(30_000);
  tokens.add(first.token);
  servers.add(first.index);
  {
    await using client = await connect(first.url);
    await client.createTable(
      'chaos',
      ['f'],
      scenario.splits === undefined ? {} : { splits: scenario.splits },
    );
  }
  const names = Array.from({ length: scenario.clients ?? CLIENTS }, (_, i) => `w${i}`);
  const common = [
    ...['--addresses', cluster.addresses, '--table', 'chaos'],
    ...['--keys', String(scenario.keys ?? 4)],
  ];
  const files = names.map((name) => join(dataDir, `${name}.jsonl`));
  const clients = names.map((name, i) =>
    runWorkload([
      ...common,
      ...['--client', name, '--duration', String(durationMs), '--out', files[i] as string],
      ...['--peers', names.join(','), '--seed', String(i + 1)],
      ...['--op-timeout', String(scenario.opTimeoutMs ?? 5_000)],
      ...(scenario.locked === true ? ['--locked', '--hold', String(scenario.holdMs ?? 0)] : []),
    ]),
  );
  const faults: string[] = [];
  const liveSplits = [...(scenario.liveSplits ?? [])];
  const end = Date.now() + durationMs - 2_000;
  await sleep(1_500);
  for (let n = 0; Date.now() < end; n++) {
    const fault = scenario.faults[n % scenario.faults.length] as Fault;
    const master = await cluster.master(30_000);
    tokens.add(master.token);
    servers.add(master.index);
    const key = fault === 'split' ? liveSplits.shift() : undefined;
    faults.push(
      `${fault}${key === undefined ? '' : ` at ${key}`} ${fault.startsWith('etcd') ? 'leader' : master.index} (token ${master.token})`,
    );
    if (fault === 'kill') {
      await cluster.kill9(master.index);
      await sleep(scenario.downMs ?? 1_000);
      await cluster.restart(master.index);
    } else if (fault === 'pause') {
      cluster.pause(master.index);
      await sleep(scenario.pauseMs);
      cluster.resume(master.index);
    } else if (fault === 'database' && scenario.database !== undefined) {
      await scenario.database.kill();
      await sleep(1_000);
      await scenario.database.start();
    } else if (fault === 'etcd' && scenario.etcd !== undefined) {
      const leader = await scenario.etcd.leader();
      leader.pause();
      await sleep(ETCD_LEADER_DOWN_MS);
      leader.resume();
    } else if (fault === 'split' && key !== undefined) {
      // A split of the live table under the clients' load. It may fail with the master's
      // change under it (the next fault's), or be refused if a split whose answer was lost
      // is recorded already: the checker judges the data either way.
      try {
        await using client = await connect(master.url);
        await client.splitTable('chaos', key);
      } catch (err) {
        faults.push(`(split at ${key}: ${(err as { code?: string }).code})`);
      }
    } else if (fault === 'etcd-kill' && scenario.etcd !== undefined) {
      const leader = await scenario.etcd.leader();
      await leader.kill9();
      await sleep(ETCD_LEADER_DOWN_MS);
      await leader.restart();
    }
    await sleep(scenario.settleMs ?? 1_500);
  }
  const outputs = await Promise.all(clients);
  const last = await cluster.master(30_000);
  let splitKeys: string[] = [];
  {
    await using client = await connect(last.url);
    splitKeys = (await client.describeTable('chaos')).splits.map((k) => k.toString('latin1'));
  }
  tokens.add(last.token);
  servers.add(last.index);
  const finalFile = join(dataDir, 'final.jsonl');
  await runWorkload([...common, '--client', 'final', '--out', finalFile, '--final']);
  const result = checkHistory(readHistories([...files, finalFile]), {
    clockSlackMs: 1,
    requireFinalReads: true,
  });
  const outcome = {
    splitKeys,
    result,
    failovers: tokens.size - 1,
    faults,
    output: `${outputs.join('')}\n${cluster.output(15)}`,
  };
  t.diagnostic(
    `faults: ${faults.join(', ')}; failovers ${outcome.failovers}; masters were servers ${[...servers].join(', ')}`,
  );
  t.diagnostic(summarize(result).replaceAll('\n', '; '));
  return outcome;
}

/** A negative control's verdict: the checker must report what the broken server did. */
function assertCaught(t: TestContext, outcome: Outcome, what: string): void {
  for (const line of formatViolations(outcome.result.violations, 5).split('\n')) t.diagnostic(line);
  assert.ok(
    outcome.result.violations.length > 0,
    `${what} went unnoticed: ${summarize(outcome.result)}\n${outcome.output}`,
  );
}

/**
 * The broken-fencing run (the `unfenced-serve` test server): pauses only, as many as fit, since
 * the ex-master resuming mid-write is what fencing is for. More clients, so that the master has
 * calls in flight when it stops, and a timeout longer than the pause, so that they still wait
 * for the answer when it resumes.
 */
const BROKEN_FENCING = {
  faults: ['pause'] as Fault[],
  ...LEASE_FAULTS,
  settleMs: 500,
  clients: 8,
  opTimeoutMs: LEASE_FAULTS.pauseMs + 5_000,
  program: fixture('unfenced-serve'),
};

function assertLinearizable(outcome: Outcome, minFailovers: number): void {
  const { result, failovers } = outcome;
  assert.deepEqual(
    result.violations,
    [],
    `${formatViolations(result.violations)}\n${summarize(result)}\n${outcome.output}`,
  );
  assert.ok(
    failovers >= minFailovers,
    `only ${failovers} failovers (${outcome.faults.join(', ')})\n${outcome.output}`,
  );
  const acknowledged = [...result.counters.values()].reduce((sum, c) => sum + c.ok, 0);
  assert.ok(acknowledged >= 50, `only ${acknowledged} increments acknowledged\n${outcome.output}`);
}

/**
 * `chaos` with the lease-database locker: on a private PostgreSQL server, whose crash and
 * restart joins `faults` as `database`; on SQLite in `dir` without one.
 */
async function leaseDatabaseChaos(
  t: TestContext,
  dir: string,
  scenario: Omit<Scenario, 'ha' | 'database'>,
): Promise<Outcome> {
  const database =
    postgresMissing === undefined ? await PrivateDatabaseServer.create('postgres') : undefined;
  try {
    const url = database?.url ?? `sqlite:${join(dir, 'lock.db')}`;
    const lease = ['--lease', `${LEASE_MS}ms`, '--renew', '500ms'];
    return await chaos(t, dir, {
      ...scenario,
      ha: ['--ha', 'lease-database', '--db', url, ...lease],
      faults: scenario.faults.filter((f) => f !== 'database' || database !== undefined),
      ...(database === undefined ? {} : { database }),
    });
  } finally {
    await database?.[Symbol.asyncDispose]();
  }
}

/**
 * `chaos` on servers without a shared directory: each on its own `--data`, their tables in a
 * private PostgreSQL server (`--storage`), their lease in the same one; its crash and restart
 * is the `database` fault. The table is split into 5 regions (counters and registers spread
 * over them).
 */
async function storageChaos(
  t: TestContext,
  dir: string,
  scenario: Omit<Scenario, 'ha' | 'database' | 'separateData'>,
): Promise<Outcome> {
  const database = await PrivateDatabaseServer.create('postgres');
  try {
    return await chaos(t, dir, {
      splits: ['ctr-1', 'ctr-3', 'reg-w1', 'reg-w3'],
      ...scenario,
      ha: [
        ...['--storage', database.url, '--ha', 'lease-database', '--db', database.url],
        ...['--lease', `${LEASE_MS}ms`, '--renew', '500ms'],
      ],
      separateData: true,
      database,
    });
  } finally {
    await database[Symbol.asyncDispose]();
  }
}

/**
 * What can happen to a fleet: a member killed, paused or leaving, its database crashing, or a
 * region split live (by whichever member serves it).
 */
type FleetFault = 'kill' | 'pause' | 'leave' | 'database' | 'split';

interface FleetScenario {
  faults: FleetFault[];
  durationMs: number;
  clients?: number;
  opTimeoutMs?: number;
  settleMs?: number;
  program?: string;
  env?: Record<string, string>;
  /** The table's split keys (default {@link FLEET_SPLITS}). */
  splits?: string[];
  /** The workload's explicit-lock increments (`--locked`), holding each lock `holdMs`. */
  locked?: boolean;
  holdMs?: number;
}

/**
 * Split keys of the fleet's table: 12 regions, four with two counters each (`ctr-0` ..
 * `ctr-7`), four with the registers of one client each (`reg-w0` .. `reg-w3`), and four empty.
 * The `split` fault cuts the counters' regions between their two counters, in turn
 * ({@link FLEET_LIVE_SPLITS}): each moves a counter under the load.
 */
const FLEET_SPLITS = [
  ...['a', 'b', 'c', 'ctr-2', 'ctr-4', 'ctr-6', 'd'],
  ...['reg-w0', 'reg-w1', 'reg-w2', 'reg-w3'],
];
const FLEET_LIVE_SPLITS = ['ctr-1', 'ctr-5', 'ctr-3', 'ctr-7'];

/** Region start key → the server serving it, as one member's `/status` says (null: nobody). */
async function regionServers(cluster: Cluster): Promise<Map<string, string | null> | undefined> {
  for (const member of cluster.members) {
    const s = await cluster.status(member.index);
    const regions = s?.status.regions as
      | { table: string; startKey: string; server: string | null }[]
      | undefined;
    if (regions === undefined) continue;
    return new Map(regions.filter((r) => r.table === 'chaos').map((r) => [r.startKey, r.server]));
  }
  return undefined;
}

/**
 * The chaos run on a fleet (`serve --fleet`): three members on data directories of their own,
 * the table's 12 regions and the members' leases in a private PostgreSQL server. Each fault
 * strikes the next member in turn: kill -9 (restarted after `downMs`), SIGSTOP past the lease,
 * SIGTERM (it hands its regions over, and is started again), or the database crashes and
 * restarts (every member's lease runs out: all regions close and are claimed again). Every
 * fault moves regions, and a restarted member takes its share back, so regions move under the
 * clients' load all along. `failovers` in the outcome counts the region moves seen (a
 * region's server changing from one member to another, sampled every 200 ms).
 */
async function fleetChaos(
  t: TestContext,
  dataDir: string,
  scenario: FleetScenario,
): Promise<Outcome> {
  await using database = await PrivateDatabaseServer.create('postgres');
  await using cluster = await Cluster.start({
    size: 3,
    dataDir: join(dataDir, 'data'),
    separateData: true,
    args: [
      ...['--storage', database.url, '--fleet'],
      ...['--lease', `${LEASE_MS}ms`, '--renew', '500ms'],
    ],
    ...(scenario.program === undefined ? {} : { program: scenario.program }),
    ...(scenario.env === undefined ? {} : { env: scenario.env }),
  });
  {
    await using client = await connect((cluster.members[0] as { url: string }).url);
    await client.createTable('chaos', ['f'], { splits: scenario.splits ?? FLEET_SPLITS });
  }
  let regions = (scenario.splits ?? FLEET_SPLITS).length + 1;
  const allServed = async (what: string) => {
    let last = '';
    await eventually(
      async () => {
        const servers = await regionServers(cluster);
        last = JSON.stringify([...(servers ?? [])]);
        return (
          servers !== undefined && servers.size >= regions && ![...servers.values()].includes(null)
        );
      },
      30_000,
      () => `every region served ${what} (last seen: ${last})\n${cluster.output(15)}`,
      100,
    );
  };
  await allServed('before the load');
  const owners = new Map<string, string>();
  let moves = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      for (const [startKey, server] of (await regionServers(cluster)) ?? []) {
        if (server === null) continue;
        const before = owners.get(startKey);
        if (before !== undefined && before !== server) moves++;
        owners.set(startKey, server);
      }
      await sleep(200);
    }
  })();
  const names = Array.from({ length: scenario.clients ?? CLIENTS }, (_, i) => `w${i}`);
  const common = [...['--addresses', cluster.addresses, '--table', 'chaos', '--keys', '8']];
  const files = names.map((name) => join(dataDir, `${name}.jsonl`));
  const clients = names.map((name, i) =>
    runWorkload([
      ...common,
      ...['--client', name, '--duration', String(scenario.durationMs), '--out', files[i] as string],
      ...['--peers', names.join(','), '--seed', String(i + 1)],
      ...['--op-timeout', String(scenario.opTimeoutMs ?? 5_000)],
      ...(scenario.locked === true ? ['--locked', '--hold', String(scenario.holdMs ?? 0)] : []),
    ]),
  );
  const faults: string[] = [];
  const liveSplits = [...FLEET_LIVE_SPLITS];
  try {
    const end = Date.now() + scenario.durationMs - 2_000;
    await sleep(1_500);
    for (let n = 0; Date.now() < end; n++) {
      const fault = scenario.faults[n % scenario.faults.length] as FleetFault;
      const index = n % cluster.members.length;
      const key = fault === 'split' ? liveSplits.shift() : undefined;
      if (fault === 'split' && key === undefined) continue;
      faults.push(
        fault === 'database'
          ? 'database'
          : fault === 'split'
            ? `split at ${key}`
            : `${fault} ${index}`,
      );
      if (fault === 'split') {
        // Sent to any member: the client routes it to the region's server. It may fail with
        // the next fault under it; the checker judges the data either way.
        try {
          await using client = await connect((cluster.members[index] as { url: string }).url);
          await client.splitTable('chaos', key as string);
        } catch (err) {
          faults.push(`(split at ${key}: ${(err as { code?: string }).code})`);
        }
      } else if (fault === 'kill') {
        await cluster.kill9(index);
        await sleep(LEASE_FAULTS.downMs);
        await cluster.restart(index);
      } else if (fault === 'pause') {
        cluster.pause(index);
        await sleep(LEASE_FAULTS.pauseMs);
        cluster.resume(index);
      } else if (fault === 'leave') {
        await cluster.terminate(index);
        await sleep(1_000);
        await cluster.restart(index);
      } else {
        await database.kill();
        await sleep(1_000);
        await database.start();
      }
      await sleep(scenario.settleMs ?? 1_500);
    }
  } finally {
    await Promise.allSettled(clients);
    sampling = false;
    await sampler;
  }
  const outputs = (await Promise.all(clients)).join('');
  let splitKeys: string[] = [];
  {
    await using client = await connect(cluster.addresses);
    splitKeys = (await client.describeTable('chaos')).splits.map((k) => k.toString('latin1'));
  }
  regions = splitKeys.length + 1;
  await allServed('after the faults');
  const finalFile = join(dataDir, 'final.jsonl');
  await runWorkload([...common, '--client', 'final', '--out', finalFile, '--final']);
  const history = readHistories([...files, finalFile]);
  const result = checkHistory(history, { clockSlackMs: 1, requireFinalReads: true });
  t.diagnostic(`faults: ${faults.join(', ')}; region moves seen ${moves}`);
  const errors = new Map<string, number>();
  for (const op of history)
    if (op.error !== undefined) errors.set(op.error, (errors.get(op.error) ?? 0) + 1);
  t.diagnostic(`errors: ${[...errors].map(([code, n]) => `${code} ${n}`).join(', ') || 'none'}`);
  t.diagnostic(summarize(result).replaceAll('\n', '; '));
  return {
    splitKeys,
    result,
    failovers: moves,
    faults,
    output: `${outputs}\n${cluster.output(15)}`,
  };
}

/** Sessions resumed and lost, summed over the workload clients' last lines. */
function sessionCounts(output: string): { resumed: number; lost: number } {
  let resumed = 0;
  let lost = 0;
  for (const m of output.matchAll(/sessions resumed (\d+), lost (\d+)/g)) {
    resumed += Number(m[1]);
    lost += Number(m[2]);
  }
  return { resumed, lost };
}

describe('linearizability through failovers', { concurrency: false }, () => {
  it('shared-file: kill -9 and SIGSTOP of the master; histories are linearizable (conformance M8)', {
    timeout: 180_000,
  }, async (t) => {
    using dir = tempDir();
    const outcome = await chaos(t, dir.path, {
      ha: ['--ha', 'shared-file', '--acquire-interval', '250ms'],
      faults: ['kill', 'pause'],
      pauseMs: 3_000,
    });
    assertLinearizable(outcome, 2);
  });

  it(`lease-database (${postgresMissing === undefined ? 'private PostgreSQL' : 'SQLite'}): kill -9, SIGSTOP past the lease, database crash; histories are linearizable (conformance M8)`, {
    timeout: 180_000,
  }, async (t) => {
    using dir = tempDir();
    const outcome = await leaseDatabaseChaos(t, dir.path, {
      faults: ['kill', 'pause', 'database'],
      ...LEASE_FAULTS,
    });
    assertLinearizable(outcome, 3);
  });

  it('etcd (3 members): kill -9, SIGSTOP past the lease, the raft leader stopped, and killed and restarted; histories are linearizable (conformance M8)', {
    timeout: 180_000,
    skip: etcdMissing(),
  }, async (t) => {
    using dir = tempDir();
    const etcd = await EtcdCluster.start(3);
    try {
      const outcome = await chaos(t, dir.path, {
        ha: [
          ...['--ha', 'etcd', '--etcd', etcd.endpoints.join(',')],
          ...['--election', `chaos-${process.pid}`, '--lease', `${LEASE_MS}ms`, '--renew', '500ms'],
        ],
        faults: ['kill', 'etcd-kill', 'pause', 'etcd'],
        ...LEASE_FAULTS,
        durationMs: 40_000,
        etcd,
      });
      assertLinearizable(outcome, 2);
      assert.ok(
        outcome.faults.some((f) => f.startsWith('etcd-kill')),
        `no etcd member was killed: ${outcome.faults.join(', ')}`,
      );
    } finally {
      await etcd.close();
    }
  });

  it(`explicit row locks through failovers (durable sessions; lease-database, ${postgresMissing === undefined ? 'private PostgreSQL' : 'SQLite'}): each session is resumed with its locks, no increment lost or doubled (conformance M8)`, {
    timeout: 180_000,
  }, async (t) => {
    using dir = tempDir();
    const outcome = await leaseDatabaseChaos(t, dir.path, {
      faults: ['kill', 'pause', 'database'],
      ...LEASE_FAULTS,
      locked: true,
      holdMs: 10,
    });
    assertLinearizable(outcome, 3);
    const sessions = sessionCounts(outcome.output);
    t.diagnostic(`sessions resumed ${sessions.resumed}, lost ${sessions.lost}`);
    assert.ok(sessions.resumed >= 3, `sessions were not resumed: ${outcome.output}`);
    assert.equal(sessions.lost, 0, `a session was lost, not resumed: ${outcome.output}`);
  });

  it('tables in PostgreSQL (--storage, a private server; no shared directory; 5 regions, split live under the load): kill -9, SIGSTOP past the lease, PostgreSQL crash; histories are linearizable, every session resumed', {
    timeout: 180_000,
    skip: postgresMissing,
  }, async (t) => {
    using dir = tempDir();
    const outcome = await storageChaos(t, dir.path, {
      faults: ['kill', 'split', 'pause', 'split', 'database', 'split'],
      liveSplits: ['mutex-2', 'ctr-2', 'reg-w5', 'mutex-1', 'ctr-0'],
      ...LEASE_FAULTS,
      locked: true,
      holdMs: 10,
    });
    assertLinearizable(outcome, 2);
    t.diagnostic(`split keys at the end: ${outcome.splitKeys.join(', ')}`);
    assert.ok(outcome.splitKeys.length > 4, `no live split landed: ${outcome.faults.join(', ')}`);
    const sessions = sessionCounts(outcome.output);
    t.diagnostic(`sessions resumed ${sessions.resumed}, lost ${sessions.lost}`);
    assert.equal(sessions.lost, 0, `a session was lost, not resumed: ${outcome.output}`);
  });

  it('a fleet (serve --fleet, 3 members, 12 regions, a private PostgreSQL): members killed, paused past their lease, leaving and joining, the database crashed, regions split live; regions move under the load and histories are linearizable', {
    timeout: 240_000,
    skip: postgresMissing,
  }, async (t) => {
    using dir = tempDir();
    const outcome = await fleetChaos(t, dir.path, {
      faults: ['kill', 'split', 'pause', 'split', 'leave', 'split', 'database', 'split'],
      durationMs: 50_000,
    });
    t.diagnostic(`split keys at the end: ${outcome.splitKeys.join(', ')}`);
    assert.ok(
      outcome.splitKeys.length > FLEET_SPLITS.length,
      `no live split landed: ${outcome.faults.join(', ')}`,
    );
    for (const kind of ['kill', 'pause', 'leave', 'database', 'split']) {
      assert.ok(
        outcome.faults.some((f) => f.startsWith(kind)),
        `no ${kind} fault: ${outcome.faults.join(', ')}`,
      );
    }
    // Each member fault moves its share (4 regions) away and back.
    assertLinearizable(outcome, 8);
  });

  it('explicit row locks in a fleet (durable: locks move with their regions): members killed, paused past their lease, leaving, the database crashed; each lock is adopted on its region’s new server, no increment lost or doubled', {
    timeout: 240_000,
    skip: postgresMissing,
  }, async (t) => {
    using dir = tempDir();
    // The mutexes (`mutex-0` .. `mutex-7`) in four regions, so that every fault moves some.
    const outcome = await fleetChaos(t, dir.path, {
      faults: ['kill', 'pause', 'leave', 'database'],
      durationMs: 45_000,
      splits: ['ctr-2', 'ctr-4', 'ctr-6', 'd', 'mutex-2', 'mutex-4', 'mutex-6', 'reg'],
      locked: true,
      holdMs: 10,
    });
    for (const kind of ['kill', 'pause', 'leave', 'database']) {
      assert.ok(
        outcome.faults.some((f) => f.startsWith(kind)),
        `no ${kind} fault: ${outcome.faults.join(', ')}`,
      );
    }
    assertLinearizable(outcome, 6);
  });

  it('a fleet whose fence is broken (a test server acknowledges the writes PostgreSQL refused): the checker reports violations', {
    timeout: 240_000,
    skip: postgresMissing,
  }, async (t) => {
    using dir = tempDir();
    const outcome = await fleetChaos(t, dir.path, {
      faults: ['pause'],
      durationMs: 30_000,
      clients: 8,
      settleMs: 500,
      opTimeoutMs: LEASE_FAULTS.pauseMs + 5_000,
      program: fixture('unfenced-serve'),
      // Every append waits first, so a member paused under load has appends in flight when
      // it wakes, past its per-call lease check.
      env: { LOCKSMITH_UNFENCED_SLOW_APPEND_MS: '300' },
    });
    assertCaught(t, outcome, 'a broken fence in a fleet');
  });

  it('tables in PostgreSQL with the fence of its writes broken (a test server acknowledges what PostgreSQL refused): the checker reports violations', {
    timeout: 180_000,
    skip: postgresMissing,
  }, async (t) => {
    using dir = tempDir();
    assertCaught(t, await storageChaos(t, dir.path, BROKEN_FENCING), 'broken fencing');
  });

  it('recovered locks that guard nothing (a test server puts each recovered lock on a shadow row): the checker reports violations (conformance M8)', {
    timeout: 180_000,
  }, async (t) => {
    using dir = tempDir();
    // Kills only: each new master recovers the locks its clients held. Eight clients on one
    // mutex: at each kill one holds it and others wait (and resend their lockRow), so a waiter
    // is granted the mutex whose holder resumes believing it still holds it. The operations'
    // timeout outlasts a failover, so that the holder's read and put go on at the new master.
    // A violation needs a kill between the holder's read and its put, and a waiter that reads
    // before the holder's put lands at the new master: a hold that is most of each cycle makes
    // the first near certain (with 10 ms, a run of four kills missed it), and seven waiters
    // against one holder in the race to resume the second likely.
    const outcome = await leaseDatabaseChaos(t, dir.path, {
      faults: ['kill'],
      ...LEASE_FAULTS,
      opTimeoutMs: 15_000,
      clients: 8,
      keys: 1,
      locked: true,
      holdMs: 250,
      program: fixture('unrestored-locks-serve'),
    });
    assertCaught(t, outcome, 'recovered locks that guard nothing');
  });

  it('broken fencing (a test server: no loss reported, fenced writes acknowledged): the checker reports violations (conformance M8)', {
    timeout: 180_000,
  }, async (t) => {
    using dir = tempDir();
    assertCaught(t, await leaseDatabaseChaos(t, dir.path, BROKEN_FENCING), 'broken fencing');
  });
});
