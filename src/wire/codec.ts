import { Packr, RESERVE_START_SPACE, Unpackr } from 'msgpackr';
import { ProtocolError } from '../core/errors.js';

/**
 * Frame payloads are plain MessagePack (https://msgpack.org): no msgpackr records or shared
 * structures, so any MessagePack library can speak the protocol. `undefined` is sent as nil.
 * 64-bit integers decode as `bigint` (increment amounts need all 64 bits); other integers
 * arrive as numbers, possibly as floats when above 2^32 (msgpackr sends large safe integers as
 * float64), which the message checks accept as long as they are safe integers.
 *
 * Chosen by measurement (docs/protocol.md): encoding a put request takes ~1.0 µs and decoding
 * it ~0.5 µs here, against ~0.5 / 0.4 µs for a hand-written layout and ~1.0 / 0.9 µs for JSON
 * with base64 values. A loopback round trip costs ~30 µs, so the hand-written layout would
 * save under 2% of a call while every other-language client would need its own parser.
 */
const packr = new Packr({ useRecords: false, encodeUndefinedAsNil: true });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'bigint' });

export function encode(value: unknown): Uint8Array {
  return packr.pack(value);
}

/**
 * A whole frame (src/wire/frame.ts): `value`'s MessagePack behind its 4-byte big-endian
 * length, encoded in place behind space msgpackr reserves, so a message costs no copy and no
 * buffer of its own (msgpackr packs one message after another into a shared block and never
 * writes over what it returned). Equal to `frame(encode(value))`.
 */
export function encodeFrame(value: unknown): Buffer {
  const out = packr.pack(value, RESERVE_START_SPACE | 4) as Buffer;
  out.writeUInt32BE(out.length - 4, 0);
  return out;
}

/** One MessagePack value filling `payload` exactly; anything else is a `PROTOCOL_ERROR`. */
export function decode(payload: Uint8Array): unknown {
  try {
    return unpackr.unpack(payload);
  } catch (err) {
    throw new ProtocolError(`Malformed MessagePack payload: ${(err as Error).message}`, {
      cause: err,
    });
  }
}
