import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import type { Etcd3 } from 'etcd3';
import {
  AbortedError,
  InvalidArgumentError,
  LockIOError,
  type LockLostError,
  LockObtainFailedError,
} from '../../src/core/errors.js';
import {
  createLocker,
  EtcdLocker,
  type EtcdLockerOptions,
  type Mastership,
} from '../../src/store/index.js';
import { type FixtureProcess, spawnFixture } from '../fixtures/fixture-process.js';
import {
  collectOutput,
  eventually,
  exitOf,
  orphanProof,
  repoRoot,
  run,
  sleep,
  tempDir,
} from '../helpers.js';
import { ETCDCTL, EtcdCluster, etcdMissing, freePort } from './etcd-cluster.js';
import { recordingLogger, tracked } from './store-helpers.js';

const missing = etcdMissing();
const LEASE = 2_000;
let electionCount = 0;
const election = () => `locksmith-test/${process.pid}/e${++electionCount}`;

/** Keys (name → value) under `<name>/`, in create-revision order. */
async function keysOf(client: Etcd3, name: string): Promise<[string, string][]> {
  const res = await client.kv.range({
    key: Buffer.from(`${name}/`),
    range_end: Buffer.from(`${name}0`),
    sort_target: 'Create',
    sort_order: 'Ascend',
  });
  return res.kvs.map((kv) => [kv.key.toString(), kv.value.toString()]);
}

/** The remaining TTL of the lease in `key` (`<name>/<lease hex>`); -1 once gone. */
async function leaseTtlOfKey(client: Etcd3, key: string): Promise<number> {
  const hex = key.slice(key.lastIndexOf('/') + 1);
  const res = await client.leaseClient.leaseTimeToLive({ ID: BigInt(`0x${hex}`).toString() });
  return Number(res.TTL);
}

/** `etcdctl elect` (or `elect -l` when `observe`), orphan-proof, stdout lines collected. */
function etcdctlElect(
  endpoints: string[],
  name: string,
  proposal: string | undefined,
  observe = false,
): { proc: ChildProcess; lines: () => string[] } {
  const args = [`--endpoints=${endpoints.join(',')}`, 'elect', ...(observe ? ['-l'] : []), name];
  if (proposal !== undefined) args.push(proposal);
  const proc = orphanProof(
    spawn(ETCDCTL, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ETCDCTL_API: '3' },
    }),
  );
  const out = collectOutput(proc);
  return {
    proc,
    lines: () =>
      out
        .stdout()
        .split('\n')
        .filter((l) => l !== ''),
  };
}

interface Event {
  event: string;
  at: number;
  token?: number;
  code?: string;
  ok?: boolean | string;
}
const events = (p: FixtureProcess): Event[] =>
  p.lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Event);
const first = (p: FixtureProcess, name: string) => events(p).find((e) => e.event === name);

