import { readFileSync } from 'node:fs';
import type { Etcd3, IOptions, IRangeRequest, IResponseHeader } from 'etcd3';
import type { Clock } from '../core/clock.js';
import {
  InvalidArgumentError,
  LockIOError,
  type LockLossCode,
  LockLostError,
  LockObtainFailedError,
} from '../core/errors.js';
import {
  customOption,
  durationOption,
  positiveDurationOption,
  readOptions,
  type SpecOf,
  stringOption,
  withAliases,
  withDefault,
} from '../core/option-spec.js';
import { describeValue } from '../core/options.js';
import { abortableSleep } from '../core/wait.js';
import { ABSTRACT_LOCKER_SPEC, AbstractLocker, type AcquireContext } from './abstract-locker.js';
import { describe } from './describe-error.js';
import { defaultLeaseHolderId } from './lease-database-locker.js';
import { MAX_RENEW_FRACTION, MIN_LEASE_MS } from './lease-rules.js';
import type { LockerOptions } from './locker.js';
import type { StoreLogger } from './logger.js';
import { watchSelfFencing } from './self-fencing-watch.js';

/** The etcd lease (session TTL) by default, ms: 10 s, etcd's election recipes' order of size. */
export const DEFAULT_ETCD_LEASE_MS = 10_000;

/** TLS material for the etcd endpoints: file paths or the PEM bytes. */
export interface EtcdTlsOptions {
  /** The CA certificate(s) that signed the etcd members' certificates. */
  ca: string | Buffer;
  /** Client certificate (mutual TLS); needs `key`. */
  cert?: string | Buffer | undefined;
  /** Client private key (mutual TLS); needs `cert`. */
  key?: string | Buffer | undefined;
}

export interface EtcdLockerOptions extends Omit<LockerOptions, 'acquireIntervalMs'> {
  /**
   * The etcd members' client URLs, `http://host:port` (or `https://` with `tls`); give every
   * member so that a dead one is skipped.
   */
  endpoints: readonly string[];
  /**
   * The election's name: candidates' keys are `<electionName>/<lease id in hex>`, as in Go's
   * `concurrency.NewElection(session, electionName)` and `etcdctl elect <electionName>`.
   */
  electionName: string;
  /**
   * The session lease (TTL), ms: a whole number of seconds, at least 1 s (etcd TTLs are
   * seconds; etcd may grant more than asked, never less). Default 10 s.
   */
  leaseMs?: number | undefined;
  /**
   * The proposal: the value of this candidate's key, what `etcdctl elect -l` shows as the
   * leader. Default `<hostname>:<pid>:<8 random hex digits>`. Alias `proposal`.
   */
  holderId?: string | undefined;
  /**
   * Self-fencing: mastership ends (`lost`) `lease − margin` after the last confirmed lease
   * grant or keep-alive was SENT, on the local monotonic clock, whatever the connection does.
   * The margin is the budget to stop the work and absorb clock-rate drift between this host
   * and the etcd leader. Default lease / 4; > 0 and < the lease.
   */
  selfFencingMarginMs?: number | undefined;
  /** An event-loop stall longer than this ends mastership like a missed keep-alive (default: the margin). */
  maxEventLoopLagMs?: number | undefined;
  /** Limit per etcd request, ms (default: the lease). */
  requestTimeoutMs?: number | undefined;
  /** etcd user authentication. */
  auth?: { username: string; password: string } | undefined;
  /** TLS to the endpoints (their URLs then use `https://`). */
  tls?: EtcdTlsOptions | undefined;
  /** Default the system clock. */
  clock?: Clock | undefined;
  /** Default silent. */
  logger?: StoreLogger | undefined;
}

export function checkEndpoints(value: unknown, label: string): readonly string[] {
  const bad = (why: string) =>
    new InvalidArgumentError(`${label} ${why}, got ${describeValue(value)}`);
  if (!Array.isArray(value) || value.length === 0) {
    throw bad('must be a non-empty array of URLs (http://host:port)');
  }
  const out: string[] = [];
  for (const item of value) {
    if (typeof item !== 'string') throw bad('must hold only strings (http://host:port)');
    let url: URL;
    try {
      url = new URL(item);
    } catch {
      throw new InvalidArgumentError(
        `${label}: ${JSON.stringify(item)} is not a URL (http://host:port)`,
      );
    }
    if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
      throw new InvalidArgumentError(
        `${label}: ${JSON.stringify(item)} must be http://host:port or https://host:port`,
      );
    }
    if (url.pathname !== '/' || url.search !== '' || url.hash !== '' || url.username !== '') {
      throw new InvalidArgumentError(
        `${label}: ${JSON.stringify(item)} must be only a scheme, host and port (credentials go in auth)`,
      );
    }
    out.push(`${url.protocol}//${url.host}`);
  }
  return out;
}

