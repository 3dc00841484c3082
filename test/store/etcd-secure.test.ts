// Issue 22: the etcd locker against a real etcd that demands TLS (with client certificates) or
// user/password authentication, through the library and through `elect`. Secrets never show
// in a message, and a user without the rights to the election fails at once, not in a loop.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import type { Etcd3 } from 'etcd3';
import { LockIOError } from '../../src/core/errors.js';
import { EtcdLocker, type EtcdLockerOptions } from '../../src/store/index.js';
import { runElect } from '../fixtures/elect-process.js';
import { tempDir } from '../helpers.js';
import {
  EtcdCluster,
  etcdMissing,
  makeCertificates,
  type TestCertificates,
} from './etcd-cluster.js';

const missing = etcdMissing();
const LEASE = 2_000;
let electionCount = 0;
const election = (prefix: string) => `${prefix}/${process.pid}-${++electionCount}`;

/** Rejects with a LockIOError whose message names none of `secrets`; returns the message. */
async function failsWithout(start: Promise<unknown>, secrets: string[]): Promise<string> {
  let caught: unknown;
  try {
    await start;
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof LockIOError, `expected a LockIOError, got ${String(caught)}`);
  for (const s of secrets) assert.ok(!caught.message.includes(s), caught.message);
  return caught.message;
}

/** elect's output of a failed start: its "trying" line, then one line saying why it stopped. */
function assertOneLineStop(stderr: string, id: string): void {
  const lines = stderr.trim().split('\n');
  assert.equal(lines.length, 2, stderr);
  assert.match(
    lines[0] as string,
    new RegExp(`^locksmith elect \\[${id}\\]: trying to become master`),
  );
  assert.match(lines[1] as string, new RegExp(`^locksmith elect \\[${id}\\]: stopped: etcd at `));
}

/** Two lockers on `options`: the first leads, the second waits, and leads after its stop. */
async function handOver(options: Omit<EtcdLockerOptions, 'holderId'>): Promise<void> {
  const a = new EtcdLocker({ ...options, holderId: 'a' });
  const b = new EtcdLocker({ ...options, holderId: 'b' });
  try {
    await a.start();
    const tokenA = a.token as number;
    assert.ok(tokenA > 0);
    const startB = b.start();
    await a.stop();
    await startB;
    assert.ok((b.token as number) > tokenA, `${b.token} > ${tokenA}`);
  } finally {
    await a.stop();
    await b.stop();
  }
}

describe('EtcdLocker on an etcd with TLS and client certificates', { timeout: 120_000 }, () => {
  let cluster: EtcdCluster | undefined;
  let certs: TestCertificates | undefined;
  let other: TestCertificates | undefined;
  const dir = tempDir();
  before(async () => {
    if (missing !== undefined) return;
    certs = makeCertificates(dir.path);
    other = makeCertificates(dir.path, 'other');
    cluster = await EtcdCluster.start(1, { tls: certs });
  });
  after(async () => {
    await cluster?.close();
    dir[Symbol.dispose]();
  });
  const skip = (t: TestContext) => {
    if (missing !== undefined) t.skip(`etcd TLS tests skipped: ${missing}`);
    return missing !== undefined;
  };

  it('with the CA, certificate and key it leads and hands over; without the certificate, with another CA, or over http it fails with a LockIOError', async (t) => {
    if (skip(t)) return;
    const c = certs as TestCertificates;
    const endpoints = (cluster as EtcdCluster).endpoints;
    assert.match(endpoints[0] as string, /^https:/);
    const electionName = election('locksmith-tls');
    await handOver({
      endpoints,
      electionName,
      leaseMs: LEASE,
      tls: { ca: c.ca, cert: c.clientCert, key: c.clientKey },
    });
    const refused = (tls: EtcdLockerOptions['tls'], urls = endpoints) =>
      failsWithout(
        new EtcdLocker({ endpoints: urls, electionName, leaseMs: LEASE, tls }).start(),
        [],
      );
    // The member demands a client certificate.
    await refused({ ca: c.ca });
    // The member's certificate is not signed by the CA given.
    const o = other as TestCertificates;
    await refused({ ca: o.ca, cert: o.clientCert, key: o.clientKey });
    // Plain http to a TLS port.
    await refused(
      undefined,
      endpoints.map((u) => u.replace('https:', 'http:')),
    );
  });

  it('elect --etcd-ca --etcd-cert --etcd-key runs the command with its token', async (t) => {
    if (skip(t)) return;
    const c = certs as TestCertificates;
    const locker = [
      ...['--locker', 'etcd', '--etcd', (cluster as EtcdCluster).endpoints.join(',')],
      ...['--election', election('locksmith-tls'), '--lease', '2s'],
      ...['--etcd-ca', c.ca, '--etcd-cert', c.clientCert, '--etcd-key', c.clientKey],
    ];
    const ok = await runElect(locker, 'a', ['sh', '-c', 'echo "token=$LOCKSMITH_FENCING_TOKEN"']);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /^token=[1-9][0-9]*$/m);
    const noCert = await runElect([...locker.slice(0, 8), '--etcd-ca', c.ca], 'b', ['true']);
    assert.notEqual(noCert.code, 0);
    assertOneLineStop(noCert.stderr, 'b');
  });
});