describe('EtcdLocker options (no etcd needed)', () => {
  const base = { endpoints: ['http://127.0.0.1:2379'], electionName: 'e' };
  it('checks every option with a coded InvalidArgumentError', () => {
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ electionName: 'e' }, /endpoints is required/],
      [{ endpoints: ['http://127.0.0.1:2379'] }, /electionName is required/],
      [{ ...base, endpoints: [] }, /non-empty array/],
      [{ ...base, endpoints: 'http://127.0.0.1:2379' }, /non-empty array/],
      [{ ...base, endpoints: ['127.0.0.1:2379'] }, /http:\/\/host:port/],
      [{ ...base, endpoints: ['ftp://127.0.0.1:2379'] }, /http:\/\/host:port/],
      [{ ...base, endpoints: ['http://u:p@127.0.0.1:2379'] }, /credentials go in auth/],
      [{ ...base, electionName: '' }, /electionName must be a non-empty string/],
      [{ ...base, electionName: 'a\0b' }, /electionName must be a non-empty string/],
      [{ ...base, leaseMs: 1500 }, /whole number of seconds.*e\.g\. 2000/],
      [{ ...base, leaseMs: 500 }, />= 1000/],
      [{ ...base, selfFencingMarginMs: 10_000 }, /selfFencingMarginMs must be > 0 and < the lease/],
      [{ ...base, auth: { username: 'u' } }, /auth must be/],
      [{ ...base, tls: { ca: '/nonexistent/ca.pem' } }, /tls\.ca: cannot read/],
      [{ ...base, tls: { cert: Buffer.from('x') } }, /tls\.ca is required/],
      [{ ...base, holderId: '' }, /holderId must be a non-empty string/],
      [{ ...base, leaseMS: 2000 }, /unknown option "leaseMS"/],
      [{ ...base, acquireIntervalMs: 1000 }, /unknown option "acquireIntervalMs"/],
    ];
    for (const [options, message] of bad) {
      assert.throws(
        () => new EtcdLocker(options as unknown as EtcdLockerOptions),
        (err: unknown) =>
          err instanceof InvalidArgumentError &&
          err.code === 'INVALID_ARGUMENT' &&
          message.test(err.message),
        `${JSON.stringify(options)} → ${message}`,
      );
    }
  });

  it('takes defaults, the proposal alias, TLS files; createLocker makes it', async () => {
    const l = new EtcdLocker({ ...base, proposal: 'me' } as EtcdLockerOptions);
    assert.equal(l.leaseMs, 10_000);
    assert.equal(l.selfFencingMarginMs, 2_500);
    assert.equal(l.defaultKeepAlivePeriodMs, 2_500);
    assert.equal(l.holderId, 'me');
    assert.equal(l.validUntil, undefined);
    assert.equal(l.token, undefined);
    const dir = tempDir();
    try {
      const ca = join(dir.path, 'ca.pem');
      writeFileSync(ca, 'not really a certificate');
      new EtcdLocker({ ...base, tls: { ca } });
    } finally {
      dir[Symbol.dispose]();
    }
    const made = await createLocker({ kind: 'etcd', ...base, leaseMs: 3000, holderId: 'x' });
    assert.ok(made instanceof EtcdLocker);
    assert.equal(made.leaseMs, 3000);
    await assert.rejects(
      createLocker({ kind: 'etcd', ...base, leaseMs: 2500 }),
      /whole number of seconds/,
    );
    await assert.rejects(
      createLocker({ kind: 'etcd', ...base, database: 'sqlite:x' } as never),
      /unknown option "database"/,
    );
    // A keep-alive period the lease cannot survive is refused before anything is taken.
    await assert.rejects(l.start({ keepAlivePeriodMs: 5000 }), InvalidArgumentError);
  });

  it('loads etcd3 (and gRPC) only when an etcd locker starts', async () => {
    const script = `
      import { createRequire } from 'node:module';
      const require = createRequire(${JSON.stringify(join(repoRoot, 'package.json'))});
      const loaded = () => Object.keys(require.cache).some((k) => k.includes('/etcd3/'));
      const store = await import(${JSON.stringify(join(repoRoot, 'dist/store/index.js'))});
      const l = await store.createLocker({ kind: 'etcd', endpoints: ['http://127.0.0.1:1'], electionName: 'e' });
      console.log('made', loaded());
      await l.start().catch(() => {});
      console.log('started', loaded());`;
    const out = await run(['--input-type=module', '-e', script]);
    assert.equal(out.stdout, 'made false\nstarted true\n', out.stderr);
  });

  it('the first start fails fast with a LockIOError when no endpoint answers', async () => {
    const port = await freePort();
    const l = new EtcdLocker({
      endpoints: [`http://127.0.0.1:${port}`],
      electionName: 'e',
      leaseMs: 2000,
    });
    await assert.rejects(l.start(), (err: unknown) => err instanceof LockIOError);
    assert.equal(l.token, undefined);
    await l.stop();
  });
});

