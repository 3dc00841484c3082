import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';
import { describe, test } from 'node:test';
import {
  AbortedError,
  AlreadyClosedError,
  InvalidArgumentError,
  LockIOError,
  LockObtainFailedError,
  LockViolationError,
  ProtocolError,
} from '../../src/core/errors.js';
import { ByteChannel, EndOfStreamError } from '../../src/directory/byte-channel.js';
import { FSDirectory } from '../../src/directory/fs-directory.js';
import { runLockStressTest, STRESS_LOCK_NAME } from '../../src/directory/lock-stress-test.js';
import {
  LockVerifyServer,
  type LockVerifyServerOptions,
  START_GUN_SIGNAL,
} from '../../src/directory/lock-verify-server.js';
import { NativeFSLockFactory } from '../../src/directory/native-fs-lock-factory.js';
import { NoLockFactory } from '../../src/directory/no-lock-factory.js';
import { SingleInstanceLockFactory } from '../../src/directory/single-instance-lock-factory.js';
import { VerifyingLockFactory } from '../../src/directory/verifying-lock-factory.js';
import { eventually, sleep, tempDir } from '../helpers.js';
import { cli, describeProc, listeningPort, type Proc } from './verify-harness.js';

const ACQUIRED = VerifyingLockFactory.MSG_LOCK_ACQUIRED;
const RELEASED = VerifyingLockFactory.MSG_LOCK_RELEASED;

/** A hand-driven protocol client. */
interface RawClient {
  socket: Socket;
  channel: ByteChannel;
  /** Sends a command and resolves with the reply byte (rejects on EOF). */
  send(byte: number): Promise<number>;
  end(): void;
}

async function rawClient(port: number, id?: number): Promise<RawClient> {
  const socket = connect({ host: '127.0.0.1', port, noDelay: true });
  const channel = ByteChannel.of(socket);
  await once(socket, 'connect');
  if (id !== undefined) await channel.writeByte(id);
  return {
    socket,
    channel,
    async send(byte) {
      await channel.writeByte(byte);
      return channel.readByte();
    },
    end: () => socket.end(),
  };
}

async function startedClients(server: LockVerifyServer, ids: number[]): Promise<RawClient[]> {
  const clients = await Promise.all(ids.map((id) => rawClient(server.port, id)));
  for (const c of clients) assert.equal(await c.channel.readByte(), START_GUN_SIGNAL);
  return clients;
}

function listen(
  options: Partial<LockVerifyServerOptions> & { clients: number },
): Promise<LockVerifyServer> {
  return LockVerifyServer.listen({ host: '127.0.0.1', ...options });
}