export function checkAuth(value: unknown, label: string): { username: string; password: string } {
  const v = value as { username?: unknown; password?: unknown } | null;
  if (
    typeof v !== 'object' ||
    v === null ||
    Object.keys(v).some((k) => k !== 'username' && k !== 'password') ||
    typeof v.username !== 'string' ||
    v.username === '' ||
    typeof v.password !== 'string'
  ) {
    throw new InvalidArgumentError(
      `${label} must be { username: a non-empty string, password: a string }, got ${describeValue(value)}`,
    );
  }
  return { username: v.username, password: v.password };
}

/** The TLS material, files read now: a missing file is an option error, not a later outage. */
export function checkTls(
  value: unknown,
  label: string,
): { rootCertificate: Buffer; privateKey?: Buffer; certChain?: Buffer } {
  const v = value as Record<string, unknown> | null;
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new InvalidArgumentError(
      `${label} must be { ca, cert?, key? } (file paths or Buffers), got ${describeValue(value)}`,
    );
  }
  for (const k of Object.keys(v)) {
    if (k !== 'ca' && k !== 'cert' && k !== 'key') {
      throw new InvalidArgumentError(
        `${label}: unknown option ${JSON.stringify(k)} (known: ca, cert, key)`,
      );
    }
  }
  const read = (name: string, given: unknown): Buffer | undefined => {
    if (given === undefined) return undefined;
    if (Buffer.isBuffer(given)) return given;
    if (typeof given !== 'string' || given === '') {
      throw new InvalidArgumentError(
        `${label}.${name} must be a file path or a Buffer, got ${describeValue(given)}`,
      );
    }
    try {
      return readFileSync(given);
    } catch (err) {
      throw new InvalidArgumentError(`${label}.${name}: cannot read ${given}: ${describe(err)}`, {
        cause: err,
      });
    }
  };
  const ca = read('ca', v.ca);
  if (ca === undefined) throw new InvalidArgumentError(`${label}.ca is required`);
  const cert = read('cert', v.cert);
  const key = read('key', v.key);
  if ((cert === undefined) !== (key === undefined)) {
    throw new InvalidArgumentError(`${label}: cert and key go together (mutual TLS)`);
  }
  return {
    rootCertificate: ca,
    ...(key === undefined ? {} : { privateKey: key }),
    ...(cert === undefined ? {} : { certChain: cert }),
  };
}

const { acquireIntervalMs: _interval, ...COMMON } = ABSTRACT_LOCKER_SPEC;

export const ETCD_LOCKER_SPEC = {
  ...COMMON,
  endpoints: customOption('a non-empty array of http://host:port URLs', checkEndpoints),
  electionName: stringOption(),
  leaseMs: withDefault(
    {
      domain: 'a whole number of seconds in ms, >= 1000',
      check(value: unknown, label: string) {
        const ms = durationOption(MIN_LEASE_MS).check(value, label);
        if (ms % 1000 !== 0) {
          throw new InvalidArgumentError(
            `Invalid ${label} ${ms}: must be a whole number of seconds (etcd lease TTLs are seconds), e.g. ${Math.ceil(ms / 1000) * 1000}`,
          );
        }
        return ms;
      },
    },
    DEFAULT_ETCD_LEASE_MS,
  ),
  holderId: withAliases(
    { ...stringOption(250), defaultText: '<hostname>:<pid>:<8 random hex digits>' },
    'proposal',
  ),
  selfFencingMarginMs: { ...positiveDurationOption(), defaultText: 'leaseMs / 4' },
  maxEventLoopLagMs: { ...positiveDurationOption(), defaultText: 'selfFencingMarginMs' },
  requestTimeoutMs: { ...positiveDurationOption(), defaultText: 'leaseMs' },
  auth: customOption('{ username, password }', checkAuth),
  tls: customOption('{ ca, cert?, key? }: file paths or Buffers', checkTls),
} as const satisfies SpecOf<EtcdLockerOptions>;

/** The range end that makes `prefix` a prefix query (etcd's GetPrefixRangeEnd). */
export function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if ((end[i] as number) < 0xff) {
      end[i] = (end[i] as number) + 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}

