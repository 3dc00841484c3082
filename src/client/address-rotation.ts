import type { ServerAddress } from './server-address.js';

/**
 * Which server a client tries next, how long one attempt's handshake may take, how long to
 * wait before the next round, and why each address failed. The connection tells it what
 * happened (an attempt ended, a server named the master, a session was welcomed); it never
 * touches a socket or a timer.
 *
 * - Order: where a `NOT_MASTER` refusal pointed, else the server of a connection that just
 *   dropped (its session lives there), else the next address of the list. After a WELCOME the
 *   list resumes after that server, so when it is lost the others are tried first.
 * - Rounds: a round of the list goes without waiting (a refusal naming the master may lengthen
 *   it to two rounds, no more, so two servers naming each other cannot spin); then a backoff
 *   from `reconnectMinMs`, doubling up to `reconnectMaxMs`, with jitter. A round in which a
 *   server answered `NOT_MASTER` waits at most {@link FAILOVER_POLL_FACTOR} × `reconnectMinMs`:
 *   the servers are up and one is about to become master (a failover), and a doubled wait
 *   would add up to a second to the client's failover after the new master serves.
 * - Handshake bound ({@link handshakeTimeoutMs}): short enough that the last address of the
 *   list is reached within `connectTimeoutMs` even when every other one is wedged; it doubles,
 *   up to `connectTimeoutMs`, after each round in which every attempt ran out of it (slow
 *   servers rather than wedged ones), and a round in which any server answered sets it back.
 * - An address whose TLS certificate is not trusted is remembered: no retry makes it trusted.
 */
/** A round with a `NOT_MASTER` answer waits at most this many `reconnectMinMs` (see above). */
export const FAILOVER_POLL_FACTOR = 4;

export class AddressRotation {
  readonly #addresses: readonly ServerAddress[];
  readonly #connectTimeoutMs: number;
  readonly #reconnectMinMs: number;
  readonly #reconnectMaxMs: number;
  /** Why each address tried since the last WELCOME failed (`host:port` → message), in order. */
  readonly #failures = new Map<string, string>();
  /** Addresses whose certificate this client does not trust. */
  readonly #untrusted = new Set<string>();
  /** The address of the current (or last) attempt. */
  #current: ServerAddress;
  /** Index in the list of the address to try next (unless a redirect or a retry comes first). */
  #cursor = 0;
  #redirect: ServerAddress | undefined;
  #retryCurrent = false;
  /** Attempts since the last WELCOME or backoff, and how many ran out of their bound. */
  #roundAttempts = 0;
  #roundTimeouts = 0;
  /** `NOT_MASTER` answers in this round. */
  #roundRefusals = 0;
  /** Rounds in a row in which every attempt ran out of its bound: each doubles the bound. */
  #slowRounds = 0;
  /** Backoffs since the last WELCOME. */
  #backoffs = 0;

  constructor(options: {
    addresses: readonly ServerAddress[];
    connectTimeoutMs: number;
    reconnectMinMs: number;
    reconnectMaxMs: number;
  }) {
    const first = options.addresses[0];
    if (first === undefined) throw new TypeError('AddressRotation: no server address');
    this.#addresses = options.addresses;
    this.#connectTimeoutMs = options.connectTimeoutMs;
    this.#reconnectMinMs = options.reconnectMinMs;
    this.#reconnectMaxMs = options.reconnectMaxMs;
    this.#current = first;
  }

  /** The address of the current (or last) attempt. */
  get current(): ServerAddress {
    return this.#current;
  }

