import { InvalidArgumentError, ProtocolError } from '../core/errors.js';

/**
 * Decodes a value a server sent. The decoders are shared with the server, where a malformed
 * value is the caller's `INVALID_ARGUMENT`; here the malformed value came from the server, so
 * it is the server's `PROTOCOL_ERROR`, never the caller's mistake.
 */
export function fromServer<T>(what: string, decode: () => T): T {
  try {
    return decode();
  } catch (err) {
    if (err instanceof InvalidArgumentError || err instanceof TypeError) {
      throw new ProtocolError(`The server sent a malformed ${what}: ${err.message}`, {
        cause: err,
      });
    }
    throw err;
  }
}

/** A server's array of exactly `length` elements, or a {@link ProtocolError}. */
export function serverTuple(value: unknown, what: string, length: number): unknown[] {
  if (!Array.isArray(value) || value.length !== length) {
    throw new ProtocolError(`The server sent a malformed ${what}: expected an array of ${length}`);
  }
  return value;
}
