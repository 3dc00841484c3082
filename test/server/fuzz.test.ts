/**
 * Hostile input against an in-process server, from many connections at once: random, truncated,
 * oversized and empty frames; frames that are valid MessagePack with hostile values (wrong types,
 * huge and non-finite numbers, deep nesting within the frame limit, prototype keys, near-valid
 * calls with one field wrong). Throughout, a well-behaved client keeps getting answers; at the
 * end the server's heap (after a GC) is within a generous bound of the start, and a table's
 * contents are exactly what they were. Seeded: a failure names its seed (FUZZ_SEED=<n> reruns it).
 *
 * And a server with a token answers nothing else to a client without it: no read, no write, no
 * lock, whatever it sends.
 */
import assert from 'node:assert/strict';
import { connect as netConnect, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { LocksmithClient } from '../../src/client/locksmith-client.js';
import { Get, Put, Scan } from '../../src/rows/index.js';
import { CALLS } from '../../src/wire/calls.js';
import { encode } from '../../src/wire/codec.js';
import { frame } from '../../src/wire/frame.js';
import { seeded, sleep } from '../helpers.js';
import { RawClient } from './raw-client.js';
import { client, startServer } from './server-fixture.js';

const MAX_FRAME = 64 * 1024;
const SEED = Number(process.env.FUZZ_SEED ?? 0x10c4);

class Hostile {
  readonly #r: () => number;
  constructor(seed: number) {
    this.#r = seeded(seed);
  }
  int(n: number): number {
    return Math.floor(this.#r() * n);
  }
  chance(p: number): boolean {
    return this.#r() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }
  bytes(n: number): Buffer {
    const out = Buffer.allocUnsafe(n);
    for (let i = 0; i < n; i++) out[i] = this.int(256);
    return out;
  }
  /** A string of 2..40 random code units (never a short valid name like `f`). */
  string(): string {
    let s = '';
    const n = 2 + this.int(39);
    for (let i = 0; i < n; i++) s += String.fromCharCode(this.int(0xd800));
    return s;
  }
  number(): number | bigint {
    return this.pick<() => number | bigint>([
      () => Number.NaN,
      () => Number.POSITIVE_INFINITY,
      () => Number.NEGATIVE_INFINITY,
      () => -0,
      () => 2 ** 53 + 2,
      () => -(2 ** 63),
      () => 1e308,
      () => 5e-324,
      () => 0.5,
      () => 2n ** 64n - 1n,
      () => -(2n ** 63n),
      () => 0xffff_ffff,
      () => 0x1_0000_0000,
      () => -1,
      () => this.int(1000),
    ])();
  }
  /** A random MessagePack value, nested at most `depth` deep. */
  value(depth = 3): unknown {
    const kinds = depth > 0 ? 9 : 6;
    switch (this.int(kinds)) {
      case 0:
        return null;
      case 1:
        return this.chance(0.5);
      case 2:
        return this.number();
      case 3:
        return this.string();
      case 4:
        return this.bytes(this.int(64));
      case 5:
        return this.chance(0.1) ? 'x'.repeat(this.int(MAX_FRAME / 2)) : '';
      case 6:
        return Array.from({ length: this.int(6) }, () => this.value(depth - 1));
      case 7: {
        const o: Record<string, unknown> = {};
        for (let i = this.int(5); i > 0; i--) {
          // An own property even for `__proto__` (the wire can carry that key).
          Object.defineProperty(
            o,
            this.pick(['__proto__', 'constructor', 'prototype', 'toString', this.string()]),
            { value: this.value(depth - 1), enumerable: true, configurable: true, writable: true },
          );
        }
        return o;
      }
      default:
        return this.deep();
    }
  }
  /** Arrays (or maps) nested thousands deep: a few bytes each, well within the frame limit. */
  deepPayload(): Buffer {
    const n = 100 + this.int(20_000);
    // fixarray of 1, or fixmap of 1 keyed "k", around and around a nil.
    const unit = this.chance(0.5) ? [0x91] : [0x81, 0xa1, 0x6b];
    return Buffer.from([...Array.from({ length: n }, () => unit).flat(), 0xc0]);
  }
  deep(): unknown {
    let v: unknown = null;
    for (let i = this.int(200); i > 0; i--) v = [v];
    return v;
  }
  /** A call that is almost right: a real method on the real table, one field hostile. */
  nearValidCall(id: number, envelope = false): unknown[] {
    const method = this.pick(Object.keys(CALLS).filter((m) => m !== 'dropTable'));
    const row = this.chance(0.5) ? Buffer.from(`nope-${this.int(100)}`) : this.value(1);
    const cell = [
      this.pick(['f', 'nosuch', this.value(0)]),
      this.value(0),
      this.value(0),
      this.number(),
    ];
    // A cell with the real family always carries a hostile timestamp.
    if (cell[0] === 'f') cell[3] = this.pick([Number.NaN, Number.POSITIVE_INFINITY, '1', [], {}]);
    const mutation = [row, this.pick([null, 'lock', this.value(0)]), this.number(), [cell]];
    const args = this.pick<unknown[]>([
      ['fz', mutation],
      ['fz', mutation, this.number()],
      ['fz', [mutation, mutation]],
      ['fz', row, this.number()],
      ['fz', this.value(2)],
      [this.value(1), mutation],
      [this.value(1)],
      Array.from({ length: this.int(5) }, () => this.value(2)),
    ]);
    // The envelope is right (a valid id, an argument array) unless `envelope` says otherwise.
    if (!envelope) return [1, id, this.chance(0.9) ? method : this.string(), args];
    return [1, this.pick<unknown>([id, -id, 0, 2 ** 40, 1.5, 'id', null]), method, this.value(2)];
  }
  /** One hostile frame (bytes as sent), and whether it ends the stream mid-frame. */
  frame(id: number): { bytes: Buffer; truncated?: boolean } {
    switch (this.int(16)) {
      case 0: // random payload in a well-formed frame
        return { bytes: frame(this.bytes(1 + this.int(256))) };
      case 1: {
        // truncated: the header promises more than is sent
        const full = frame(encode(this.nearValidCall(id)));
        return { bytes: full.subarray(0, this.int(full.length)), truncated: true };
      }
      case 2: {
        // oversized or empty length
        const header = Buffer.alloc(4);
        header.writeUInt32BE(this.pick([0, MAX_FRAME + 1, 0xffff_ffff, 2 ** 31]), 0);
        return { bytes: header };
      }
      case 3:
        return { bytes: frame(this.deepPayload()) };
      case 4: // a well-formed envelope of a random kind
        return {
          bytes: frame(
            encode([this.pick([0, 1, 2, 3, -1, 'x', null]), this.value(), this.value()]),
          ),
        };
      case 5: // HELLO again, or with hostile options
        return {
          bytes: frame(
            encode([
              0,
              this.pick([1, 0, 2, 'one', this.number()]),
              this.pick([this.value(), { sessionLeaseMs: this.number(), session: this.value(0) }]),
            ]),
          ),
        };
      case 6: // CANCEL of anything
        return { bytes: frame(encode([2, this.pick([id, this.number(), this.value(0)])])) };
      case 7:
        return { bytes: frame(encode(this.nearValidCall(id, true))) };
      default:
        return { bytes: frame(encode(this.nearValidCall(id))) };
    }
  }
}

/** Opens a socket; resolves once connected (or failed: the fuzz goes on). */
function open(port: number): Promise<Socket | undefined> {
  return new Promise((resolve) => {
    const socket = netConnect({ host: '127.0.0.1', port }, () => resolve(socket));
    socket.on('error', () => resolve(undefined));
    socket.on('data', () => undefined);
  });
}

/** Everything in table `fz`, every version, as text: what must not change. */
async function contents(c: LocksmithClient): Promise<string> {
  const rows: string[] = [];
  for await (const result of c.table('fz').scan(new Scan().setMaxVersions())) {
    rows.push(
      result.cells
        .map(
          (cell) =>
            `${cell.row}/${cell.family}:${cell.qualifier}/${cell.timestamp}=${cell.value.toString('hex')}`,
        )
        .join(' '),
    );
  }
  return rows.join('\n');
}

/** `gc()` if this process can have it, else undefined (then RSS is compared, loosely). */
function gcFunction(): (() => void) | undefined {
  const g = (globalThis as { gc?: () => void }).gc;
  if (g !== undefined) return g;
  try {
    setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as () => void;
  } catch {
    return undefined;
  }
}

async function memory(gc: (() => void) | undefined): Promise<number> {
  if (gc === undefined) return process.memoryUsage().rss;
  for (let i = 0; i < 3; i++) {
    gc();
    await sleep(20);
  }
  return process.memoryUsage().heapUsed;
}

describe('server fuzz', () => {
  it(`keeps serving, bounded and unchanged, under thousands of hostile frames (seed ${SEED})`, async () => {
    await using server = await startServer({
      maxFrameBytes: MAX_FRAME,
      maxSessionLeaseMs: 1_000,
      sessionLeaseMs: 1_000,
    });
    await using good = await client(server, { name: 'well-behaved' });
    await good.createTable('fz', [{ name: 'f', maxVersions: 3 }]);
    for (let i = 0; i < 50; i++) {
      await good
        .table('fz')
        .put(
          new Put(`row-${i}`).add('f', 'q', `value-${i}`).add('f', 'r', Buffer.from([i, 0, 255])),
        );
    }
    const before = await contents(good);
    const gc = gcFunction();
    const startMemory = await memory(gc);

    // The well-behaved client's round trips, all through the fuzz.
    let stop = false;
    let roundTrips = 0;
    const failures: unknown[] = [];
    const watcher = (async () => {
      while (!stop) {
        try {
          await good.ping();
          const r = await good.table('fz').get(new Get('row-7'));
          assert.equal(r.getValue('f', 'q')?.toString(), 'value-7');
          roundTrips++;
        } catch (err) {
          failures.push(err);
        }
        await sleep(5);
      }
    })();

    const WORKERS = 8;
    const FRAMES = Number(process.env.FUZZ_FRAMES ?? 12_000);
    let sent = 0;
    const worker = async (w: number) => {
      const h = new Hostile(SEED * 31 + w);
      let id = 1;
      while (sent < FRAMES) {
        const socket = await open(server.port);
        if (socket === undefined) continue;
        // Half the connections send only well-enveloped calls with hostile values, so they
        // reach the methods; the others send anything, and are mostly dropped early.
        const callsOnly = h.chance(0.5);
        if (callsOnly || h.chance(0.8)) {
          socket.write(frame(encode([0, 1, callsOnly || h.chance(0.9) ? {} : h.value()])));
        }
        const burst = 1 + h.int(callsOnly ? 100 : 30);
        for (let i = 0; i < burst && !socket.destroyed; i++) {
          const { bytes, truncated } = callsOnly
            ? { bytes: frame(encode(h.nearValidCall(id++))), truncated: false }
            : h.frame(id++);
          sent++;
          if (!socket.write(bytes)) {
            // The server may close instead of reading on: a close ends the wait too.
            await new Promise((r) => {
              socket.once('drain', r);
              socket.once('close', r);
            });
          }
          if (truncated) break;
        }
        // A polite end (so what was sent is read), or an abrupt one.
        const closed = new Promise((r) => socket.once('close', r));
        if (h.chance(0.7)) socket.end();
        else socket.destroy();
        await Promise.race([closed, sleep(1_000)]);
        socket.destroy();
      }
    };
    await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
    stop = true;
    await watcher;
    assert.deepEqual(failures, [], 'the well-behaved client got an error');
    assert.ok(roundTrips > 0);
    assert.ok(sent >= FRAMES);
    // The hostile calls reached the methods (and failed there), not only the frame reader.
    const failedCalls = [...server.calls.failed.values()].reduce((a, b) => a + b, 0);
    assert.ok(failedCalls >= FRAMES / 20, `only ${failedCalls} hostile calls were dispatched`);
    assert.ok(({} as { polluted?: unknown }).polluted === undefined);

    // Hostile sessions expire within their (bounded) lease; then memory is back near the start.
    await sleep(1_500);
    assert.equal(await contents(good), before, 'the table changed');
    const endMemory = await memory(gc);
    const bound = gc === undefined ? 256 * 1024 * 1024 : 64 * 1024 * 1024;
    assert.ok(
      endMemory - startMemory < bound,
      `${gc === undefined ? 'RSS' : 'heap after GC'} grew by ${((endMemory - startMemory) / 2 ** 20).toFixed(1)} MiB`,
    );
    const metrics = server.metrics();
    assert.equal(metrics.connections, 1, 'only the well-behaved connection is left');
    assert.equal(metrics.locksHeld, 0);
  });

  it('without the token, a client can neither read, write nor lock', async () => {
    await using server = await startServer({ token: 'open sesame' });
    await using good = await client(server, { token: 'open sesame' });
    await good.createTable('fz', ['f']);
    await good.table('fz').put(new Put('row').add('f', 'q', 'secret'));
    const before = await contents(good);
    const calls: [string, unknown[]][] = [
      ['get', ['fz', [Buffer.from('row'), null, null, [], null, null, 1]]],
      [
        'put',
        ['fz', [Buffer.from('row'), null, null, [['f', Buffer.from('q'), Buffer.from('x'), null]]]],
      ],
      ['lockRow', ['fz', Buffer.from('row'), null]],
      ['tryLockRow', ['fz', Buffer.from('row')]],
      ['dropTable', ['fz']],
      ['listTables', []],
      ['status', []],
    ];
    for (const hello of [undefined, {}, { token: 'wrong' }, { token: '' }, { token: 42 }]) {
      for (const [method, args] of calls) {
        const raw = await RawClient.open(server.port);
        if (hello !== undefined) raw.send([0, 1, hello]);
        raw.send([1, 1, method, args]);
        // Nothing but a connection error (call id 0), then the close.
        await raw.whenClosed();
        const answers = raw.messages.filter((m) => !(m[0] === 2 && m[1] === 0));
        assert.deepEqual(answers, [], `${method} after ${JSON.stringify(hello)} was answered`);
        const error = raw.messages.find((m) => m[0] === 2 && m[1] === 0);
        assert.ok(
          error?.[2] === 'UNAUTHENTICATED' || error?.[2] === 'PROTOCOL_ERROR',
          `${method} after ${JSON.stringify(hello)}: ${JSON.stringify(error)}`,
        );
      }
    }
    assert.equal(await contents(good), before);
    assert.equal(server.metrics().locksHeld, 0);
    const lock = await good.table('fz').tryLockRow('row');
    assert.ok(lock !== null, 'the row is free');
    await lock.close();
  });
});