/**
 * Runs `use` on the gRPC stream that `opening` resolves to, until `use` settles or `stop`
 * rejects (a timeout, an abort), even while the stream is still opening. The stream is
 * cancelled on every way out, and its errors after the outcome (the cancel's among them) are
 * heard and dropped: etcd3 would otherwise keep it, and its reconnect timers, alive.
 */
async function onStream<
  S extends { on(event: 'error', f: () => void): unknown; cancel(): void },
  T,
>(opening: Promise<S>, stop: Promise<never>, use: (stream: S) => Promise<T>): Promise<T> {
  try {
    const stream = await Promise.race([opening, stop]);
    stream.on('error', () => {});
    try {
      return await Promise.race([stop, use(stream)]);
    } finally {
      try {
        stream.cancel();
      } catch {
        // Ended already.
      }
    }
  } catch (err) {
    void opening.then((s) => s.cancel()).catch(() => {});
    throw err;
  }
}

/**
 * One LeaseKeepAlive of lease `leaseId` on a stream of its own, answered within `ms` or
 * rejected: the TTL etcd gave (0 or less: the lease is gone) and the answer's header.
 */
export async function keepAliveAttempt(
  client: Etcd3,
  leaseId: string,
  ms: number,
): Promise<{ ttl: number; header: IResponseHeader }> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new LockIOError(`keep-alive unanswered for ${Math.round(ms)} ms`)),
      Math.max(1, ms),
    );
  });
  timeout.catch(() => {});
  try {
    return await onStream(
      client.leaseClient.leaseKeepAlive({ deadline: Date.now() + ms }),
      timeout,
      (stream) =>
        new Promise<{ ttl: number; header: IResponseHeader }>((resolve, reject) => {
          stream.on('data', (res) => resolve({ ttl: Number(res.TTL), header: res.header }));
          stream.on('error', reject);
          stream.write({ ID: leaseId });
        }),
    );
  } finally {
    clearTimeout(timer);
  }
}

/** One candidacy: a lease (the session) and our key under the election prefix. */
interface Candidate {
  readonly client: Etcd3;
  readonly leaseId: string;
  /** The TTL etcd granted, s. */
  ttl: number;
  key: Buffer;
  /** Our key's create revision (the fencing token once leader); 0 before the put. */
  rev: number;
  /** Monotonic ms: `lease − margin` after the last confirmed grant/keep-alive was sent. */
  deadline: number;
  /** Set when etcd said the lease is gone (or our key), or the deadline passed. */
  lost: boolean;
  /** Ends the candidate's background work (campaign keep-alives, watchdog, key watch). */
  readonly stop: AbortController;
  readonly lostPromise: Promise<false>;
  resolveLost(): void;
}

/**
 * etcd's answers that waiting will not change: the user lacks the rights to the election's
 * keys, no credentials were given to an etcd that wants them, or they are wrong (etcd3 maps
 * some of these to error classes, not "user name is empty"). On the first start they are a
 * misconfiguration reported at once; later (rights revoked under a running server) the
 * campaign is retried, with a warning each time.
 */
const REFUSAL =
  /etcdserver: (permission denied|user name is empty|authentication failed|role is not granted)/;

type Etcd3Module = typeof import('etcd3');
let etcd3Module: Promise<Etcd3Module> | undefined;

/** `etcd3` (and gRPC) loaded on first use only. */
export function loadEtcd3(): Promise<Etcd3Module> {
  etcd3Module ??= import('etcd3').catch((err: unknown) => {
    etcd3Module = undefined;
    throw new LockIOError(`The etcd locker needs the etcd3 package: ${describe(err)}`, {
      cause: err,
    });
  });
  return etcd3Module;
}

