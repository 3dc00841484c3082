// Our verify protocol against Lucene 8.7's own classes (Debian's liblucene8-java): either side
// can be the server, and Java and Node stress clients can share one lock directory.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { tempDir } from '../helpers.js';
import {
  cli,
  describeProc,
  javaUnavailable,
  listeningPort,
  luceneCoreJar,
  type Proc,
  spawnProc,
} from './verify-harness.js';

// The reason (java or the jar missing) is shown on each skipped test; undefined runs them.
const skip = javaUnavailable();
const options = { skip, timeout: 50_000 };
const STORE = 'org.apache.lucene.store';
const JAVA_NATIVE = `${STORE}.NativeFSLockFactory`;
const ROUNDS = '500';
const SLEEP_MS = '1';

function java(className: string, ...args: string[]): Proc {
  return spawnProc('java', ['-cp', luceneCoreJar() as string, `${STORE}.${className}`, ...args]);
}

/** One stress client: `node:<factory>` runs ours, `java:<class>` runs Lucene's LockStressTest. */
function stressClient(spec: string, id: number, port: number, dir: string): Proc {
  const [kind, factory = ''] = spec.split(/:(.*)/);
  return kind === 'java'
    ? java('LockStressTest', String(id), '127.0.0.1', String(port), factory, dir, SLEEP_MS, ROUNDS)
    : cli('stress', String(id), '127.0.0.1', String(port), factory, dir, SLEEP_MS, ROUNDS);
}

async function verifiedRun(serverKind: 'node' | 'java', clientSpecs: string[]) {
  using tmp = tempDir('locksmith-interop-');
  const clients = String(clientSpecs.length);
  const server =
    serverKind === 'java'
      ? java('LockVerifyServer', '127.0.0.1', clients)
      : cli('verify-server', '127.0.0.1', clients);
  const port = await listeningPort(server);
  const procs = clientSpecs.map((spec, id) => stressClient(spec, id, port, tmp.path));
  const codes = await Promise.all(procs.map((p) => p.exit));
  const serverCode = await server.exit;
  const report = [
    describeProc(`${serverKind} server`, server),
    ...procs.map((p, i) => describeProc(clientSpecs[i] ?? '', p)),
  ].join('\n');
  return { server, serverCode, procs, codes, report };
}

describe('interoperability with Lucene 8.7', () => {
  test("(a) Lucene's LockVerifyServer verifies two of our stress clients", options, async () => {
    const run = await verifiedRun('java', ['node:native', 'node:native']);
    assert.deepEqual(run.codes, [0, 0], run.report);
    assert.equal(run.serverCode, 0, run.report);
    assert.match(run.server.stdout, /Server terminated\./, run.report);
    assert.doesNotMatch(run.server.stderr, /Exception/, run.report);
    for (const p of run.procs) assert.match(p.stdout, /Finished 500 tries/);
  });

  test(
    "(b) our verify-server verifies two of Lucene's LockStressTest clients",
    options,
    async () => {
      const run = await verifiedRun('node', [`java:${JAVA_NATIVE}`, `java:${JAVA_NATIVE}`]);
      assert.deepEqual(run.codes, [0, 0], run.report);
      assert.equal(run.serverCode, 0, run.report);
      assert.match(
        run.server.stdout,
        /2 clients, [1-9]\d* acquisitions, \d+ releases, no violation/,
        run.report,
      );
      for (const p of run.procs) assert.match(p.stdout, /Finished 500 tries\./);
    },
  );

  test(
    '(c) Java and Node clients share one directory with native locks: they exclude each other',
    options,
    async () => {
      // Lucene's FileChannel locks are POSIX record locks; ours are OFD locks. On Linux the two
      // conflict, which is what keeps a locksmith process and a Java process apart.
      const run = await verifiedRun('node', [
        `java:${JAVA_NATIVE}`,
        'node:native',
        `java:${JAVA_NATIVE}`,
        'node:native',
      ]);
      assert.deepEqual(run.codes, [0, 0, 0, 0], run.report);
      assert.equal(run.serverCode, 0, run.report);
      assert.match(
        run.server.stdout,
        /4 clients, [1-9]\d* acquisitions, \d+ releases, no violation/,
        run.report,
      );
      for (const p of run.procs.filter((_, i) => i % 2 === 1)) {
        assert.match(
          p.stdout,
          /Finished 500 tries: [1-9]\d* obtained, [1-9]\d* held elsewhere/,
          'our clients both won and lost',
        );
      }
    },
  );

  test(
    "(d) no locking is caught: Lucene's server against our 'none' clients",
    options,
    async () => {
      // Lucene 8.7's LockStressTest cannot run NoLockFactory itself (it casts every factory to
      // FSLockFactory and dies with a ClassCastException), so the Java side of this check is
      // its server. Three clients, plus each client's own double-obtain probes, make the
      // overlap certain.
      const run = await verifiedRun('java', ['node:none', 'node:none', 'node:none']);
      assert.match(
        run.server.stderr,
        /IllegalStateException: id \d+ got lock, but \d+ already holds the lock/,
        run.report,
      );
      for (const [i, p] of run.procs.entries()) {
        assert.equal(run.codes[i], 1, run.report);
        assert.match(p.stderr, /Lock server died because of locking error\./, run.report);
      }
    },
  );

  test(
    "(d) no locking is caught: our server, a Lucene native client and our 'none' client",
    options,
    async () => {
      const run = await verifiedRun('node', [`java:${JAVA_NATIVE}`, 'node:none']);
      assert.equal(run.serverCode, 1, run.report);
      assert.match(
        run.server.stderr,
        /LOCK VIOLATION: id \d got lock, but \d already holds the lock/,
        run.report,
      );
      assert.equal(run.codes[1], 1, run.report);
      assert.match(
        run.procs[1]?.stderr ?? '',
        /Lock server died because of locking error\./,
        run.report,
      );
      // The Java client stops too: its next report meets a closed connection (it prints
      // Lucene's own message), unless it had already finished its rounds.
      assert.ok(
        run.codes[0] === 1 || /Finished 500 tries/.test(run.procs[0]?.stdout ?? ''),
        run.report,
      );
    },
  );
});
