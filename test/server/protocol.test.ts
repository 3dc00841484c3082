/**
 * The protocol's hostile edges: frames of the wrong size, bytes that are not MessagePack,
 * envelopes of the wrong shape, calls before the handshake, a wrong protocol version, hostile
 * argument values, a silent handshake, too many calls in flight, a token. The server answers
 * with an error (for the call, or for the connection and then closes it), keeps serving
 * everyone else, and its data is unchanged.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Get, Put } from '../../src/rows/index.js';
import { encode } from '../../src/wire/codec.js';
import { frame } from '../../src/wire/frame.js';
import { sleep } from '../helpers.js';
import { RawClient } from './raw-client.js';
import { client, startServer } from './server-fixture.js';

function header(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

async function connectionError(raw: RawClient): Promise<unknown[]> {
  const m = await raw.next((x) => x[0] === 2 && x[1] === 0);
  await raw.whenClosed();
  return m;
}

describe('server protocol: malformed input', () => {
  const broken: [string, (raw: RawClient) => void, string][] = [
    ['a zero-length frame', (r) => r.sendBytes(header(0)), 'PROTOCOL_ERROR'],
    [
      'a frame above the limit (no payload needed)',
      (r) => r.sendBytes(header(0xffff_ffff)),
      'PROTOCOL_ERROR',
    ],
    [
      'bytes that are not MessagePack',
      (r) => r.sendBytes(frame(Buffer.from([0xc1]))),
      'PROTOCOL_ERROR',
    ],
    [
      'a truncated MessagePack value',
      (r) => r.sendBytes(frame(Buffer.from([0x93, 0x01]))),
      'PROTOCOL_ERROR',
    ],
    [
      'trailing bytes after the value',
      (r) => r.sendBytes(frame(Buffer.from([0x01, 0x02]))),
      'PROTOCOL_ERROR',
    ],
    ['a map instead of an array', (r) => r.send({ a: 1 } as never), 'PROTOCOL_ERROR'],
    ['an unknown message kind', (r) => r.send([9, 1]), 'PROTOCOL_ERROR'],
    ['a CALL before HELLO', (r) => r.send([1, 1, 'ping', []]), 'PROTOCOL_ERROR'],
    ['HELLO of another protocol version', (r) => r.send([0, 99, {}]), 'PROTOCOL_ERROR'],
    ['HELLO with an unknown option', (r) => r.send([0, 1, { evil: true }]), 'PROTOCOL_ERROR'],
    [
      'HELLO with a session lease out of bounds',
      (r) => r.send([0, 1, { sessionLeaseMs: 1 }]),
      'INVALID_ARGUMENT',
    ],
  ];
  for (const [what, send, code] of broken) {
    it(`${what}: one connection error (${code}), then closed; others unaffected (conformance V11)`, async () => {
      await using server = await startServer();
      await using good = await client(server);
      await good.createTable('t', ['f']);
      await good.table('t').put(new Put('r').add('f', 'q', 'kept'));
      const raw = await RawClient.open(server.port);
      send(raw);
      const m = await connectionError(raw);
      assert.equal(m[2], code, JSON.stringify(m));
      assert.equal(typeof m[3], 'string');
      assert.equal(
        (await good.table('t').get(new Get('r'))).getValue('f', 'q')?.toString(),
        'kept',
      );
    });
  }

  it('a CALL with a bad envelope after the handshake closes the connection', async () => {
    await using server = await startServer();
    const { raw } = await RawClient.session(server.port);
    raw.send([1, 0, 'ping', []]); // call id 0 is reserved
    const m = await connectionError(raw);
    assert.equal(m[2], 'PROTOCOL_ERROR');
  });

  it('bad arguments fail only their call, with the in-process message; the connection lives on (conformance V12)', async () => {
    await using server = await startServer();
    await using good = await client(server);
    await good.createTable('t', ['f']);
    const { raw } = await RawClient.session(server.port);
    const hostile: [string, unknown[], string][] = [
      ['unknown method', ['t'], 'UNSUPPORTED_OPERATION'],
      ['put', ['t', 'not an array'], 'INVALID_ARGUMENT'],
      ['put', ['t', [Buffer.alloc(0), null, null, []]], 'INVALID_ARGUMENT'],
      ['put', ['t', [Buffer.alloc(40_000), null, null, []]], 'INVALID_ARGUMENT'],
      ['put', ['t', [Buffer.from('r'), null, Number.NaN, []]], 'INVALID_ARGUMENT'],
      [
        'put',
        [
          't',
          [Buffer.from('r'), null, null, [['nofamily', Buffer.from('q'), Buffer.from('v'), null]]],
        ],
        'INVALID_ARGUMENT',
      ],
      [
        'put',
        ['t', [Buffer.from('r'), null, null, [['f', Buffer.from('q'), Buffer.from('v'), -5]]]],
        'INVALID_ARGUMENT',
      ],
      ['put', ['t', [Buffer.from('r'), 'forged-lock-id', null, []]], 'UNKNOWN_ROW_LOCK'],
      ['put', ['../../etc', [Buffer.from('r'), null, null, []]], 'TABLE_NOT_FOUND'],
      ['get', ['t', [Buffer.from('r'), null, [[], 0, 0, 1]]], 'INVALID_ARGUMENT'],
      ['lockRow', ['t', { row: 1 }, null], 'INVALID_ARGUMENT'],
      ['lockRow', ['t', Buffer.from('r'), -7], 'INVALID_ARGUMENT'],
      [
        'increment',
        ['t', [Buffer.from('r'), null, null, [['f', Buffer.from('q'), 1e30]]]],
        'INVALID_ARGUMENT',
      ],
      [
        'increment',
        ['t', [Buffer.from('r'), null, null, [['f', Buffer.from('q'), 1.5]]]],
        'INVALID_ARGUMENT',
      ],
      ['nextRows', ['no-such-scanner', 10], 'LEASE_EXPIRED'],
      ['createTable', ['../escape', ['f']], 'INVALID_ARGUMENT'],
      ['createTable', ['ok', []], 'INVALID_ARGUMENT'],
      ['createTable', ['t', ['f']], 'TABLE_EXISTS'],
      ['dropTable', ['missing'], 'TABLE_NOT_FOUND'],
      ['splitTable', ['missing', Buffer.from('k')], 'TABLE_NOT_FOUND'],
      ['splitTable', ['t', 42], 'INVALID_ARGUMENT'],
      ['splitTable', ['t', Buffer.alloc(0)], 'INVALID_ARGUMENT'],
      ['splitTable', ['t', Buffer.alloc(40_000, 1)], 'INVALID_ARGUMENT'],
      ['splitTable', ['t'], 'INVALID_ARGUMENT'],
      ['regionMap', ['missing'], 'TABLE_NOT_FOUND'],
      ['regionMap', [{ name: 't' }], 'TABLE_NOT_FOUND'],
      ['regionMap', [], 'INVALID_ARGUMENT'],
      ['regionMap', ['t', 'extra'], 'INVALID_ARGUMENT'],
      // Every method's argument count is its documented shape's: too few or too many is refused.
      ['put', ['t'], 'INVALID_ARGUMENT'],
      ['put', ['t', [Buffer.from('r'), null, null, []], null, 'extra'], 'INVALID_ARGUMENT'],
      ['lockRow', ['t', Buffer.from('r')], 'INVALID_ARGUMENT'],
      ['lockRow', ['t', Buffer.from('r'), null, 'yes'], 'INVALID_ARGUMENT'],
      ['lockRow', ['t', Buffer.from('r'), null, 1], 'INVALID_ARGUMENT'],
      ['lockRow', ['t', Buffer.from('r'), null, true, 'extra'], 'INVALID_ARGUMENT'],
      ['tryLockRow', ['t', Buffer.from('r'), {}], 'INVALID_ARGUMENT'],
      ['ping', ['extra'], 'INVALID_ARGUMENT'],
      ['status', [1, 2], 'INVALID_ARGUMENT'],
      ['unlockRow', ['t'], 'INVALID_ARGUMENT'],
      ['checkAndPut', ['t', Buffer.from('r'), 'f', Buffer.from('q'), null], 'INVALID_ARGUMENT'],
    ];
    for (const [method, args, code] of hostile) {
      await assert.rejects(
        raw.call(method === 'unknown method' ? 'rm -rf' : method, args),
        { code },
        `${method} ${String(args[1])}`,
      );
    }
    await assert.rejects(raw.call('lockRow', ['t', Buffer.from('r')]), {
      message: 'lockRow takes [table, row, waitMs | nil, renew?], got 2 arguments',
    });
    assert.equal(await raw.call('ping', []), null);
    const [self, regions] = (await raw.call('regionMap', ['t'])) as [string, unknown[][]];
    assert.equal(self, `127.0.0.1:${server.port}`);
    assert.deepEqual(
      regions.map(([start, end, at]) => [String(start), String(end), at]),
      [['', '', self]],
      'one region, from the first row to the end, served here',
    );
    assert.deepEqual(await good.listTables(), ['t']);
    assert.equal((await good.table('t').get(new Get('r'))).isEmpty, true, 'nothing was written');
    assert.deepEqual((await good.describeTable('t')).splits, [], 'no split was made');
  });

  it('a connection that sends no HELLO is dropped after the handshake timeout (conformance V14)', async () => {
    await using server = await startServer({ handshakeTimeoutMs: 300 });
    const raw = await RawClient.open(server.port);
    const m = await connectionError(raw);
    assert.equal(m[2], 'PROTOCOL_ERROR');
    assert.match(String(m[3]), /No HELLO within 300 ms/);
  });

  it('calls in flight beyond the limit are refused (LIMIT_EXCEEDED, retryable) (conformance V14)', async () => {
    await using server = await startServer({ maxInFlight: 3 });
    await using holder = await client(server);
    await holder.createTable('t', ['f']);
    const lock = await holder.table('t').lockRow('r');
    const { raw } = await RawClient.session(server.port);
    for (let id = 1; id <= 4; id++) raw.send([1, id, 'lockRow', ['t', Buffer.from('r'), 60_000]]);
    const refused = await raw.next((m) => m[0] === 2 && m[1] === 4);
    assert.equal(refused[2], 'LIMIT_EXCEEDED');
    assert.equal(refused[4], true);
    await lock.close();
    raw.destroy();
  });

  it('per-session limits on held locks and lock waits (conformance V14)', async () => {
    await using server = await startServer({ maxLocksPerSession: 2, maxWaitersPerSession: 1 });
    await using a = await client(server);
    await using b = await client(server);
    await a.createTable('t', ['f']);
    const l1 = await a.table('t').lockRow('1');
    const l2 = await a.table('t').lockRow('2');
    await assert.rejects(a.table('t').lockRow('3'), { code: 'LIMIT_EXCEEDED' });
    await assert.rejects(a.table('t').tryLockRow('3'), { code: 'LIMIT_EXCEEDED' });
    const w1 = b.table('t').lockRow('1', { waitMs: 20_000 });
    await sleep(100);
    await assert.rejects(b.table('t').lockRow('2', { waitMs: 20_000 }), { code: 'LIMIT_EXCEEDED' });
    await l1.close();
    await (await w1).close();
    await l2.close();
  });
});

describe('server security', () => {
  it('listens on loopback unless told otherwise (conformance V14)', async () => {
    await using server = await startServer();
    assert.equal(server.host, '127.0.0.1');
  });

  it('with a token: nothing but the handshake before it; a wrong or missing token is refused (conformance V13)', async () => {
    await using server = await startServer({ token: 's3cret-token' });
    for (const hello of [{}, { token: 'wrong' }, { token: '' }]) {
      const raw = await RawClient.open(server.port);
      raw.send([0, 1, hello]);
      const m = await connectionError(raw);
      assert.equal(m[2], 'UNAUTHENTICATED');
    }
    const early = await RawClient.open(server.port);
    early.send([1, 1, 'listTables', []]);
    assert.equal((await connectionError(early))[2], 'PROTOCOL_ERROR');
    await assert.rejects(client(server), { code: 'UNAUTHENTICATED' });
    await using ok = await client(server, { token: 's3cret-token' });
    assert.deepEqual(await ok.listTables(), []);
  });

  it('lock ids carry 64 random bits: 100 grants, distinct random parts, about half their bits set', async () => {
    await using server = await startServer();
    await using a = await client(server);
    await a.createTable('t', ['f']);
    const ids = new Set<string>();
    for (let i = 0; i < 100; i++) {
      const lock = await a.table('t').lockRow(`r${i}`);
      ids.add(lock.lockId);
      await lock.close();
    }
    assert.equal(ids.size, 100);
    // 15 bytes each: a 7-byte sequence number, then 8 bytes from crypto.
    const tails = [...ids].map((id) => Buffer.from(id, 'base64url').subarray(7));
    assert.equal(new Set(tails.map((t) => t.toString('hex'))).size, 100);
    let bits = 0;
    for (const tail of tails)
      for (const byte of tail) for (let b = byte; b > 0; b >>= 1) bits += b & 1;
    const mean = bits / tails.length;
    assert.ok(mean > 24 && mean < 40, `mean ${mean} of 64 bits set: not random`);
  });

  it('session ids are not shown on the status page', async () => {
    await using server = await startServer();
    await using a = await client(server);
    const status = JSON.stringify(await a.status());
    assert.ok(a.session !== undefined);
    assert.ok(!status.includes(a.session.id), 'the full session id leaked into status');
  });

  it('a frame written byte by byte is read correctly', async () => {
    await using server = await startServer();
    const raw = await RawClient.open(server.port);
    for (const byte of frame(encode([0, 1, {}]))) raw.sendBytes(Buffer.from([byte]));
    const w = await raw.next((m) => m[0] === 0);
    assert.equal(typeof (w[2] as { session: string }).session, 'string');
    raw.destroy();
  });
});
