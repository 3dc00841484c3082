import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ProtocolError } from '../../src/core/errors.js';
import { decode, encode, encodeFrame } from '../../src/wire/codec.js';
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

describe('encodeFrame', () => {
  test('is frame(encode(value)), and a frame stays intact while later ones are encoded', () => {
    const rnd = random(7);
    const values = Array.from({ length: 5000 }, (_, i) => [
      1,
      i,
      'put',
      ['t', Buffer.alloc(Math.floor(rnd() * (rnd() < 0.01 ? 20_000 : 200)), i & 0xff), null],
    ]);
    // Held frames, as a socket holds what it has not sent yet: msgpackr packs into shared
    // blocks, so a later message must never land on an earlier one.
    const held = values.map((v) => encodeFrame(v));
    for (const [i, v] of values.entries()) {
      const got = held[i] as Buffer;
      assert.deepEqual(got, frame(encode(v)), `message ${i}`);
      assert.deepEqual(decode(new FrameReader(1 << 20).push(got)[0] as Buffer), v);
    }
  });
});