describe('EtcdLocker on a 3-member etcd cluster', { timeout: 240_000 }, () => {
  let cluster: EtcdCluster | undefined;
  let admin: Etcd3 | undefined;
  const lockers: EtcdLocker[] = [];
  const children: ChildProcess[] = [];
  before(async () => {
    if (missing !== undefined) return;
    cluster = await EtcdCluster.start(3);
    admin = cluster.client();
  });
  after(async () => {
    await Promise.all(lockers.map((l) => l.stop().catch(() => {})));
    for (const c of children) c.kill('SIGKILL');
    admin?.close();
    await cluster?.close();
  });
  const make = (options: Partial<EtcdLockerOptions> & { electionName: string }) => {
    const l = new EtcdLocker({
      endpoints: (cluster as EtcdCluster).endpoints,
      leaseMs: LEASE,
      ...options,
    });
    lockers.push(l);
    return l;
  };
  const skip = (t: TestContext) => {
    if (missing !== undefined) {
      t.skip(missing);
      return true;
    }
    return false;
  };

  it('two lockers: one master, the other waits; stop() hands over to a larger token, never two masters', async (t) => {
    if (skip(t)) return;
    const name = election();
    // a's lease outlasts the test on a busy machine: the handover is stop()'s, not an expiry's
    // (with 2 s, a's lease ran out between its last keep-alive and stop() once, under two CPU
    // burners, and b was master before a's stop() returned).
    const a = make({ electionName: name, holderId: 'a', leaseMs: 30_000 });
    const logB = recordingLogger();
    const b = make({ electionName: name, holderId: 'b', logger: logB });
    const ma = await a.start();
    const tokenA = a.token as number;
    assert.ok(tokenA > 0);
    assert.ok((a.validUntil as number) > performance.now());
    // The candidate key is `<name>/<lease id hex>`, its value the proposal.
    const keys = await keysOf(admin as Etcd3, name);
    assert.equal(keys.length, 1);
    assert.equal(keys[0]?.[0], a.key);
    assert.match(a.key as string, new RegExp(`^${name}/[0-9a-f]+$`));
    assert.equal(keys[0]?.[1], 'a');

    const startB = tracked(b.start());
    await eventually(() => logB.lines.some((l) => /slave mode/.test(l.message)), 10_000);
    assert.match(logB.lines.find((l) => /slave mode/.test(l.message))?.message ?? '', /led by a/);
    // b waits (a keeps confirming), never master while a is.
    for (let i = 0; i < 6; i++) {
      await sleep(250);
      assert.equal(await a.keepAlive(), true);
      assert.equal(startB.settled, false);
      assert.equal(b.token, undefined);
    }
    assert.equal((await keysOf(admin as Etcd3, name)).length, 2);
    let aStopped = false;
    const mb = await Promise.all([
      startB.promise.then((m) => {
        // Never both: a gave up before b was told it is master.
        assert.equal(aStopped, true);
        assert.equal(a.token, undefined);
        return m;
      }),
      a.stop().then(() => {
        aStopped = true;
      }),
    ]).then(([m]) => m);
    assert.ok(ma.signal.aborted);
    assert.ok((b.token as number) > tokenA, `${b.token} > ${tokenA}`);
    assert.equal(mb.token, b.token);
    assert.equal(await b.keepAlive(), true);
    assert.equal(await a.keepAlive(), false);
    await b.stop();
    assert.deepEqual(await keysOf(admin as Etcd3, name), []);
  });

  it('failIfLocked rejects at once; an aborted start rejects and leaves no key or lease', async (t) => {
    if (skip(t)) return;
    const name = election();
    // Nothing renews a here: its lease must outlast the test on a busy machine (with 2 s, a's
    // own key expired before the last check once).
    const a = make({ electionName: name, holderId: 'a', leaseMs: 30_000 });
    // Step times, printed with a failure: a's lease outlasts the test only if no step stalls.
    const t0 = Date.now();
    const steps: string[] = [];
    const step = (what: string) => steps.push(`${what} at ${Date.now() - t0} ms`);
    await a.start();
    step('a started');
    const c = make({ electionName: name, holderId: 'c', failIfLocked: true });
    await assert.rejects(
      c.start(),
      (err: unknown) =>
        err instanceof LockObtainFailedError &&
        err.code === 'LOCK_OBTAIN_FAILED' &&
        /led by a/.test(err.message),
    );
    step('c refused');
    assert.deepEqual(
      (await keysOf(admin as Etcd3, name)).map(([, v]) => v),
      ['a'],
    );

    const b = make({ electionName: name, holderId: 'b' });
    const controller = new AbortController();
    const startB = b.start({ signal: controller.signal });
    await eventually(async () => (await keysOf(admin as Etcd3, name)).length === 2, 10_000);
    step('b queued');
    const keyB = b.key as string;
    assert.ok(keyB !== undefined);
    controller.abort(new Error('enough'));
    await assert.rejects(
      startB,
      (err: unknown) => err instanceof AbortedError && /enough/.test(err.message),
    );
    assert.deepEqual(
      (await keysOf(admin as Etcd3, name)).map(([, v]) => v),
      ['a'],
    );
    assert.equal(await leaseTtlOfKey(admin as Etcd3, keyB), -1);
    step('b aborted');
    // A start signal's timeout says so; a stop during the wait ends it as ActiveMQ says.
    await assert.rejects(b.start({ signal: AbortSignal.timeout(300) }), /timed out/);
    step('b timed out');
    const waiting = b.start();
    await eventually(async () => (await keysOf(admin as Etcd3, name)).length === 2, 10_000);
    step('b queued again');
    await b.stop();
    step('b stopped');
    await assert.rejects(waiting, /aborted due to shutdown/);
    assert.deepEqual(
      (await keysOf(admin as Etcd3, name)).map(([, v]) => v),
      ['a'],
      steps.join(', '),
    );
    await a.stop();
  });

  it('a start aborted or stopped at any moment of its campaign ends at once, never waiting for the leader', async (t) => {
    if (skip(t)) return;
    const name = election();
    // The leader is never renewed and never stops: a start that missed its abort would wait
    // for this lease (60 s). A signal that aborted while the campaign's first request was on
    // the wire once went unheard.
    const a = make({ electionName: name, holderId: 'a', leaseMs: 60_000 });
    await a.start();
    const settled = async (p: Promise<unknown>, what: string) => {
      let timer: NodeJS.Timeout | undefined;
      const limit = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: still waiting after 20 s`)), 20_000);
      });
      try {
        await Promise.race([p.then(() => assert.fail(`${what} became leader`)), limit]);
      } catch (err) {
        if (/still waiting|became leader/.test(String(err))) throw err;
      } finally {
        clearTimeout(timer);
      }
    };
    for (let delay = 0; delay <= 60; delay += 4) {
      const b = make({ electionName: name, holderId: `b${delay}` });
      const controller = new AbortController();
      const started = b.start({ signal: controller.signal });
      await sleep(delay);
      controller.abort(new Error('enough'));
      await settled(started, `an abort after ${delay} ms`);
      const c = make({ electionName: name, holderId: `c${delay}` });
      const waiting = c.start();
      await sleep(delay);
      await c.stop();
      await settled(waiting, `a stop after ${delay} ms`);
    }
    await eventually(
      async () => (await keysOf(admin as Etcd3, name)).length === 1,
      10_000,
      'only the leader key to remain',
    );
    await a.stop();
  });

  it('interoperates with etcdctl elect: waits behind it, takes over on its resign; and the reverse', async (t) => {
    if (skip(t)) return;
    const endpoints = (cluster as EtcdCluster).endpoints;
    const name = election();
    const ctl = etcdctlElect(endpoints, name, 'from-etcdctl');
    children.push(ctl.proc);
    // etcdctl prints the leader key, then the proposal, once elected.
    await eventually(() => ctl.lines().includes('from-etcdctl'), 15_000, 'etcdctl to lead');
    const ctlKey = ctl.lines()[0] as string;
    const ctlRev = Number(
      (await (admin as Etcd3).kv.range({ key: Buffer.from(ctlKey) })).kvs[0]?.create_revision,
    );
    assert.ok(ctlRev > 0, ctlKey);
    const log = recordingLogger();
    const ours = make({ electionName: name, holderId: 'ours', logger: log });
    const start = tracked(ours.start());
    await eventually(() => log.lines.some((l) => /led by from-etcdctl/.test(l.message)), 10_000);
    await sleep(1500);
    assert.equal(start.settled, false);
    ctl.proc.kill('SIGINT');
    await exitOf(ctl.proc);
    const m = await start.promise;
    assert.ok(m.token > ctlRev, `${m.token} > ${ctlRev}`);
    // etcdctl's observer sees our proposal as the leader.
    const observer = etcdctlElect(endpoints, name, undefined, true);
    children.push(observer.proc);
    await eventually(() => observer.lines().includes('ours'), 15_000, 'elect -l to show ours');
    observer.proc.kill('SIGINT');

    // Reverse: ours leads, etcdctl elect waits until ours stops.
    const ctl2 = etcdctlElect(endpoints, name, 'second-etcdctl');
    children.push(ctl2.proc);
    for (let i = 0; i < 6; i++) {
      await sleep(250);
      assert.equal(await ours.keepAlive(), true);
    }
    assert.deepEqual(ctl2.lines(), []);
    assert.equal((await keysOf(admin as Etcd3, name)).length, 2, 'etcdctl queued behind ours');
    await ours.stop();
    await eventually(() => ctl2.lines().includes('second-etcdctl'), 15_000, 'etcdctl to lead');
    ctl2.proc.kill('SIGINT');
    await exitOf(ctl2.proc);
    assert.deepEqual(await keysOf(admin as Etcd3, name), []);
  });

  it('a paused master (SIGSTOP) is taken over only after its lease expires, and reports lost on SIGCONT; kill -9 hands over within the lease', async (t) => {
    if (skip(t)) return;
    const eps = (cluster as EtcdCluster).endpoints.join(',');
    const name = election();
    const period = 500;
    const spawnOne = (id: string) => {
      const p = spawnFixture('etcd-locker-process', [eps, name, String(LEASE), id, String(period)]);
      children.push(p.proc);
      return p;
    };
    const a = spawnOne('a');
    await eventually(() => first(a, 'master'), 15_000, 'a to be master');
    const b = spawnOne('b');
    await eventually(() => first(b, 'waiting'), 15_000, 'b to wait');
    await sleep(1000);
    assert.equal(first(b, 'master'), undefined);
    const stoppedAt = Date.now();
    a.proc.kill('SIGSTOP');
    const bMaster = await eventually(() => first(b, 'master'), 15_000, 'b to take over');
    // a's last keep-alive was sent at most one period before the pause; etcd expires the lease
    // a full TTL after it received it.
    assert.ok(
      bMaster.at - stoppedAt >= LEASE - period - 100,
      `took over ${bMaster.at - stoppedAt} ms after the pause`,
    );
    const tokenA = first(a, 'master')?.token as number;
    assert.ok((bMaster.token as number) > tokenA);
    a.proc.kill('SIGCONT');
    const lost = await eventually(() => first(a, 'lost'), 10_000, 'a to report lost');
    assert.ok(lost.code === 'LEASE_EXPIRED' || lost.code === 'LOCK_UNCONFIRMED', lost.code);
    await sleep(500);
    // a never acted as master once b was: every work line of a precedes b's master line.
    const lastWorkA = events(a)
      .filter((e) => e.event === 'work')
      .at(-1);
    assert.ok(lastWorkA !== undefined && lastWorkA.at < bMaster.at, JSON.stringify(lastWorkA));
    assert.ok(
      !events(a).some((e) => e.event === 'keepAlive' && e.ok === true),
      'a keep-alive of a said true after the loss',
    );
    a.proc.stdin?.write('stop\n');
    await exitOf(a.proc);

    // kill -9 of the master b: c takes over within the lease (+ etcd's expiry check + margin).
    const c = spawnOne('c');
    await eventually(() => first(c, 'waiting'), 15_000, 'c to wait');
    const killedAt = Date.now();
    b.proc.kill('SIGKILL');
    const cMaster = await eventually(() => first(c, 'master'), 15_000, 'c to take over');
    assert.ok(cMaster.at - killedAt <= LEASE + 3000, `took ${cMaster.at - killedAt} ms`);
    assert.ok((cMaster.token as number) > (bMaster.token as number));
    const lastWorkB = events(b)
      .filter((e) => e.event === 'work')
      .at(-1);
    assert.ok(lastWorkB !== undefined && lastWorkB.at < cMaster.at);
    c.proc.stdin?.write('stop\n');
    await eventually(() => first(c, 'stopped'), 10_000);
    assert.deepEqual(await keysOf(admin as Etcd3, name), []);
  });
});

describe('EtcdLocker when etcd fails', { timeout: 240_000 }, () => {
  const lockers: EtcdLocker[] = [];
  let cluster: EtcdCluster | undefined;
  after(async () => {
    await Promise.all(lockers.map((l) => l.stop().catch(() => {})));
    await cluster?.close();
  });

  it('self-fences: the mastership aborts by itself when keep-alives cannot reach etcd, before the lease could expire there', async (t) => {
    if (missing !== undefined) return t.skip(missing);
    cluster = await EtcdCluster.start(3);
    const l = new EtcdLocker({
      endpoints: cluster.endpoints,
      electionName: election(),
      leaseMs: LEASE,
      requestTimeoutMs: 1000,
    });
    lockers.push(l);
    const m: Mastership = await l.start();
    let lastConfirmedSent = performance.now();
    let lostAt: number | undefined;
    let lostReason: LockLostError | undefined;
    l.on('lost', (reason) => {
      lostAt = performance.now();
      lostReason = reason;
    });
    const answers: (boolean | string)[] = [];
    let keeping = true;
    const loop = (async () => {
      while (keeping) {
        const sent = performance.now();
        try {
          const ok = await l.keepAlive();
          answers.push(ok);
          if (ok) {
            assert.equal(lostAt, undefined, 'keepAlive() said true after lost');
            lastConfirmedSent = sent;
          }
        } catch (err) {
          answers.push(`error: ${(err as Error).message}`);
        }
        await sleep(300);
      }
    })();
    await sleep(1000);
    assert.ok(answers.includes(true));
    for (const member of cluster.members) member.pause();
    try {
      await eventually(() => lostAt !== undefined, 10_000, 'lost');
      const after = (lostAt as number) - lastConfirmedSent;
      // The contract: lease − margin after the last confirmation was sent; generous slack for
      // a loaded machine, but never the full lease plus etcd's own expiry.
      assert.ok(after <= LEASE + 250, `lost ${after} ms after the last confirmation`);
      assert.equal(lostReason?.code, 'LEASE_EXPIRED');
      assert.ok(m.signal.aborted);
      assert.equal(l.validUntil, undefined);
      assert.equal(await l.keepAlive(), false);
    } finally {
      for (const member of cluster.members) member.resume();
    }
    await sleep(1500);
    keeping = false;
    await loop;
    const lostIndex = answers.findIndex((a) => a !== true);
    assert.ok(!answers.slice(lostIndex).includes(true), JSON.stringify(answers));
    assert.equal(await l.keepAlive(), false);
    const t0 = performance.now();
    await l.stop();
    assert.ok(performance.now() - t0 < 5000);
  });

  it('kill -9 of the raft leader member: the master keeps mastership through another endpoint, or reports the loss; never two masters', async (t) => {
    if (missing !== undefined) return t.skip(missing);
    await cluster?.close();
    cluster = await EtcdCluster.start(3);
    const name = election();
    const opts = { endpoints: cluster.endpoints, electionName: name, leaseMs: 5000 };
    const a = new EtcdLocker({ ...opts, holderId: 'a' });
    const b = new EtcdLocker({ ...opts, holderId: 'b' });
    lockers.push(a, b);
    const ma = await a.start();
    let aLost: LockLostError | undefined;
    a.on('lost', (reason) => {
      aLost = reason;
    });
    const startB = tracked(b.start());
    let overlap = false;
    const bMaster = startB.promise.then(() => {
      // b may lead only once a has stopped counting itself master.
      const aValid = a.validUntil !== undefined && performance.now() < a.validUntil;
      if (aValid && !ma.signal.aborted) overlap = true;
    });
    bMaster.catch(() => {});
    // a confirms every 500 ms (a tenth of the lease) throughout, as a supervisor would.
    const answers: (boolean | string)[] = [];
    let killedAt = 0;
    let keeping = true;
    const loop = (async () => {
      while (keeping) {
        try {
          answers.push(await a.keepAlive());
        } catch (err) {
          answers.push(`error: ${(err as Error).message}`);
        }
        if (killedAt === 0) answers.length = 0;
        await sleep(500);
      }
    })();
    await sleep(1500);
    const leader = await cluster.leader();
    await leader.kill9();
    killedAt = performance.now();
    await sleep(8000);
    keeping = false;
    await loop;
    assert.equal(overlap, false);
    if (aLost !== undefined) {
      assert.ok(ma.signal.aborted);
      assert.equal(a.validUntil, undefined);
    } else {
      // Kept: the last keep-alives succeeded through another member, and b still waits.
      assert.equal(answers.at(-1), true, JSON.stringify(answers));
      assert.equal(startB.settled, false);
    }
    t.diagnostic(
      `keep-alives after the kill: ${JSON.stringify(answers)}; a lost: ${aLost?.code} ${aLost?.message}`,
    );
    await a.stop();
    if (!startB.settled) await startB.promise;
    assert.equal(overlap, false);
    assert.ok((b.token as number) > (ma.token as number));
    await b.stop();
  });
});
