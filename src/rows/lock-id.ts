import { randomFillSync } from 'node:crypto';

/**
 * Row lock ids: 20 characters of base64url (`[A-Za-z0-9_-]`) encoding 15 bytes, a 7-byte
 * big-endian sequence number followed by 8 bytes from `crypto`.
 *
 * - Unguessable: 64 random bits per id, so a client cannot use a lock it was not given.
 * - Never reused within the process: the sequence number is unique even where the random part
 *   collides (2^53 ids before it could wrap, centuries at any realistic rate).
 * - Cheap: the random bytes of 256 ids come from one `randomFillSync`; each id is then encoded
 *   on its own (about 60 ns), a string of its own 20 characters. A slice of one encoded batch
 *   was cheaper still, but V8 keeps a slice's whole batch string (5 KB) alive: one id held for
 *   long kept 255 others' characters, and every held lock paid about 20 B more besides.
 *
 * The sequence number tells how many ids came before; it is not a secret.
 */
const ID_BYTES = 15;
const BATCH = 256;
const TWO_48 = 2 ** 48;

const buffer = Buffer.allocUnsafe(ID_BYTES * BATCH);
let next = BATCH;
let sequence = 0;

/** What every lock id looks like (a recorded id read back is checked against it). */
export const LOCK_ID = /^[A-Za-z0-9_-]{20}$/;

/** A fresh lock id; see the module comment for its format and guarantees. */
export function newLockId(): string {
  if (next === BATCH) refill();
  const start = next * ID_BYTES;
  next++;
  return buffer.toString('base64url', start, start + ID_BYTES);
}

function refill(): void {
  randomFillSync(buffer);
  for (let i = 0; i < BATCH; i++) {
    const offset = i * ID_BYTES;
    const n = sequence++;
    buffer[offset] = Math.floor(n / TWO_48) & 0xff;
    buffer.writeUIntBE(n % TWO_48, offset + 1, 6);
  }
  next = 0;
}
