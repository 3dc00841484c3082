/**
 * Every value that enters from the wire is checked for its type before anything formats it: for
 * every method, every position of its arguments (nested ones included: a put's cell family, a
 * query's qualifier, an option), and every hostile value (maps with a non-function `toString`
 * or `valueOf`, a map whose `constructor.name` is such a map, arrays where scalars belong and
 * scalars where arrays belong, deep nesting, non-finite, negative, fractional and huge numbers,
 * bigints), the call is answered with an error of the client's input (never `INTERNAL`), the
 * connection stays usable, and nothing was written. The same values in process give
 * `INVALID_ARGUMENT`.
 *
 * And every message kind before HELLO is a `PROTOCOL_ERROR` of the connection, which closes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Packr } from 'msgpackr';
import { InvalidArgumentError, LocksmithError } from '../../src/core/errors.js';
import { Get, Put, Region } from '../../src/rows/index.js';
import { frame } from '../../src/wire/frame.js';
import { tempDir } from '../helpers.js';
import { RawClient } from './raw-client.js';
import { startServer } from './server-fixture.js';

/** Nested `depth` deep: an array of an array of ..., and a map of a map of .... */
function nestedArray(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}
function nestedMap(depth: number): unknown {
  let v: unknown = { toString: 1 };
  for (let i = 0; i < depth; i++) v = { toString: v, valueOf: 2 };
  return v;
}

const HOSTILE: [string, unknown][] = [
  ['{toString: 1, valueOf: 2}', { toString: 1, valueOf: 2 }],
  ['{toString: {}, valueOf: {}}', { toString: {}, valueOf: {} }],
  ['{constructor: {name: {toString: 1}}}', { constructor: { name: { toString: 1 } } }],
  ['{__proto__: ...}', JSON.parse('{"__proto__": {"toString": 1}, "toJSON": 1}')],
  ['{length: 1e9}', { length: 1e9, 0: 'x' }],
  ['an empty map', {}],
  ['an empty array', []],
  ['[1, 2, 3]', [1, 2, 3]],
  ['[{toString: 1}]', [{ toString: 1 }]],
  ['arrays 500 deep', nestedArray(500)],
  ['maps 200 deep', nestedMap(200)],
  ['NaN', Number.NaN],
  ['Infinity', Number.POSITIVE_INFINITY],
  ['-Infinity', Number.NEGATIVE_INFINITY],
  ['-1', -1],
  ['-2^53', -(2 ** 53)],
  ['0.5', 0.5],
  ['1e308', 1e308],
  ['2^64-1 (bigint)', 2n ** 64n - 1n],
  ['-2^63 (bigint)', -(2n ** 63n)],
  ['true', true],
  ['a Date', new Date(0)],
  // msgpackr's own extensions, which a hostile peer may send: they decode to these objects.
  ['a Set', new Set([1])],
  ['an Error', new Error('hostile')],
  ['a RegExp', /x/g],
  ['a Float64Array', new Float64Array(2)],
  ['an Int8Array', new Int8Array(3)],
];

/** Packs what msgpackr can, its extensions included (the server's own packer sends none). */
const hostilePackr = new Packr({ moreTypes: true, useRecords: false, encodeUndefinedAsNil: true });
let nextCallId = 1_000_000;

/** A CALL packed with msgpackr's extensions; resolves with the error answer, or undefined. */
async function hostileCall(
  raw: RawClient,
  method: string,
  args: unknown[],
): Promise<{ code?: unknown; message: string } | undefined> {
  const id = nextCallId++;
  raw.sendBytes(frame(hostilePackr.pack([1, id, method, args])));
  const answer = await raw.next((m) => (m[0] === 1 || m[0] === 2) && m[1] === id);
  return answer[0] === 2 ? { code: answer[2], message: String(answer[3]) } : undefined;
}

const TABLE = 't';

/** A valid call of each method that takes arguments (filled in with live ids before use). */
function templates(lockId: string, scannerId: string): [string, unknown[]][] {
  const query = [[['f', ['q']]], 1, 0, 2 ** 53 - 1];
  const put = ['r', null, null, [['f', 'q', 'v', null]]];
  const putLocked = ['locked', lockId, null, [['f', 'q', 'v', 1]]];
  const del = ['r', null, null, [[0, 'f', 'q', null]]];
  return [
    ['get', [TABLE, ['r', null, query]]],
    ['get', [TABLE, ['locked', lockId, query]]],
    ['put', [TABLE, put, 0]],
    ['put', [TABLE, putLocked, 0]],
    ['delete', [TABLE, del, 0]],
    ['checkAndPut', [TABLE, 'r', 'f', 'q', 'v', put, 0]],
    ['checkAndDelete', [TABLE, 'r', 'f', 'q', null, del, 0]],
    ['increment', [TABLE, ['r', null, null, [['f', 'n', 1]]], 0]],
    ['mutateRow', [TABLE, ['r', [[0, put]]], 0]],
    [
      'mutateRows',
      [
        TABLE,
        [
          [0, put],
          [1, del],
        ],
        0,
      ],
    ],
    [
      'batch',
      [
        TABLE,
        [
          [0, put],
          [1, del],
        ],
        0,
      ],
    ],
    ['openScanner', [TABLE, ['a', 'z', query], 1]],
    ['nextRows', [scannerId, 1]],
    ['closeScanner', [scannerId]],
    ['lockRow', [TABLE, 'other', 0]],
    ['tryLockRow', [TABLE, 'other']],
    ['unlockRow', [TABLE, lockId]],
    ['renewLease', [TABLE, lockId]],
    ['createTable', ['u', ['f', { name: 'g', maxVersions: 2 }], { timestampOnArrival: false }]],
    ['describeTable', [TABLE]],
    ['dropTable', ['nosuch']],
  ];
}

