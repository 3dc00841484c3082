import { InvalidArgumentError } from '../core/errors.js';

/**
 * Row keys are byte strings. locksmith carries them as latin1 ("binary") JavaScript strings:
 * one character per byte, code units 0..255. Such strings are cheap Map keys, and their
 * default `<` / `sort()` order is HBase's unsigned byte order (`Bytes.compareTo`).
 */

// Bytes.toStringBinary's set of characters printed as they are: letters, digits and this
// punctuation. Everything else, backslash included, becomes \xNN (upper-case hex).
const PRINTABLE = (() => {
  const table = new Uint8Array(256);
  const punctuation = ' `~!@#$%^&*()-_=+[]{}|;:\'",.<>/?';
  for (let c = 0; c < 256; c++) {
    const ch = String.fromCharCode(c);
    if (
      (ch >= '0' && ch <= '9') ||
      (ch >= 'A' && ch <= 'Z') ||
      (ch >= 'a' && ch <= 'z') ||
      punctuation.includes(ch)
    ) {
      table[c] = 1;
    }
  }
  return table;
})();

const HEX = '0123456789ABCDEF';

/**
 * Renders a row key (a latin1 string) for humans, like HBase's `Bytes.toStringBinary`:
 * letters, digits and common punctuation as they are, every other byte as `\xNN`. A code unit
 * above 255 (not a valid row key) is rendered as `\u{N}` rather than hidden.
 */
export function toStringBinary(row: string): string {
  let plain = true;
  for (let i = 0; i < row.length; i++) {
    if (PRINTABLE[row.charCodeAt(i)] !== 1) {
      plain = false;
      break;
    }
  }
  if (plain) return row;
  let out = '';
  for (let i = 0; i < row.length; i++) {
    const c = row.charCodeAt(i);
    if (c > 0xff) out += `\\u{${c.toString(16).toUpperCase()}}`;
    else if (PRINTABLE[c] === 1) out += row[i];
    else out += `\\x${HEX[c >> 4]}${HEX[c & 15]}`;
  }
  return out;
}

// Strings made only of code units 0..127 are their own UTF-8 encoding and their own latin1
// decoding, so most keys need no copy.
const NON_ASCII = /[\u0080-\uffff]/;

/**
 * Turns a user's row key into the latin1 string form: a string is encoded as UTF-8 first (so
 * "é" becomes the two bytes C3 A9, as `Bytes.toBytes(String)` does), a `Uint8Array` (or
 * `Buffer`) is taken byte for byte. Does not check the length; `checkRowKey` does.
 */
export function rowKey(input: string | Uint8Array): string {
  if (typeof input === 'string') {
    return !NON_ASCII.test(input) ? input : Buffer.from(input, 'utf8').toString('latin1');
  }
  if (input instanceof Uint8Array) {
    return Buffer.from(input.buffer, input.byteOffset, input.byteLength).toString('latin1');
  }
  throw new InvalidArgumentError(
    `Invalid row key: expected a string or a Uint8Array, got ${typeof input}`,
  );
}