describe('EtcdLocker on an etcd with user/password authentication', { timeout: 120_000 }, () => {
  let cluster: EtcdCluster | undefined;
  let root: Etcd3 | undefined;
  const dir = tempDir();
  const ROOT_PASSWORD = `root-${process.pid}-secret`;
  const PASSWORD = `locker-${process.pid}-secret`;
  /** The prefix user `locker` may read and write (and so campaign under). */
  const ALLOWED = 'locksmith-auth';
  before(async () => {
    if (missing !== undefined) return;
    cluster = await EtcdCluster.start(1);
    const admin = cluster.client();
    try {
      await admin.user('root').create(ROOT_PASSWORD);
      await admin.role('root').create();
      await admin.user('root').addRole('root');
      await admin.role('elect').create();
      await admin.role('elect').grant({
        permission: 'Readwrite',
        range: admin.range({ prefix: `${ALLOWED}/` }),
      });
      await admin.user('locker').create(PASSWORD);
      await admin.user('locker').addRole('elect');
      await admin.auth.authEnable();
    } finally {
      admin.close();
    }
    root = cluster.client({ auth: { username: 'root', password: ROOT_PASSWORD } });
  });
  after(async () => {
    root?.close();
    await cluster?.close();
    dir[Symbol.dispose]();
  });
  const skip = (t: TestContext) => {
    if (missing !== undefined) t.skip(`etcd authentication tests skipped: ${missing}`);
    return missing !== undefined;
  };
  const endpoints = () => (cluster as EtcdCluster).endpoints;

  it('a user whose role may write only the election prefix leads and hands over; a wrong password or an election outside its rights fails at once, naming no password', async (t) => {
    if (skip(t)) return;
    const electionName = election(ALLOWED);
    await handOver({
      endpoints: endpoints(),
      electionName,
      leaseMs: LEASE,
      auth: { username: 'locker', password: PASSWORD },
    });
    const wrong = `wrong-${process.pid}-password`;
    await failsWithout(
      new EtcdLocker({
        endpoints: endpoints(),
        electionName,
        leaseMs: LEASE,
        auth: { username: 'locker', password: wrong },
      }).start(),
      [wrong, PASSWORD],
    );
    // No anonymous access once authentication is on.
    await failsWithout(
      new EtcdLocker({ endpoints: endpoints(), electionName, leaseMs: LEASE }).start(),
      [],
    );
    const denied = await failsWithout(
      new EtcdLocker({
        endpoints: endpoints(),
        electionName: election('elsewhere'),
        leaseMs: LEASE,
        auth: { username: 'locker', password: PASSWORD },
      }).start(),
      [PASSWORD],
    );
    assert.match(denied, /permission denied/i);
    // Nothing is left behind by the refused candidates: no key under either prefix.
    const left = await (root as Etcd3).getAll().prefix(`${ALLOWED}/`).keys();
    assert.deepEqual(left, []);
  });

  it('elect --etcd-user --etcd-password-file runs the command; a wrong password is a one-line error without it', async (t) => {
    if (skip(t)) return;
    const good = join(dir.path, 'password');
    writeFileSync(good, `${PASSWORD}\n`);
    const bad = join(dir.path, 'wrong');
    const wrong = `wrong-${process.pid}-cli`;
    writeFileSync(bad, `${wrong}\n`);
    const locker = (file: string) => [
      ...['--locker', 'etcd', '--etcd', endpoints().join(','), '--election', election(ALLOWED)],
      ...['--lease', '2s', '--etcd-user', 'locker', '--etcd-password-file', file],
    ];
    const ok = await runElect(locker(good), 'a', [
      'sh',
      '-c',
      'echo "token=$LOCKSMITH_FENCING_TOKEN"',
    ]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /^token=[1-9][0-9]*$/m);
    const refused = await runElect(locker(bad), 'b', ['true']);
    assert.notEqual(refused.code, 0);
    assertOneLineStop(refused.stderr, 'b');
    assert.ok(!refused.stderr.includes(wrong), refused.stderr);
    assert.ok(!refused.stdout.includes(wrong), refused.stdout);
  });
});
