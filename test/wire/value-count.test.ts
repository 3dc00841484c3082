/**
 * Counting a frame's MessagePack values before decoding it: the count agrees with the decoded
 * value for every MessagePack type and size class, stops past its limit, and leaves malformed
 * payloads to the decoder.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decode, encode } from '../../src/wire/codec.js';
import { checkValueCount, countValues, MAX_FRAME_VALUES } from '../../src/wire/value-count.js';

/** The number of values in a decoded value, counted the way MessagePack lays them out. */
function reference(v: unknown): number {
  if (Array.isArray(v)) return 1 + v.reduce((n: number, x) => n + reference(x), 0);
  if (v instanceof Uint8Array || v === null || typeof v !== 'object') return 1;
  return 1 + Object.entries(v).reduce((n, [k, x]) => n + reference(k) + reference(x), 0);
}

describe('value count', () => {
  it('agrees with the decoded value for every type and size class', () => {
    const samples: unknown[] = [
      0,
      127,
      -1,
      -32,
      -33,
      200,
      70_000,
      2 ** 40,
      -(2 ** 40),
      1.5,
      12345678901234567890n,
      true,
      false,
      null,
      '',
      'x'.repeat(31),
      'x'.repeat(32),
      'x'.repeat(300),
      'x'.repeat(70_000),
      Buffer.alloc(0),
      Buffer.alloc(300),
      Buffer.alloc(70_000),
      Array.from({ length: 15 }, (_, i) => i),
      Array.from({ length: 16 }, (_, i) => [i, 'a']),
      Array.from({ length: 70_000 }, (_, i) => i % 3),
      Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`k${i}`, i])),
      Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, [i, { n: i }]])),
      [1, 'put', ['t', ['r', null, null, [['f', 'q', Buffer.from('v'), null]]]]],
    ];
    for (const sample of samples) {
      const bytes = encode(sample);
      const expected = reference(decode(bytes));
      assert.equal(
        countValues(bytes, Number.MAX_SAFE_INTEGER),
        expected,
        `sample ${samples.indexOf(sample)}`,
      );
      checkValueCount(bytes, expected);
      assert.throws(() => checkValueCount(bytes, expected - 1), { code: 'PROTOCOL_ERROR' });
    }
  });

  it('counts the 32-bit map and array headers msgpackr writes only for huge values', () => {
    const header = (type: number, n: number) => {
      const b = Buffer.alloc(5);
      b[0] = type;
      b.writeUInt32BE(n, 1);
      return b;
    };
    const map = Buffer.concat([
      header(0xdf, 2),
      encode('a'),
      encode([1, 2]),
      encode('b'),
      encode(null),
    ]);
    assert.deepEqual(decode(map), { a: [1, 2], b: null });
    assert.equal(countValues(map, 100), 7);
    const array = Buffer.concat([header(0xdd, 2), encode('x'), encode({ k: 1 })]);
    assert.equal(countValues(array, 100), reference(decode(array)));
  });

  it('stops one past its limit, whatever the payload size', () => {
    const ones = Buffer.alloc(16 * 1024 * 1024, 1);
    ones[0] = 0xdd; // array 32 of 16 Mi - 5 ones
    ones.writeUInt32BE(ones.length - 5, 1);
    assert.equal(countValues(ones, 1000), 1001);
    assert.throws(() => checkValueCount(ones), {
      code: 'PROTOCOL_ERROR',
      message: new RegExp(`more than ${MAX_FRAME_VALUES} MessagePack values`),
    });
  });

  it('the largest legal batch fits: 100 000 one-cell mutations', () => {
    const muts = Array.from({ length: 100_000 }, (_, i) => [
      `r${i}`,
      null,
      null,
      [['f', 'q', Buffer.from('v'), null]],
    ]);
    checkValueCount(encode([1, 7, 'batch', ['t', muts]]));
  });

  it('leaves truncated and malformed payloads to the decoder (no throw, no read past the end)', () => {
    const whole = encode([1, 'abc', Buffer.alloc(500), 2 ** 40, { a: [1, 2] }]);
    for (let cut = 0; cut < whole.length; cut++) {
      const n = countValues(whole.subarray(0, cut), 100);
      assert.ok(n >= 0 && n <= 100);
    }
    for (const bad of [[0xc1], [0xdd, 0xff, 0xff, 0xff, 0xff], [0xdb, 0xff, 0xff, 0xff, 0xff, 1]]) {
      assert.ok(countValues(Uint8Array.from(bad), 100) <= 2);
    }
  });
});
