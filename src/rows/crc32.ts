import * as zlib from 'node:zlib';

/**
 * CRC-32 (IEEE 802.3, the zlib/gzip polynomial 0xEDB88320, reflected), the checksum of every
 * record and file header the row storage writes. `crc32(b, crc32(a))` equals `crc32(a ++ b)`.
 *
 * Node ≥ 20.15 has it natively in `node:zlib` (several GB/s); older Node 20 releases get the
 * table-driven version below, which produces the same values, so files move freely between
 * them. The namespace import (not a named one) keeps this module loadable where the export is
 * missing.
 */
export const crc32: (data: Uint8Array, initial?: number) => number =
  typeof zlib.crc32 === 'function' ? (data, initial = 0) => zlib.crc32(data, initial) : tableCrc32;

let table: Uint32Array | undefined;

/** The portable fallback, exported so tests can check it against zlib's. */
export function tableCrc32(data: Uint8Array, initial = 0): number {
  table ??= makeTable();
  let crc = ~initial >>> 0;
  for (let i = 0; i < data.length; i++) {
    crc = (table[(crc ^ (data[i] as number)) & 0xff] as number) ^ (crc >>> 8);
  }
  return ~crc >>> 0;
}

function makeTable(): Uint32Array {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
}