/** A stand-in server: `onByte` decides the reply (undefined = hang up). */
async function fakeServer(
  onByte: (byte: number, socket: Socket) => Promise<number | undefined> | number | undefined,
) {
  const sockets = new Set<Socket>();
  const server: Server = createServer({ noDelay: true }, (socket) => {
    sockets.add(socket);
    const channel = ByteChannel.of(socket);
    const loop = async () => {
      for (;;) {
        const byte = await channel.readByte();
        const reply = await onByte(byte, socket);
        if (reply === undefined) {
          socket.destroy();
          return;
        }
        await channel.writeByte(reply);
      }
    };
    loop().catch(() => socket.destroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    async connect(): Promise<Socket> {
      const socket = connect({ host: '127.0.0.1', port, noDelay: true });
      await once(socket, 'connect');
      return socket;
    },
    close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

describe('LockVerifyServer (conformance D30)', () => {
  test('sends the start signal only after every client sent its id, ignoring strays', {
    timeout: 10_000,
  }, async () => {
    const server = await listen({ clients: 2 });
    const a = await rawClient(server.port, 0);
    let early = false;
    a.socket.once('data', () => {
      early = true;
    });
    const probe = await rawClient(server.port); // connects, never says who it is
    const quitter = await rawClient(server.port);
    quitter.socket.destroy(); // leaves before its id: not a client
    const silent = await rawClient(server.port); // connected, no id yet
    await sleep(150);
    assert.equal(early, false, 'start signal sent before all ids arrived');
    const b = await rawClient(server.port, 1);
    assert.equal(await a.channel.readByte(), START_GUN_SIGNAL);
    assert.equal(await b.channel.readByte(), START_GUN_SIGNAL);
    // Connections without an id are dropped at the start.
    await assert.rejects(probe.channel.readByte(), EndOfStreamError);
    await assert.rejects(silent.channel.readByte(), EndOfStreamError);
    a.end();
    b.end();
    const result = await server.done;
    assert.equal(result.ok, true, JSON.stringify(result.failures.map((f) => f.message)));
    assert.deepEqual(result.clients, [0, 1]);
  });

  test('echoes valid commands and tracks the holder', { timeout: 10_000 }, async () => {
    const server = await listen({ clients: 2 });
    const [a, b] = (await startedClients(server, [7, 200])) as [RawClient, RawClient];
    assert.equal(await a.send(ACQUIRED), ACQUIRED);
    assert.equal(await a.send(RELEASED), RELEASED);
    assert.equal(await b.send(ACQUIRED), ACQUIRED);
    assert.equal(await b.send(RELEASED), RELEASED);
    assert.equal(await a.send(ACQUIRED), ACQUIRED);
    assert.equal(await a.send(RELEASED), RELEASED);
    a.end();
    b.end();
    const result = await server.done;
    assert.equal(result.ok, true);
    assert.deepEqual(
      { acquisitions: result.acquisitions, releases: result.releases },
      { acquisitions: 3, releases: 3 },
    );
  });

  test('two holders: "id X got lock, but Y already holds the lock", then every client is hung up on', {
    timeout: 10_000,
  }, async () => {
    const failures: string[] = [];
    const server = await listen({ clients: 3, onFailure: (f) => failures.push(f.message) });
    const [a, b, c] = (await startedClients(server, [0, 1, 2])) as [
      RawClient,
      RawClient,
      RawClient,
    ];
    assert.equal(await a.send(ACQUIRED), ACQUIRED);
    await assert.rejects(b.send(ACQUIRED), EndOfStreamError, 'the offender sees EOF');
    await assert.rejects(
      a.send(RELEASED),
      EndOfStreamError,
      'the holder sees EOF at its next command',
    );
    await assert.rejects(
      c.send(ACQUIRED),
      EndOfStreamError,
      'an idle client sees EOF at its next command',
    );
    const result = await server.done;
    assert.equal(result.ok, false);
    assert.equal(result.failures.length, 1);
    assert.ok(result.failures[0] instanceof LockViolationError);
    assert.equal(result.failures[0]?.message, 'id 1 got lock, but 0 already holds the lock');
    assert.deepEqual(failures, ['id 1 got lock, but 0 already holds the lock']);
  });

  test('a release by a non-holder is a violation', { timeout: 10_000 }, async () => {
    const server = await listen({ clients: 2 });
    const [a, b] = (await startedClients(server, [3, 4])) as [RawClient, RawClient];
    assert.equal(await a.send(ACQUIRED), ACQUIRED);
    await assert.rejects(b.send(RELEASED), EndOfStreamError);
    await assert.rejects(a.send(RELEASED), EndOfStreamError);
    const result = await server.done;
    assert.equal(
      result.failures[0]?.message,
      'id 4 released the lock, but 3 is the one holding the lock',
    );
    assert.ok(result.failures[0] instanceof LockViolationError);
  });

  test('a release while nobody holds the lock names holder -1, as Lucene does', {
    timeout: 10_000,
  }, async () => {
    const server = await listen({ clients: 1 });
    const [a] = (await startedClients(server, [9])) as [RawClient];
    await assert.rejects(a.send(RELEASED), EndOfStreamError);
    const result = await server.done;
    assert.equal(
      result.failures[0]?.message,
      'id 9 released the lock, but -1 is the one holding the lock',
    );
  });

  test('an unrecognized command fails the run and ends every client', {
    timeout: 10_000,
  }, async () => {
    const server = await listen({ clients: 2 });
    const [a, b] = (await startedClients(server, [0, 1])) as [RawClient, RawClient];
    await assert.rejects(a.send(7), EndOfStreamError);
    await assert.rejects(b.send(ACQUIRED), EndOfStreamError);
    const result = await server.done;
    assert.equal(result.ok, false);
    assert.ok(result.failures[0] instanceof ProtocolError);
    assert.equal(result.failures[0]?.message, 'Unrecognized command: 7');
  });

  test('a client that leaves while holding the lock fails the run', {
    timeout: 10_000,
  }, async () => {
    let failed: () => void = () => {};
    const firstFailure = new Promise<void>((resolve) => {
      failed = resolve;
    });
    const server = await listen({ clients: 2, onFailure: () => failed() });
    const [a, b] = (await startedClients(server, [0, 1])) as [RawClient, RawClient];
    assert.equal(await a.send(ACQUIRED), ACQUIRED);
    a.end();
    await firstFailure;
    await assert.rejects(b.send(RELEASED), EndOfStreamError);
    const result = await server.done;
    assert.equal(result.failures[0]?.message, 'id 0 disconnected while holding the lock');
  });

  test('a duplicate id fails the run before the start', { timeout: 10_000 }, async () => {
    const server = await listen({ clients: 3 });
    const a = await rawClient(server.port, 5);
    await sleep(30);
    const b = await rawClient(server.port, 5);
    await assert.rejects(a.channel.readByte(), EndOfStreamError);
    await assert.rejects(b.channel.readByte(), EndOfStreamError);
    const result = await server.done;
    assert.equal(result.ok, false);
    assert.match(result.failures[0]?.message ?? '', /Duplicate client id 5/);
  });

  test('gives up when the clients do not all arrive in time', { timeout: 10_000 }, async () => {
    const server = await listen({ clients: 2, acceptTimeoutMs: 200 });
    const a = await rawClient(server.port, 0);
    const result = await server.done;
    assert.equal(result.ok, false);
    assert.match(
      result.failures[0]?.message ?? '',
      /Accept timed out after 200 ms: 1 of 2 clients registered/,
    );
    await assert.rejects(a.channel.readByte(), EndOfStreamError);
  });

  test('close() and an aborted signal cut the run short', { timeout: 10_000 }, async () => {
    const server = await listen({ clients: 2 });
    const a = await rawClient(server.port, 0);
    const result = await server.close();
    assert.equal(result.ok, false);
    assert.match(result.failures[0]?.message ?? '', /closed before its clients finished/);
    // A hang-up: EOF, or a reset when the id byte was still unread in the server's kernel buffer.
    await assert.rejects(
      a.channel.readByte(),
      (err) => err instanceof EndOfStreamError || err instanceof LockIOError,
    );

    const controller = new AbortController();
    const other = await listen({ clients: 1, signal: controller.signal });
    controller.abort();
    assert.equal((await other.done).ok, false);
  });

  test('rejects bad arguments with InvalidArgumentError', async () => {
    for (const options of [
      { clients: 0 },
      { clients: 257 },
      { clients: 1.5 },
      { clients: Number.NaN },
      { clients: 2, port: -1 },
      { clients: 2, port: 70000 },
      { clients: 2, host: '' },
      { clients: 2, acceptTimeoutMs: 0 },
    ]) {
      await assert.rejects(
        LockVerifyServer.listen(options),
        InvalidArgumentError,
        JSON.stringify(options),
      );
    }
  });

  test('malformed and hostile clients never crash the server', { timeout: 30_000 }, async () => {
    let seed = 12345;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let round = 0; round < 25; round++) {
      const server = await listen({ clients: 3, acceptTimeoutMs: 300 });
      const clients = await Promise.all([0, 1, 2].map((id) => rawClient(server.port, id)));
      // Strays: connect and reset, connect and send garbage without stopping.
      const stray = await rawClient(server.port);
      stray.socket.resetAndDestroy();
      for (const [i, c] of clients.entries()) {
        const behaviour = Math.floor(random() * 4);
        const bytes = Buffer.from(
          Array.from({ length: 1 + Math.floor(random() * 64) }, () => Math.floor(random() * 256)),
        );
        if (behaviour === 0) {
          c.socket.write(bytes); // floods random bytes
          c.socket.end();
        } else if (behaviour === 1) {
          c.socket.resetAndDestroy(); // connection reset, maybe before the start
        } else if (behaviour === 2) {
          c.socket.write(bytes.subarray(0, 1));
          c.socket.destroy(); // early disconnect
        } else {
          // A well-behaved round, then leave.
          c.send(i === 0 ? ACQUIRED : 99).then(
            () => c.end(),
            () => c.socket.destroy(),
          );
        }
      }
      const result = await server.done;
      assert.ok(Array.isArray(result.failures));
    }
    // A flood larger than the read buffer, replies discarded unread.
    const server = await listen({ clients: 1 });
    const flooder = connect({ host: '127.0.0.1', port: server.port });
    flooder.on('data', () => {});
    await once(flooder, 'connect');
    const flood = Buffer.alloc(256 * 1024);
    flood[0] = 0; // the id
    for (let i = 1; i < flood.length; i += 2) flood[i] = ACQUIRED; // then acquire/release pairs
    flooder.end(flood.subarray(0, flood.length - 1));
    const result = await server.done;
    assert.equal(result.ok, true, JSON.stringify(result.failures.map((f) => f.message)));
    assert.equal(result.acquisitions, (flood.length - 2) / 2);
  });
});

describe('VerifyingLockFactory (conformance D29)', () => {
  test('reports an acquisition after it happens and a release before it happens', {
    timeout: 10_000,
  }, async () => {
    using tmp = tempDir();
    const dir = await FSDirectory.open(tmp.path);
    const seen: { byte: number; heldMeanwhile: boolean }[] = [];
    const fake = await fakeServer(async (byte) => {
      let heldMeanwhile = false;
      try {
        await (await NativeFSLockFactory.INSTANCE.obtainLock(dir, STRESS_LOCK_NAME)).close();
      } catch (err) {
        heldMeanwhile = err instanceof LockObtainFailedError;
      }
      seen.push({ byte, heldMeanwhile });
      return byte;
    });
    try {
      const factory = new VerifyingLockFactory(NativeFSLockFactory.INSTANCE, await fake.connect());
      // As a directory's own factory: FS factories must still get the FSDirectory.
      const verifiedDir = await FSDirectory.open(tmp.path, factory);
      const lock = await verifiedDir.obtainLock(STRESS_LOCK_NAME);
      assert.ok(lock.token > 0, 'the real lock’s fencing token');
      assert.ok(lock.resource.endsWith(STRESS_LOCK_NAME));
      lock.ensureValid();
      assert.equal(
        factory.isHeldElsewhere(dir, STRESS_LOCK_NAME),
        true,
        'forwarded to the delegate',
      );
      assert.equal(
        typeof factory.wakeSource(dir, STRESS_LOCK_NAME),
        'function',
        'forwarded to the delegate',
      );
      await lock.close();
      await lock.close(); // idempotent: one release message only
      assert.throws(() => lock.ensureValid(), AlreadyClosedError);
      assert.equal(lock.closed, true);
      assert.deepEqual(seen, [
        { byte: ACQUIRED, heldMeanwhile: true },
        { byte: RELEASED, heldMeanwhile: true },
      ]);
      await (await NativeFSLockFactory.INSTANCE.obtainLock(dir, STRESS_LOCK_NAME)).close();
    } finally {
      fake.close();
    }
  });

  test('EOF instead of the echo: "Lock server died because of locking error.", and the real lock is released', {
    timeout: 10_000,
  }, async () => {
    using tmp = tempDir();
    const dir = await FSDirectory.open(tmp.path);
    const fake = await fakeServer(() => undefined);
    try {
      const factory = new VerifyingLockFactory(NativeFSLockFactory.INSTANCE, await fake.connect());
      await assert.rejects(factory.obtainLock(dir, STRESS_LOCK_NAME), (err: Error) => {
        assert.ok(err instanceof LockViolationError);
        assert.equal(err.message, 'Lock server died because of locking error.');
        return true;
      });
      // Lucene leaks the real lock here; we must not.
      await (await NativeFSLockFactory.INSTANCE.obtainLock(dir, STRESS_LOCK_NAME)).close();
    } finally {
      fake.close();
    }
  });

  test('EOF on the release echo: the error is reported and the real lock still released', {
    timeout: 10_000,
  }, async () => {
    using tmp = tempDir();
    const dir = await FSDirectory.open(tmp.path);
    const fake = await fakeServer((byte) => (byte === ACQUIRED ? byte : undefined));
    try {
      const factory = new VerifyingLockFactory(NativeFSLockFactory.INSTANCE, await fake.connect());
      const lock = await factory.obtainLock(dir, STRESS_LOCK_NAME);
      await assert.rejects(lock.close(), {
        name: 'LockViolationError',
        message: 'Lock server died because of locking error.',
      });
      assert.equal(lock.closed, true);
      await (await NativeFSLockFactory.INSTANCE.obtainLock(dir, STRESS_LOCK_NAME)).close();
    } finally {
      fake.close();
    }
  });

  test('a different byte echoed: ProtocolError "Protocol violation."', {
    timeout: 10_000,
  }, async () => {
    using tmp = tempDir();
    const dir = await FSDirectory.open(tmp.path);
    const fake = await fakeServer((byte) => byte + 5);
    try {
      const factory = new VerifyingLockFactory(
        new SingleInstanceLockFactory(),
        await fake.connect(),
      );
      await assert.rejects(factory.obtainLock(dir, 'x.lock'), (err: Error) => {
        assert.ok(err instanceof ProtocolError);
        assert.equal(err.message, 'Protocol violation.');
        return true;
      });
    } finally {
      fake.close();
    }
  });

  test('two non-locking clients against the real server: the second is told the server died', {
    timeout: 10_000,
  }, async () => {
    using tmp = tempDir();
    const dir = await FSDirectory.open(tmp.path);
    const server = await listen({ clients: 2 });
    const [a, b] = (await startedClients(server, [0, 1])) as [RawClient, RawClient];
    const first = new VerifyingLockFactory(NoLockFactory.INSTANCE, a.socket);
    const second = new VerifyingLockFactory(NoLockFactory.INSTANCE, b.channel);
    const held = await first.obtainLock(dir, STRESS_LOCK_NAME);
    await assert.rejects(second.obtainLock(dir, STRESS_LOCK_NAME), {
      message: 'Lock server died because of locking error.',
    });
    await assert.rejects(held.close(), { message: 'Lock server died because of locking error.' });
    const result = await server.done;
    assert.deepEqual(
      result.failures.map((f) => f.message),
      ['id 1 got lock, but 0 already holds the lock'],
    );
  });

  test('rejects a missing delegate or connection', () => {
    assert.throws(
      () =>
        new VerifyingLockFactory(
          undefined as never,
          connect({ port: 1 }).on('error', () => {}),
        ),
      InvalidArgumentError,
    );
    assert.throws(
      () => new VerifyingLockFactory(NoLockFactory.INSTANCE, {} as never),
      InvalidArgumentError,
    );
  });
});

describe('runLockStressTest (conformance D31)', () => {
  test('two clients in one process, native locks: no violation', { timeout: 20_000 }, async () => {
    using tmp = tempDir();
    const server = await listen({ clients: 2 });
    const common = {
      verifierHost: '127.0.0.1',
      verifierPort: server.port,
      lockDir: tmp.path,
      sleepTimeMs: 0,
      count: 300,
    };
    const [r0, r1] = await Promise.all([
      runLockStressTest({ ...common, myId: 0, factory: NativeFSLockFactory.INSTANCE }),
      runLockStressTest({ ...common, myId: 1, factory: NativeFSLockFactory.INSTANCE }),
    ]);
    const result = await server.done;
    assert.equal(result.ok, true, JSON.stringify(result.failures.map((f) => f.message)));
    assert.equal(r0.obtained + r0.failed, 300);
    assert.equal(r1.obtained + r1.failed, 300);
    assert.equal(result.acquisitions, r0.obtained + r1.obtained);
    assert.ok(r0.doubleObtainProbes + r1.doubleObtainProbes > 0, 'double-obtain probes ran');
  });

  test('a second obtain that succeeds is "Double obtain"', { timeout: 10_000 }, async () => {
    using tmp = tempDir();
    // Echoes everything, so only the in-process probe can catch the broken factory.
    const fake = await fakeServer((byte) => (byte === 0 || byte === 1 ? byte : START_GUN_SIGNAL));
    try {
      await assert.rejects(
        runLockStressTest({
          myId: 2,
          verifierHost: '127.0.0.1',
          verifierPort: fake.port,
          factory: NoLockFactory.INSTANCE,
          lockDir: tmp.path,
          sleepTimeMs: 0,
          count: 10,
          random: () => 0,
        }),
        (err: Error) => {
          assert.ok(err instanceof LockViolationError);
          assert.match(err.message, /^Double obtain/);
          return true;
        },
      );
    } finally {
      fake.close();
    }
  });

  test('a wrong start signal is a protocol violation', { timeout: 10_000 }, async () => {
    using tmp = tempDir();
    const fake = await fakeServer(() => 42);
    try {
      const options = {
        myId: 1,
        verifierHost: '127.0.0.1',
        verifierPort: fake.port,
        factory: NoLockFactory.INSTANCE,
      };
      await assert.rejects(
        runLockStressTest({ ...options, lockDir: tmp.path, sleepTimeMs: 0, count: 1 }),
        {
          name: 'ProtocolError',
          message: /^Protocol violation/,
        },
      );
    } finally {
      fake.close();
    }
  });

  test('an unreachable server and an abort are reported as such', { timeout: 10_000 }, async () => {
    using tmp = tempDir();
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const port = (closed.address() as AddressInfo).port;
    closed.close();
    const common = {
      myId: 0,
      verifierHost: '127.0.0.1',
      factory: NativeFSLockFactory.INSTANCE,
      lockDir: tmp.path,
      sleepTimeMs: 5,
      count: 1000,
    };
    await assert.rejects(runLockStressTest({ ...common, verifierPort: port }), LockIOError);

    const server = await listen({ clients: 1 });
    const controller = new AbortController();
    const run = runLockStressTest({
      ...common,
      verifierPort: server.port,
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(), 100);
    await assert.rejects(run, AbortedError);
    const result = await server.done;
    assert.equal(result.ok, true, 'an abort mid-run releases and reports before leaving');
    assert.equal(result.acquisitions, result.releases);

    const waiting = await listen({ clients: 2 });
    const early = new AbortController();
    const stuck = runLockStressTest({
      ...common,
      verifierPort: waiting.port,
      signal: early.signal,
    });
    setTimeout(() => early.abort(), 100);
    await assert.rejects(stuck, AbortedError, 'an abort while waiting for the start signal');
    await waiting.close();
  });

  test('rejects bad arguments with InvalidArgumentError', async () => {
    const good = {
      myId: 0,
      verifierHost: '127.0.0.1',
      verifierPort: 9,
      factory: NativeFSLockFactory.INSTANCE,
      lockDir: '/tmp/x',
      sleepTimeMs: 1,
      count: 1,
    };
    for (const bad of [
      { myId: -1 },
      { myId: 256 },
      { myId: 1.5 },
      { verifierPort: 0 },
      { verifierPort: 65536 },
      { verifierHost: '' },
      { count: -1 },
      { count: 0.5 },
      { sleepTimeMs: -1 },
      { sleepTimeMs: Number.POSITIVE_INFINITY },
      { factory: {} },
      { lockDir: '' },
      { connectTimeoutMs: 0 },
    ]) {
      await assert.rejects(
        runLockStressTest({ ...good, ...bad } as never),
        InvalidArgumentError,
        JSON.stringify(bad),
      );
    }
  });
});

describe('the stress and verify-server commands', () => {
  test('stress: usage errors exit 1 (conformance D31)', { timeout: 30_000 }, async () => {
    const cases: string[][] = [
      [],
      ['0', '127.0.0.1', '1', 'native', '/tmp/x', '1'],
      ['0', '127.0.0.1', '1', 'native', '/tmp/x', '1', '10', 'extra'],
      ['256', '127.0.0.1', '1', 'native', '/tmp/x', '1', '10'],
      ['-1', '127.0.0.1', '1', 'native', '/tmp/x', '1', '10'],
      ['abc', '127.0.0.1', '1', 'native', '/tmp/x', '1', '10'],
      ['0', '127.0.0.1', 'port', 'native', '/tmp/x', '1', '10'],
      ['0', '127.0.0.1', '1', 'bogus', '/tmp/x', '1', '10'],
      ['0', '127.0.0.1', '1', 'native', '/tmp/x', '-1', '10'],
      ['0', '127.0.0.1', '1', 'native', '/tmp/x', '1', 'many'],
    ];
    const procs = cases.map((args) => ({ args, proc: cli('stress', ...args) }));
    // Lucene's exit code 1 for every usage error; the whole usage only for a wrong number of
    // arguments, otherwise one line naming the argument.
    for (const [i, { args, proc }] of procs.entries()) {
      assert.equal(await proc.exit, 1, `${args.join(' ')}\n${describeProc('stress', proc)}`);
      if (i < 3) assert.match(proc.stderr, /Usage: locksmith stress/);
      else assert.match(proc.stderr, /^locksmith stress: .* \(INVALID_ARGUMENT\)\n$/);
    }
    assert.match(procs[3]?.proc.stderr ?? '', /myID must be an integer from 0 to 255, got "256"/);
    assert.match(procs[6]?.proc.stderr ?? '', /verifierPort must be an integer .*got "port"/);
    assert.match(procs[7]?.proc.stderr ?? '', /Unknown lock factory "bogus"/);
  });

  test('verify-server: usage errors exit 1', { timeout: 20_000 }, async () => {
    for (const args of [
      [],
      ['127.0.0.1'],
      ['127.0.0.1', '0'],
      ['127.0.0.1', 'x'],
      ['127.0.0.1', '2', '3'],
    ]) {
      const proc = cli('verify-server', ...args);
      assert.equal(await proc.exit, 1, describeProc(args.join(' '), proc));
      if (args.length === 2) {
        assert.match(
          proc.stderr,
          /^locksmith verify-server: clients must be .*\(INVALID_ARGUMENT\)\n$/,
        );
      } else {
        assert.match(proc.stderr, /Usage: locksmith verify-server/);
      }
    }
  });

  test('verify-server survives garbage and reports it', { timeout: 20_000 }, async () => {
    const server = cli('verify-server', '127.0.0.1', '2');
    const port = await listeningPort(server);
    const stray = await rawClient(port);
    stray.socket.resetAndDestroy();
    const a = await rawClient(port, 0);
    const b = await rawClient(port, 1);
    assert.equal(await a.channel.readByte(), START_GUN_SIGNAL);
    assert.equal(await b.channel.readByte(), START_GUN_SIGNAL);
    try {
      a.socket.write(Buffer.from([200, 13, 1, 0, 255]));
      a.socket.resetAndDestroy();
      // The test's own timeout bounds this wait, as it always did.
      await eventually(
        () => server.stderr.includes('Unrecognized command'),
        20_000,
        'the server to report the garbage',
      );
      await assert.rejects(b.send(ACQUIRED), EndOfStreamError);
    } finally {
      b.socket.destroy();
    }
    assert.equal(await server.exit, 1, describeProc('verify-server', server));
    assert.match(server.stderr, /Unrecognized command: 200/);
    assert.doesNotMatch(server.stderr, /at .*\.js:\d+/, 'no stack trace: nothing crashed');
  });
});

/** Runs our server with one stress client per factory name; returns everything printed. */
async function multiProcessRun(factories: string[], sleepMs: number, count: number) {
  using tmp = tempDir();
  const server = cli('verify-server', '127.0.0.1', String(factories.length));
  const port = await listeningPort(server);
  const clients = factories.map((factory, id) =>
    cli(
      'stress',
      String(id),
      '127.0.0.1',
      String(port),
      factory,
      tmp.path,
      String(sleepMs),
      String(count),
    ),
  );
  const codes = await Promise.all(clients.map((c) => c.exit));
  const serverCode = await server.exit;
  return { server, serverCode, clients, codes };
}

function describeRun(run: { server: Proc; clients: Proc[] }): string {
  return [
    describeProc('server', run.server),
    ...run.clients.map((c, i) => describeProc(`client ${i}`, c)),
  ].join('\n');
}

describe('two processes never hold the lock at once (conformance D9)', () => {
  for (const factory of ['native', 'simple']) {
    test(`${factory}: 2 stress clients x 500 rounds, no violation`, {
      timeout: 40_000,
    }, async () => {
      const run = await multiProcessRun([factory, factory], 1, 500);
      assert.deepEqual(run.codes, [0, 0], describeRun(run));
      assert.equal(run.serverCode, 0, describeRun(run));
      assert.match(
        run.server.stdout,
        /2 clients, [1-9]\d* acquisitions, \d+ releases, no violation/,
      );
      for (const c of run.clients) assert.match(c.stdout, /Finished 500 tries/);
    });
  }

  test('none: the server catches the missing lock (the check can fail)', {
    timeout: 40_000,
  }, async () => {
    // Besides the clients overlapping, each client's own double-obtain probe (1 round in 10)
    // reports a second acquisition: over 500 rounds that is certain to happen.
    const run = await multiProcessRun(['none', 'none', 'none'], 1, 500);
    assert.equal(run.serverCode, 1, describeRun(run));
    assert.match(
      run.server.stderr,
      /LOCK VIOLATION: id \d+ got lock, but \d+ already holds the lock/,
    );
    for (const [i, c] of run.clients.entries()) {
      assert.equal(run.codes[i], 1, describeRun(run));
      assert.match(c.stderr, /Lock server died because of locking error\./);
    }
  });
});