/**
 * A store locker on etcd's own election recipe (Go's `concurrency.Election`, `etcdctl elect`),
 * so etcd's tools and other services see the same leader:
 *
 * - Session: an etcd lease of `leaseMs` (whole seconds). Candidacy: the key
 *   `<electionName>/<lease id in hex>`, value the {@link EtcdLocker.holderId} (the proposal),
 *   put with that lease in a transaction "if its create revision is 0 then put else get".
 * - Leader: the key with the lowest create revision under `<electionName>/`. A candidate that
 *   is not waits, without polling, for the deletion of the key created just before its own
 *   (by create revision), then looks again. Its lease is kept alive meanwhile (every TTL / 3);
 *   if etcd lets it expire anyway, the candidacy starts over with a new lease.
 * - Fencing token: our key's create revision, etcd's cluster-wide revision counter: strictly
 *   increasing across takeovers.
 * - Self-fencing: {@link validUntil} = the time the last confirmed grant or keep-alive was
 *   SENT + the TTL etcd answered − {@link selfFencingMarginMs}. etcd's leader expires the
 *   lease at the earliest TTL after it RECEIVED that request (a leader change only extends
 *   it), so no other candidate can become leader before `validUntil`, whatever the network
 *   does. A timer fires `lost` when it passes unconfirmed (stalled stream, partition, dead
 *   members, a SIGSTOP), as does an event-loop stall over `maxEventLoopLagMs`.
 * - `keepAlive()` (the supervisor's renewal; nothing renews in the background once master):
 *   one LeaseKeepAlive, then a linearizable read of the leader key. False (and `lost`) when
 *   etcd answers that the lease is gone (TTL ≤ 0), or our key is gone or no longer the lowest.
 *   `validUntil` moves forward only when the keep-alive said TTL > 0 and the read was served in
 *   the same raft term as the keep-alive (etcd 3.4 can renew on a deposed leader that has not
 *   noticed yet; the same term proves the renewal reached the real leader's lessor). An error
 *   (no member reachable in time) rejects: ownership unknown.
 * - While master, a watch on our own key reports its deletion (`etcdctl del`, a revoked
 *   lease) as `lost` at once.
 * - `failIfLocked`: rejects with a {@link LockObtainFailedError} naming the leader, leaving no
 *   key or lease behind. An aborted `start()` deletes its key and revokes its lease too.
 * - `stop()`: resigns (deletes our key if it is still ours) and revokes the lease, each bounded
 *   by `requestTimeoutMs`; never hangs; a failure leaves the lease to expire by itself.
 * - The first `start()` fails fast with a {@link LockIOError} when no endpoint answers the
 *   lease grant; later (once it has worked) errors while campaigning are logged and retried.
 *
 * Failure windows: after `kill -9` of the master, the others take over once etcd expires its
 * lease: at most one TTL after its last keep-alive (plus etcd's expiry check, up to 0.5 s,
 * and a watch event). After a `stop()`, at once (one watch event).
 */
export class EtcdLocker extends AbstractLocker {
  readonly endpoints: readonly string[];
  readonly electionName: string;
  readonly leaseMs: number;
  readonly holderId: string;
  readonly selfFencingMarginMs: number;
  readonly maxEventLoopLagMs: number;
  readonly requestTimeoutMs: number;
  readonly defaultKeepAlivePeriodMs: number;
  readonly #clientOptions: IOptions;
  #candidate: Candidate | undefined;
  #everStarted = false;

