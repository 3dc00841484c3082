import type { Socket } from 'node:net';
import { LimitExceededError } from '../core/errors.js';

/** How many sockets the server keeps open, in all and from one remote address. */
export interface AdmissionLimits {
  maxConnections: number;
  maxConnectionsPerAddress: number;
}

/**
 * Every socket the server holds, counted from the moment the kernel hands it over (before a
 * TLS handshake, before HELLO): a socket is memory whatever it has said, so a bound counted
 * later (per session, per welcomed connection) would leave idle or half-open sockets free to
 * pile up. A socket over a bound is refused at once; one that closes gives its place back.
 * At shutdown every socket is destroyed, so no peer (a TLS handshake never finished, a client
 * that never reads) can hold the server open.
 */
export class Admission {
  readonly #limits: AdmissionLimits;
  readonly #sockets = new Set<Socket>();
  readonly #perAddress = new Map<string, number>();

  constructor(limits: AdmissionLimits) {
    this.#limits = limits;
  }

  get size(): number {
    return this.#sockets.size;
  }

  /** Counts `socket` in, or says which bound it would break (the socket is then not counted). */
  admit(socket: Socket): LimitExceededError | undefined {
    const address = socket.remoteAddress ?? '?';
    const fromAddress = this.#perAddress.get(address) ?? 0;
    if (this.#sockets.size >= this.#limits.maxConnections) {
      return new LimitExceededError(
        `The server has ${this.#sockets.size} connections open; the limit is ${this.#limits.maxConnections}`,
      );
    }
    if (fromAddress >= this.#limits.maxConnectionsPerAddress) {
      return new LimitExceededError(
        `${address} has ${fromAddress} connections open to this server; the limit is ${this.#limits.maxConnectionsPerAddress}`,
      );
    }
    this.#sockets.add(socket);
    this.#perAddress.set(address, fromAddress + 1);
    socket.once('close', () => {
      if (!this.#sockets.delete(socket)) return;
      const left = (this.#perAddress.get(address) ?? 1) - 1;
      if (left === 0) this.#perAddress.delete(address);
      else this.#perAddress.set(address, left);
    });
    return undefined;
  }

  /** Destroys every socket (shutdown: nothing a peer does may keep the server open). */
  destroyAll(): void {
    for (const socket of [...this.#sockets]) socket.destroy();
  }
}
