import { ProtocolError } from '../core/errors.js';

/**
 * The most MessagePack values (arrays, maps, strings, numbers, ... each counts one, nested ones
 * included) one client frame may hold. The largest legal call holds about 1 million: a `batch`
 * or `mutateRows` of `MAX_CELLS_PER_CALL` (100 000) one-cell mutations is 10 values each. A
 * frame of the same byte size can hold 16 million tiny values, which take seconds to decode on
 * the event loop before any check could refuse them: counting first keeps every frame's
 * decoding near 0.15 s at most.
 */
export const MAX_FRAME_VALUES = 1_250_000;

/**
 * Refuses a payload that holds more than `limit` MessagePack values, with a `PROTOCOL_ERROR`,
 * reading only the type bytes and lengths: its cost is at most `limit` steps, whatever the
 * payload's size. A payload that is not well-formed MessagePack is left to the decoder, which
 * says what is wrong with it.
 */
export function checkValueCount(payload: Uint8Array, limit = MAX_FRAME_VALUES): void {
  if (countValues(payload, limit) > limit) {
    throw new ProtocolError(
      `A frame of more than ${limit} MessagePack values: no call needs so many (one call writes at most 100000 cells)`,
    );
  }
}

/**
 * How many MessagePack values `payload` holds, counting at most `limit + 1` (then it stops);
 * for a truncated or malformed payload, those read before the fault.
 */
export function countValues(payload: Uint8Array, limit: number): number {
  const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  const end = payload.byteLength;
  let pos = 0;
  let count = 0;
  let expected = 1;
  while (expected > 0 && pos < end) {
    expected--;
    if (++count > limit) return count;
    const b = payload[pos++] as number;
    if (b <= 0x7f || b >= 0xe0 || b === 0xc0 || b === 0xc2 || b === 0xc3) continue;
    if (b <= 0x8f) expected += 2 * (b & 0x0f);
    else if (b <= 0x9f) expected += b & 0x0f;
    else if (b <= 0xbf) pos += b & 0x1f;
    else if (pos + 4 > end && b !== 0xc4 && b !== 0xc7 && b !== 0xcc && b !== 0xd0 && b !== 0xd9) {
      return count; // truncated: the decoder reports it
    } else {
      switch (b) {
        case 0xc4: // bin 8
        case 0xd9: // str 8
          pos += 1 + (payload[pos] ?? 0);
          break;
        case 0xc5: // bin 16
        case 0xda: // str 16
          pos += 2 + view.getUint16(pos);
          break;
        case 0xc6: // bin 32
        case 0xdb: // str 32
          pos += 4 + view.getUint32(pos);
          break;
        case 0xc7: // ext 8
          pos += 2 + (payload[pos] ?? 0);
          break;
        case 0xc8: // ext 16
          pos += 3 + view.getUint16(pos);
          break;
        case 0xc9: // ext 32
          pos += 5 + view.getUint32(pos);
          break;
        case 0xcc: // uint 8
        case 0xd0: // int 8
          pos += 1;
          break;
        case 0xcd:
        case 0xd1:
          pos += 2;
          break;
        case 0xca:
        case 0xce:
        case 0xd2:
          pos += 4;
          break;
        case 0xcb:
        case 0xcf:
        case 0xd3:
          pos += 8;
          break;
        case 0xd4: // fixext 1, 2, 4, 8, 16: a type byte, then the data
          pos += 2;
          break;
        case 0xd5:
          pos += 3;
          break;
        case 0xd6:
          pos += 5;
          break;
        case 0xd7:
          pos += 9;
          break;
        case 0xd8:
          pos += 17;
          break;
        case 0xdc: // array 16, 32
          expected += view.getUint16(pos);
          pos += 2;
          break;
        case 0xdd:
          expected += view.getUint32(pos);
          pos += 4;
          break;
        case 0xde: // map 16, 32
          expected += 2 * view.getUint16(pos);
          pos += 2;
          break;
        case 0xdf:
          expected += 2 * view.getUint32(pos);
          pos += 4;
          break;
        default:
          return count; // 0xc1 (never used): the decoder reports it
      }
    }
  }
  return count;
}