  constructor(options: EtcdLockerOptions) {
    const o = readOptions(options, 'EtcdLocker options', ETCD_LOCKER_SPEC);
    if (o.endpoints === undefined) {
      throw new InvalidArgumentError(
        'EtcdLocker options: endpoints is required (http://host:port, …)',
      );
    }
    if (o.electionName === undefined) {
      throw new InvalidArgumentError('EtcdLocker options: electionName is required');
    }
    const lease = o.leaseMs;
    const holder = o.holderId ?? defaultLeaseHolderId();
    super({ ...o, acquireIntervalMs: lease }, `etcd election ${o.electionName} (${holder})`);
    const margin = o.selfFencingMarginMs ?? lease / 4;
    if (margin >= lease) {
      throw new InvalidArgumentError(
        `selfFencingMarginMs must be > 0 and < the lease (${lease} ms), got ${margin}`,
      );
    }
    this.endpoints = o.endpoints;
    this.electionName = o.electionName;
    this.leaseMs = lease;
    this.holderId = holder;
    this.selfFencingMarginMs = margin;
    this.maxEventLoopLagMs = o.maxEventLoopLagMs ?? margin;
    this.requestTimeoutMs = o.requestTimeoutMs ?? lease;
    this.defaultKeepAlivePeriodMs = Math.floor(lease / 4);
    this.#clientOptions = {
      hosts: [...o.endpoints],
      // One quick attempt per member; a call's own deadline bounds the whole.
      dialTimeout: Math.min(this.requestTimeoutMs, 5_000),
      ...(o.auth === undefined ? {} : { auth: o.auth }),
      ...(o.tls === undefined ? {} : { credentials: o.tls }),
    };
  }

  /** The self-fencing deadline (see the class comment); `undefined` while not master. */
  override get validUntil(): number | undefined {
    const c = this.#candidate;
    return c === undefined || c.lost || !this.held ? undefined : c.deadline;
  }

  /** Our candidate key while campaigning or master (`<electionName>/<lease id hex>`). */
  get key(): string | undefined {
    return this.#candidate?.key.toString();
  }

  /** Renewing more slowly than 3/8 of the lease lets the master self-fence between renewals. */
  protected override checkKeepAlivePeriod(period: number): void {
    const lease = this.leaseMs;
    if (period > lease * MAX_RENEW_FRACTION) {
      throw new InvalidArgumentError(
        `keepAlivePeriodMs (${period} ms) must be at most 3/8 of the lease (${lease} ms), e.g. ${Math.floor(lease / 4)} ms: a lease renewed more slowly lapses, or its master self-fences, between renewals`,
      );
    }
  }

  get #prefix(): Buffer {
    return Buffer.from(`${this.electionName}/`);
  }

  /** The first-created key under the election prefix: the leader's. */
  #leaderRange(): IRangeRequest {
    const prefix = this.#prefix;
    return {
      key: prefix,
      range_end: prefixEnd(prefix),
      sort_target: 'Create',
      sort_order: 'Ascend',
      limit: 1,
    };
  }

  #callOptions() {
    return { deadline: Date.now() + this.requestTimeoutMs };
  }

  protected async doStart(context: AcquireContext): Promise<number> {
    const { Etcd3 } = await loadEtcd3();
    let waited = false;
    for (;;) {
      if (context.signal.aborted) throw context.signal.reason;
      const client = new Etcd3(this.#clientOptions);
      let candidate: Candidate | undefined;
      try {
        candidate = await this.#grant(client);
        this.#candidate = candidate;
        const token = await this.#campaign(candidate, context, () => {
          waited = true;
        });
        if (token !== undefined) {
          this.#everStarted = true;
          return token;
        }
        // The lease expired under us while waiting: start over with a new one.
        this.logger.warn(
          `Lease ${candidate.leaseId} of ${this.name} expired while waiting; campaigning again`,
        );
      } catch (err) {
        const first = !this.#everStarted && !waited;
        if (
          err instanceof LockObtainFailedError ||
          context.signal.aborted ||
          (first && (candidate === undefined || REFUSAL.test(describe(err))))
        ) {
          await this.#release(candidate, client);
          if (this.#candidate === candidate) this.#candidate = undefined;
          if (context.signal.aborted) throw context.signal.reason;
          if (err instanceof LockObtainFailedError) throw err;
          const what =
            candidate === undefined
              ? 'did not grant a lease'
              : `refused the campaign under ${this.electionName}/`;
          throw new LockIOError(
            `etcd at ${this.endpoints.join(', ')} ${what}: ${describe(err)} (${this.name})`,
            { cause: err },
          );
        }
        this.logger.warn(
          `Campaign of ${this.name} failed: ${describe(err)}; retrying in ${Math.min(this.acquireIntervalMs, 1000)} ms`,
        );
      }
      await this.#release(candidate, client);
      if (this.#candidate === candidate) this.#candidate = undefined;
      await abortableSleep(
        Math.min(this.acquireIntervalMs, 1000),
        context.signal,
        this.clock,
        'etcd campaign',
      );
    }
  }

  /** A new lease (session); its deadline counts from before the grant was sent. */
  async #grant(client: Etcd3): Promise<Candidate> {
    const sent = this.clock.monotonic();
    const res = await client.leaseClient.leaseGrant(
      { TTL: this.leaseMs / 1000 },
      this.#callOptions(),
    );
    const ttl = Number(res.TTL);
    if (res.error !== '' || !(ttl > 0)) {
      throw new LockIOError(`etcd refused the lease: ${res.error || `TTL ${res.TTL}`}`);
    }
    let resolveLost: () => void = () => {};
    const lostPromise = new Promise<false>((resolve) => {
      resolveLost = () => resolve(false);
    });
    return {
      client,
      leaseId: res.ID,
      ttl,
      key: Buffer.from(`${this.electionName}/${BigInt(res.ID).toString(16)}`),
      rev: 0,
      deadline: sent + ttl * 1000 - this.selfFencingMarginMs,
      lost: false,
      stop: new AbortController(),
      lostPromise,
      resolveLost,
    };
  }

  /**
   * Go's `Election.Campaign` on `c`: put our key, wait for every earlier key to go, then
   * confirm. Resolves with the token once leader, or `undefined` when the lease expired while
   * waiting (the caller starts over).
   */
  async #campaign(
    c: Candidate,
    { signal }: AcquireContext,
    onWait: () => void,
  ): Promise<number | undefined> {
    const prefix = this.#prefix;
    const res = await c.client.kv.txn(
      {
        compare: [{ key: c.key, target: 'Create', result: 'Equal', create_revision: 0 }],
        success: [
          { request_put: { key: c.key, value: Buffer.from(this.holderId), lease: c.leaseId } },
          { request_range: this.#leaderRange() },
        ],
        failure: [{ request_range: { key: c.key } }, { request_range: this.#leaderRange() }],
      },
      this.#callOptions(),
    );
    c.rev = res.succeeded
      ? Number(res.header.revision)
      : Number(res.responses[0]?.response_range.kvs[0]?.create_revision);
    const leader = res.responses[1]?.response_range.kvs[0];
    if (leader !== undefined && Number(leader.create_revision) !== c.rev) {
      const who = `${leader.value.toString()} (key ${leader.key.toString()}, revision ${leader.create_revision})`;
      if (this.failIfLocked) {
        throw new LockObtainFailedError(
          `etcd election ${this.electionName} is led by ${who} (${this.name})`,
        );
      }
      this.logger.info(
        `etcd election ${this.electionName} is led by ${who}. This broker is now in slave mode waiting a lock to be acquired (${this.name})`,
      );
      onWait();
      // Keep our place in the queue: the lease lives while we wait.
      const waiting = new AbortController();
      const onAbort = () => waiting.abort(signal.reason);
      // The signal may have aborted during the awaits above: a listener added now would never
      // run, and the wait would last until the leader's key goes.
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
      const keeping = this.#keepCampaignLease(c, waiting);
      try {
        await this.#waitDeletes(c, prefix, c.rev - 1, waiting.signal);
      } catch (err) {
        if (signal.aborted) throw signal.reason;
        if (c.lost) return undefined;
        throw err;
      } finally {
        signal.removeEventListener('abort', onAbort);
        waiting.abort();
        await keeping;
      }
      if (c.lost) return undefined;
    }
    if (signal.aborted) throw signal.reason;
    // Leader by the queue; confirm the lease and that our key is the leader key, now.
    if (!(await this.#renew(c, true))) return undefined;
    void watchSelfFencing(this.clock, c, this, {
      expired: () => this.#lose(c, this.#expiredWhy(), 'LEASE_EXPIRED'),
      stalled: (lag) =>
        this.#lose(
          c,
          `event loop stalled ${Math.round(lag)} ms (more than maxEventLoopLagMs ${this.maxEventLoopLagMs} ms), counted as a missed keep-alive`,
          'LOCK_UNCONFIRMED',
        ),
    });
    void this.#watchOwnKey(c);
    this.logger.info(
      `etcd election ${this.electionName} won by ${this.holderId}, key ${c.key.toString()}, token ${c.rev} (${this.name})`,
    );
    return c.rev;
  }

  /** Go's `waitDeletes`: until no key under `prefix` has a create revision ≤ `maxRev`. */
  async #waitDeletes(c: Candidate, prefix: Buffer, maxRev: number, signal: AbortSignal) {
    for (;;) {
      if (signal.aborted) throw signal.reason;
      const res = await c.client.kv.range(
        {
          key: prefix,
          range_end: prefixEnd(prefix),
          sort_target: 'Create',
          sort_order: 'Descend',
          limit: 1,
          max_create_revision: maxRev,
        },
        this.#callOptions(),
      );
      const last = res.kvs[0];
      if (last === undefined) return;
      this.logger.debug(
        `${this.name} waits for the deletion of ${last.key.toString()} (revision ${last.create_revision})`,
      );
      if ((await this.#waitDelete(c, last.key, res.header.revision, signal)) === 'ended') {
        // Look again, without spinning while no member answers.
        await abortableSleep(100, signal, this.clock, 'etcd campaign');
      }
    }
  }

  /**
   * Resolves `'deleted'` when `key` is deleted at a revision from `rev` on, or `'ended'` when
   * the watch stream fails or etcd cancels it (compaction, a member going away: the caller
   * looks again); rejects when `signal` aborts, even while the stream is still opening. One
   * raw Watch stream per wait, cancelled on every exit: etcd3's watch manager reconnects in
   * the background, with timers that would outlive a stopped locker.
   */
  async #waitDelete(
    c: Candidate,
    key: Buffer,
    rev: string,
    signal: AbortSignal,
  ): Promise<'deleted' | 'ended'> {
    let onAbort = () => {};
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal.reason);
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    aborted.catch(() => {});
    try {
      return await onStream(
        c.client.watchClient.watch(),
        aborted,
        (stream) =>
          new Promise<'deleted' | 'ended'>((resolve) => {
            stream.on('data', (res) => {
              if (res.canceled) resolve('ended');
              else if (res.events.some((e) => e.type === 'Delete')) resolve('deleted');
            });
            stream.on('error', (err) => {
              this.logger.debug(
                `Watch of ${key.toString()} ended: ${describe(err)} (${this.name})`,
              );
              resolve('ended');
            });
            stream.on('end', () => resolve('ended'));
            stream.write({
              create_request: { key, start_revision: rev, filters: ['Noput'] },
            });
          }),
      );
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** Keeps `c`'s lease alive every TTL / 3 until `until` aborts; marks `c` lost if etcd says it is gone. */
  async #keepCampaignLease(c: Candidate, until: AbortController): Promise<void> {
    const period = Math.max(100, (c.ttl * 1000) / 3);
    while (!until.signal.aborted) {
      try {
        await this.clock.sleep(period, until.signal);
      } catch {
        return;
      }
      try {
        const ttl = (await this.#keepAliveOnce(c)).ttl;
        if (ttl <= 0) {
          c.lost = true;
          c.resolveLost();
          until.abort(new LockLostError(`lease ${c.leaseId} expired while waiting`));
          return;
        }
      } catch (err) {
        this.logger.debug(`Keep-alive while waiting failed: ${describe(err)} (${this.name})`);
      }
    }
  }

  /**
   * One LeaseKeepAlive on a stream of its own, tried again (every 100 ms, on whichever member
   * the client picks) when a stream fails: etcd3 retries unary calls across members, not
   * streams. Rejects when no answer comes within `requestTimeoutMs`.
   */
  async #keepAliveOnce(c: Candidate): Promise<{ ttl: number; header: IResponseHeader }> {
    const end = Date.now() + this.requestTimeoutMs;
    for (let attempt = 1; ; attempt++) {
      try {
        return await keepAliveAttempt(c.client, c.leaseId, end - Date.now());
      } catch (err) {
        if (c.stop.signal.aborted || c.lost || Date.now() + 100 >= end) throw err;
        this.logger.debug(`Keep-alive attempt ${attempt} failed: ${describe(err)} (${this.name})`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /**
   * One renewal: keep-alive, then a linearizable read of the leader key. True: the lease lives
   * and our key leads (the deadline moves forward when both answers come from one raft term).
   * False: lost (and reported). Rejects on I/O errors. `acquiring`: the confirmation that
   * makes us master; there is no earlier deadline to be late for, and the deadline it sets
   * must be certain, so a raft term change between the two answers rejects (campaign again).
   */
  async #renew(c: Candidate, acquiring = false): Promise<boolean> {
    const sent = this.clock.monotonic();
    const ka = await this.#keepAliveOnce(c);
    if (c.lost || this.#candidate !== c) return false;
    if (!(ka.ttl > 0)) {
      this.#lose(c, `etcd says lease ${c.leaseId} is gone (expired or revoked)`, 'LEASE_EXPIRED');
      return false;
    }
    const read = await c.client.kv.range(this.#leaderRange(), this.#callOptions());
    if (c.lost || this.#candidate !== c) return false;
    const leader = read.kvs[0];
    if (
      leader === undefined ||
      !leader.key.equals(c.key) ||
      Number(leader.create_revision) !== c.rev
    ) {
      const now =
        leader === undefined
          ? 'nobody'
          : `${leader.value.toString()} (key ${leader.key.toString()}, revision ${leader.create_revision})`;
      this.#lose(
        c,
        `our key ${c.key.toString()} (revision ${c.rev}) no longer leads; leader: ${now}`,
        'LOCK_LOST',
      );
      return false;
    }
    if (!acquiring && this.clock.monotonic() >= c.deadline) {
      // Confirmed too late: the deadline had passed, someone else may have led meanwhile.
      this.#lose(c, this.#expiredWhy(), 'LEASE_EXPIRED');
      return false;
    }
    const deadline = sent + ka.ttl * 1000 - this.selfFencingMarginMs;
    if (read.header.raft_term === ka.header.raft_term) {
      c.ttl = ka.ttl;
      c.deadline = acquiring ? deadline : Math.max(c.deadline, deadline);
    } else if (acquiring) {
      throw new LockIOError(
        `raft term changed during the confirmation (keep-alive in term ${ka.header.raft_term}, read in ${read.header.raft_term})`,
      );
    } else {
      this.logger.debug(
        `Keep-alive in raft term ${ka.header.raft_term}, read in ${read.header.raft_term}: deadline not moved (${this.name})`,
      );
    }
    if (acquiring && this.clock.monotonic() >= c.deadline) {
      throw new LockIOError('the confirmation took longer than the lease allows');
    }
    return true;
  }

  protected async doKeepAlive(): Promise<boolean> {
    const c = this.#candidate;
    if (c === undefined || c.lost) return false;
    try {
      return await Promise.race([this.#renew(c), c.lostPromise]);
    } catch (err) {
      if (c.lost) return false;
      throw new LockIOError(
        `etcd keep-alive of ${this.name} failed, ownership unknown: ${describe(err)}`,
        { cause: err },
      );
    }
  }

  /** Reports the deletion of our key while master (etcdctl del, a revoked lease) at once. */
  async #watchOwnKey(c: Candidate): Promise<void> {
    let from = String(c.rev + 1);
    for (;;) {
      let outcome: 'deleted' | 'ended';
      try {
        outcome = await this.#waitDelete(c, c.key, from, c.stop.signal);
      } catch {
        return; // Stopped.
      }
      if (c.stop.signal.aborted || c.lost) return;
      if (outcome === 'deleted') {
        this.#lose(c, `our key ${c.key.toString()} was deleted`, 'LOCK_LOST');
        return;
      }
      // The stream ended (a member went away): watch again from where etcd is now; a deletion
      // missed meanwhile is still found by the next keepAlive().
      try {
        await this.clock.sleep(200, c.stop.signal);
        const res = await c.client.kv.range({ key: c.key }, this.#callOptions());
        if (c.stop.signal.aborted || c.lost) return;
        if (Number(res.kvs[0]?.create_revision) !== c.rev) {
          this.#lose(c, `our key ${c.key.toString()} was deleted`, 'LOCK_LOST');
          return;
        }
        from = String(Number(res.header.revision) + 1);
      } catch {
        if (c.stop.signal.aborted) return;
      }
    }
  }

  #expiredWhy(): string {
    return `lease not confirmed for ${this.leaseMs - this.selfFencingMarginMs} ms (lease ${this.leaseMs} ms − margin ${this.selfFencingMarginMs} ms): self-fenced before it can expire on etcd`;
  }

  #lose(c: Candidate, why: string, code: LockLossCode): void {
    if (c.lost) return;
    c.lost = true;
    c.resolveLost();
    c.stop.abort();
    this.logger.warn(`etcd election ${this.electionName}, token ${c.rev}: ${why} (${this.name})`);
    this.markLost(
      new LockLostError(`etcd election ${this.electionName} lost: ${why} (${this.name})`, { code }),
    );
  }

  /** Resign (delete our key if still ours) and revoke the lease, bounded; closes the client. */
  async #release(c: Candidate | undefined, client: Etcd3): Promise<void> {
    if (c !== undefined) {
      c.lost = true;
      c.stop.abort();
      c.resolveLost();
      const bounded = <T>(p: Promise<T>) =>
        Promise.race([
          p,
          new Promise<never>((_, reject) => {
            const t = setTimeout(
              () => reject(new LockIOError(`no answer in ${this.requestTimeoutMs} ms`)),
              this.requestTimeoutMs,
            );
            t.unref?.();
          }),
        ]);
      try {
        if (c.rev > 0) {
          await bounded(
            client.kv.txn(
              {
                compare: [
                  { key: c.key, target: 'Create', result: 'Equal', create_revision: c.rev },
                ],
                success: [{ request_delete_range: { key: c.key } }],
              },
              this.#callOptions(),
            ),
          );
        }
        await bounded(client.leaseClient.leaseRevoke({ ID: c.leaseId }, this.#callOptions()));
      } catch (err) {
        if (/lease not found/.test(describe(err))) {
          this.logger.debug(`Lease ${c.leaseId} of ${this.name} was gone already`);
          client.close();
          return;
        }
        this.logger.warn(
          `Resign/revoke of ${this.name} failed (${describe(err)}); lease ${c.leaseId} expires by itself within ${c.ttl} s`,
        );
      }
    }
    client.close();
  }

  protected async doStop(): Promise<void> {
    const c = this.#candidate;
    this.#candidate = undefined;
    if (c !== undefined) await this.#release(c, c.client);
  }

  override toString(): string {
    return `EtcdLocker(${this.name})`;
  }
}
