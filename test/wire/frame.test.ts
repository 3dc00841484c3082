import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ProtocolError } from '../../src/core/errors.js';
import { FrameReader, frame } from '../../src/wire/frame.js';

/** A deterministic generator (xorshift), so a failure can be replayed. */
function random(seed: number): () => number {
  let x = seed;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 0x1_0000_0000;
  };
}

describe('FrameReader', () => {
  test('gives back every payload whole and in order, however the stream is cut', () => {
    for (let seed = 1; seed <= 200; seed++) {
      const rnd = random(seed);
      const payloads = Array.from({ length: 1 + Math.floor(rnd() * 20) }, (_, i) =>
        Buffer.alloc(1 + Math.floor(rnd() * (rnd() < 0.2 ? 3000 : 12)), i + 1),
      );
      const stream = Buffer.concat(payloads.map((p) => frame(p)));
      const reader = new FrameReader();
      const got: Buffer[] = [];
      for (let at = 0; at < stream.length; ) {
        // Cuts of 0 to 9 bytes split headers too; a few long ones hold many frames.
        const size = rnd() < 0.1 ? Math.floor(rnd() * 5000) : Math.floor(rnd() * 10);
        const chunk = stream.subarray(at, Math.min(stream.length, at + size));
        at += chunk.length;
        // Copies received payloads at once: a view is valid only until the caller lets it go.
        for (const p of reader.push(chunk)) got.push(Buffer.from(p));
      }
      assert.deepEqual(got, payloads, `seed ${seed}`);
      assert.equal(reader.buffered, 0, `seed ${seed}`);
    }
  });

  test('an empty or oversized frame is a protocol error from its header alone', () => {
    const empty = new FrameReader();
    assert.deepEqual(empty.push(frame(Buffer.from([1]))), [Buffer.from([1])]);
    assert.throws(() => empty.push(Buffer.from([0, 0, 0, 0])), ProtocolError);
    assert.throws(() => empty.push(Buffer.from([1])), ProtocolError, 'unusable after a failure');
    const big = new FrameReader(10);
    assert.deepEqual(big.push(Buffer.from([0, 0])), []);
    assert.throws(() => big.push(Buffer.from([0, 11])), /11 bytes; the limit is 10/);
  });
});
