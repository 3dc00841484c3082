import { randomFillSync } from 'node:crypto';

/**
 * Row lock ids: 20 characters of base64url (`[A-Za-z0-9_-]`) encoding 15 bytes, a 7-byte
 * big-endian sequence number followed by 8 bytes from `crypto`.
 *
 * - Unguessable: 64 random bits per id, so a client cannot use a lock it was not given.
 * - Never reused within the process: the sequence number is unique even where the random part
 *   collides (2^53 ids before it could wrap, centuries at any realistic rate).
 * - Cheap: ids are made 256 at a time, with one `randomFillSync` and one base64 encoding; each
 *   id is then a slice of the batch string (V8 shares the batch's characters).
 *
 * The sequence number tells how many ids came before; it is not a secret.
 */
const ID_BYTES = 15;
const ID_CHARS = 20;
const BATCH = 256;
const TWO_48 = 2 ** 48;

const buffer = Buffer.allocUnsafe(ID_BYTES * BATCH);
let batch = '';
let next = BATCH;
let sequence = 0;

/** What every lock id looks like (a recorded id read back is checked against it). */
export const LOCK_ID = /^[A-Za-z0-9_-]{20}$/;

/** A fresh lock id; see the module comment for its format and guarantees. */
export function newLockId(): string {
  if (next === BATCH) refill();
  const start = next * ID_CHARS;
  next++;
  return batch.slice(start, start + ID_CHARS);
}

function refill(): void {
  randomFillSync(buffer);
  for (let i = 0; i < BATCH; i++) {
    const offset = i * ID_BYTES;
    const n = sequence++;
    buffer[offset] = Math.floor(n / TWO_48) & 0xff;
    buffer.writeUIntBE(n % TWO_48, offset + 1, 6);
  }
  batch = buffer.toString('base64url');
  next = 0;
}