  /** The bound on the next attempt's handshake, ms. */
  get handshakeTimeoutMs(): number {
    return Math.min(
      this.#connectTimeoutMs,
      handshakeTimeoutMs(this.#connectTimeoutMs, this.#addresses.length) *
        2 ** Math.min(this.#slowRounds, 20),
    );
  }

  /** Chooses (and makes current) the address of the next attempt. */
  next(): ServerAddress {
    const redirect = this.#redirect;
    this.#redirect = undefined;
    if (redirect !== undefined) {
      this.#retryCurrent = false;
      this.#current = redirect;
    } else if (this.#retryCurrent) {
      this.#retryCurrent = false;
    } else {
      this.#current = this.#addresses[this.#cursor % this.#addresses.length] as ServerAddress;
      this.#cursor = (this.#cursor + 1) % this.#addresses.length;
    }
    return this.#current;
  }

  /** A `NOT_MASTER` named where the master is (`undefined`: it named no usable address). */
  redirectTo(master: ServerAddress | undefined): void {
    this.#redirect = master;
    this.#roundRefusals++;
  }

  /** A connection that was up dropped (not for silence): its server is tried again first. */
  retryCurrent(): void {
    this.#retryCurrent = true;
  }

  /** An attempt failed before its WELCOME, for `why`. */
  failed(label: string, why: string): void {
    this.#failures.set(label, why);
  }

  /** `label`'s certificate is not trusted; true once no address of the list is left. */
  untrusted(label: string): boolean {
    this.#untrusted.add(label);
    return this.#addresses.every((a) => this.#untrusted.has(a.label));
  }

  /**
   * An attempt ended (`timedOut`: it ran out of its handshake bound): how long to wait before
   * the next one, ms (0 within a round).
   */
  afterAttempt(timedOut: boolean): number {
    this.#roundAttempts++;
    if (timedOut) this.#roundTimeouts++;
    const n = this.#addresses.length;
    if (this.#roundAttempts < n || (this.#redirect !== undefined && this.#roundAttempts < 2 * n)) {
      return 0;
    }
    this.#slowRounds = this.#roundTimeouts === this.#roundAttempts ? this.#slowRounds + 1 : 0;
    const refused = this.#roundRefusals > 0;
    this.#roundAttempts = 0;
    this.#roundTimeouts = 0;
    this.#roundRefusals = 0;
    const base = Math.min(
      this.#reconnectMaxMs,
      this.#reconnectMinMs * 2 ** Math.min(this.#backoffs, 20),
      refused ? FAILOVER_POLL_FACTOR * this.#reconnectMinMs : Number.POSITIVE_INFINITY,
    );
    this.#backoffs++;
    return base / 2 + Math.random() * (base / 2);
  }

  /** `label` welcomed the client: every count starts again, and the list resumes after it. */
  welcomed(label: string): void {
    this.#untrusted.clear();
    this.#backoffs = 0;
    this.#roundAttempts = 0;
    this.#roundTimeouts = 0;
    this.#roundRefusals = 0;
    this.#slowRounds = 0;
    this.#failures.clear();
    const at = this.#addresses.findIndex((a) => a.label === label);
    if (at >= 0) this.#cursor = (at + 1) % this.#addresses.length;
  }

  /**
   * Why `connect()` gave up: every address of the list (and any a refusal pointed to), each
   * with why it failed, the attempt still under way (`underway`), or that the time ran out
   * before it.
   */
  gaveUpMessage(underway: string | undefined): string {
    const addresses = this.#addresses;
    const reasons = new Map<string, string>();
    for (const a of addresses) reasons.set(a.label, 'not tried: the time ran out first');
    for (const [label, why] of this.#failures) reasons.set(label, why);
    if (underway !== undefined)
      reasons.set(this.#current.label, `${underway} (the attempt under way)`);
    const [only, ...others] = reasons;
    const within = `within ${this.#connectTimeoutMs} ms`;
    if (addresses.length === 1 && only !== undefined && others.length === 0) {
      return `Could not connect to ${only[0]} ${within}: ${only[1]}`;
    }
    const list = [...reasons].map(([label, why]) => `${label}: ${why}`).join('; ');
    return `Could not connect to a master among ${addresses.map((a) => a.label).join(', ')} ${within}: ${list}`;
  }
}

/**
 * The bound on one handshake (TCP, TLS, HELLO → WELCOME) for a `connectTimeoutMs` and a list of
 * `addresses`: a quarter of `connectTimeoutMs`, or `connectTimeoutMs / (addresses + 1)` for a
 * list of four or more, so that the whole list fits in `connectTimeoutMs` with one bound to
 * spare for the server that answers. {@link AddressRotation.handshakeTimeoutMs} lengthens it
 * for rounds in which no server answered at all.
 */
export function handshakeTimeoutMs(connectTimeoutMs: number, addresses: number): number {
  return Math.max(1, Math.floor(connectTimeoutMs / Math.max(4, addresses + 1)));
}