/** Every path into `value` (an array of indexes), the empty path excluded. */
function paths(value: unknown, prefix: number[] = []): number[][] {
  if (!Array.isArray(value)) return [];
  const out: number[][] = [];
  value.forEach((item, i) => {
    out.push([...prefix, i]);
    out.push(...paths(item, [...prefix, i]));
  });
  return out;
}

/** `value` with the element at `path` replaced (copies along the path only). */
function replaced(value: unknown[], path: number[], by: unknown): unknown[] {
  const [head, ...rest] = path as [number, ...number[]];
  const copy = [...value];
  copy[head] = rest.length === 0 ? by : replaced(value[head] as unknown[], rest, by);
  return copy;
}

describe('hostile values over the wire', () => {
  it('every method x argument position x hostile value: a client error, never INTERNAL', async () => {
    await using server = await startServer({ maxInFlight: 64 });
    const { raw } = await RawClient.session(server.port);
    await raw.call('createTable', [TABLE, ['f']]);
    for (const row of ['a', 'b', 'c']) {
      await raw.call('put', [TABLE, [row, null, null, [['f', 'q', 'seed', 1]]], 0]);
    }
    const [lockId] = (await raw.call('lockRow', [TABLE, 'locked', 0])) as [string];
    const [scannerId] = (await raw.call('openScanner', [
      TABLE,
      ['', null, [[], 1, 0, 2 ** 53 - 1]],
      1,
    ])) as [string];
    assert.equal(typeof scannerId, 'string');

    const internal: string[] = [];
    let calls = 0;
    for (const [method, args] of templates(lockId, scannerId)) {
      for (const path of paths(args)) {
        // Calls go out in windows below maxInFlight; each answer is checked.
        const pending: [string, Promise<unknown>][] = [];
        for (const [name, value] of HOSTILE) {
          const label = `${method} args[${path.join('][')}] = ${name}`;
          pending.push([label, hostileCall(raw, method, replaced(args, path, value))]);
        }
        for (const [label, answer] of pending) {
          calls++;
          const err = (await answer) as { code?: unknown; message: string } | undefined;
          if (err === undefined) continue;
          const code = err.code;
          if (typeof code !== 'string' || code === 'INTERNAL' || code === 'PROTOCOL_ERROR') {
            internal.push(`${label}: ${String(code)} ${err.message}`);
          }
        }
        assert.equal(raw.closed, false, `the connection closed at ${method} [${path}]`);
      }
    }
    assert.deepEqual(internal, [], `${internal.length} of ${calls} calls`);
    assert.ok(calls > 1500, `only ${calls} calls were made`);

    // Some substitutions make a valid call (a waitMs of -1 is "forever"); none broke the
    // session: its scanner reads on, and its row lock is still its own.
    const [rows] = (await raw.call('nextRows', [scannerId, 10])) as [unknown[][]];
    assert.deepEqual(
      rows.map((r) => Buffer.from(r[0] as Uint8Array).toString()),
      ['b', 'c'],
    );
    await raw.call('unlockRow', [TABLE, lockId]);
    assert.ok(((await raw.call('listTables', [])) as string[]).includes(TABLE));
    raw.destroy();
  });

  it('the same values in process are INVALID_ARGUMENT', async () => {
    using dir = tempDir();
    const region = await Region.open({ dir: dir.path, families: ['f'], durability: 'none' });
    try {
      const lock = await region.lockRow('locked');
      const refused: string[] = [];
      for (const [name, value] of HOSTILE) {
        const attempts: [string, () => unknown][] = [
          ['unlockRow', () => region.unlockRow(value as string)],
          ['renewLease', () => region.renewLease(value as string)],
          ['lockRow', () => region.lockRow(value as string)],
          ['Put family', () => new Put('r').add(value as string, 'q', 'v')],
          ['Put row', () => new Put(value as string)],
          ['Get family', () => new Get('r').addFamily(value as string)],
          ['Get maxVersions', () => new Get('r').setMaxVersions(value as number)],
          [
            'checkAndPut family',
            () =>
              region.checkAndPut('r', value as string, 'q', null, new Put('r').add('f', 'q', 'v')),
          ],
        ];
        for (const [what, attempt] of attempts) {
          try {
            await attempt();
            refused.push(`${what} = ${name}: accepted`);
          } catch (err) {
            if (!(err instanceof InvalidArgumentError)) {
              refused.push(
                `${what} = ${name}: ${err instanceof LocksmithError ? err.code : String(err)}`,
              );
            }
          }
        }
      }
      assert.deepEqual(refused, []);
      await lock.close();
    } finally {
      await region.close();
    }
  });
});

describe('messages before HELLO', () => {
  const kinds: [string, unknown[]][] = [
    ['CALL ping', [1, 1, 'ping', []]],
    ['CALL status', [1, 1, 'status', []]],
    ['CALL of an unknown method', [1, 1, 'nosuch', []]],
    ['CANCEL', [2, 1]],
    ['CANCEL of id 7', [2, 7]],
  ];
  for (const [name, message] of kinds) {
    it(`${name} before HELLO is a PROTOCOL_ERROR of the connection, and a HELLO after it is not answered`, async () => {
      await using server = await startServer();
      const raw = await RawClient.open(server.port);
      raw.send(message);
      raw.send([0, 1, {}]);
      const error = await raw.next((m) => m[0] === 2 && m[1] === 0);
      assert.equal(error[2], 'PROTOCOL_ERROR');
      assert.match(String(error[3]), /HELLO/);
      await raw.whenClosed();
      assert.equal(
        raw.messages.some((m) => m[0] === 0),
        false,
        'no WELCOME after a message before HELLO',
      );
    });
  }
});
