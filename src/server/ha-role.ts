import { EventEmitter } from 'node:events';
import { mkdir, open, readdir, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from '../core/clock.js';
import { LockLostError, NotMasterError } from '../core/errors.js';
import { describe } from '../store/describe-error.js';
import type { Locker } from '../store/locker.js';
import type { Service, ServiceContext } from '../store/service.js';
import { Supervisor } from '../store/supervisor.js';
import type { DataMastership, DataService } from './data-service.js';

/** `LocksmithServer.listen`'s `ha` option: run as one of several servers on one data directory. */
export interface HaOptions {
  /** Decides which server is master (`createLocker` of `locksmith-locks/store`). */
  locker: Locker;
  /** The supervisor's keep-alive period, ms (default the locker's own). */
  keepAlivePeriodMs?: number | undefined;
  /** `host:port` clients should use to reach this server (default its listening address). */
  advertise?: string | undefined;
}

/** A server of the data directory, as its `servers/<id>.json` says. */
export interface PeerRecord {
  id: string;
  address: string;
  role: 'master' | 'slave';
  /** When it took this role (ms since the epoch). */
  since: number;
  token: number | null;
  /** When it last wrote the record (ms since the epoch). */
  seenAt: number;
}

/** `<dataDir>/master.json`: written by each master when it takes over. */
export interface MasterRecord {
  id: string;
  address: string;
  token: number;
  since: number;
}

/** One change of role of this server (kept in memory, newest last). */
export interface FailoverRecord {
  at: number;
  role: 'master' | 'slave';
  token: number | null;
  reason: string;
}

/** The `ha` part of `status()`. */
export interface HaStatus {
  role: 'standalone' | 'master' | 'slave';
  since: number;
  token: number | null;
  locker?: string;
  address: string;
  master?: { address: string; token: number; since: number };
  /**
   * The other servers of the data directory. `role` is what a server last said of itself;
   * `state` is `gone` when its record stopped being rewritten for {@link PEER_GONE_MS} (as
   * this server's clock measures it, so clock skew between machines does not matter) or when it
   * says `master` with a token older than the master's known now: then it is no longer master,
   * whatever its record says, and no page shows two masters.
   */
  peers: PeerStatus[];
  failovers: FailoverRecord[];
}

/** One other server, as status shows it (see {@link HaStatus.peers}). */
export interface PeerStatus {
  id: string;
  address: string;
  role: 'master' | 'slave';
  state: 'live' | 'gone';
  seenAt: number;
}

/** A change of role: `slave` (waiting; `reason` after a loss) or `master` (with its token). */
export interface RoleChange {
  role: 'master' | 'slave';
  token?: number;
  /** Why a master became a slave again. */
  reason?: string;
  /** On `slave`: what the locker waits for. */
  locker: string;
}

/** How often each server writes its record and reads the others' (and master.json). */
export const HEARTBEAT_MS = 1000;
/** A record not rewritten for this long belongs to a server that is gone (killed, paused, cut off). */
export const PEER_GONE_MS = 5 * HEARTBEAT_MS;
/** ...and after this long its record is removed: every crash would otherwise leave one behind. */
export const PEER_PRUNED_MS = 60 * HEARTBEAT_MS;
const MAX_FAILOVERS = 100;
/** After the supervisor stopped for good (a master that failed to open), try again this late. */
const RESTART_DELAY_MS = 1000;

/**
 * The master/slave role of a server (ActiveMQ's shared-storage master/slave): a
 * {@link Supervisor} on the locker runs the server's data side as its {@link Service}. On
 * mastership the data side is opened with the token as its epoch and every call checks the
 * mastership first; on loss (the supervisor's signal, a `FENCED` from the storage, the data
 * directory's lock taken over) it is closed — every session ends with `MASTER_CHANGED` — and
 * the server waits as a slave again. A supervisor that stops for good (the data side failed to
 * open) is replaced after a second, so a server never stays a slave that cannot take over —
 * unless the locker has `failIfLocked`: then `failed` is emitted (the server closes).
 *
 * Each server writes `<dataDir>/servers/<id>.json` every {@link HEARTBEAT_MS} and reads the
 * others' and `<dataDir>/master.json` (written atomically by each new master), so that status
 * lists its peers and a slave names the master to clients without any I/O on their path.
 */
export class HaRole extends EventEmitter<{ role: [RoleChange]; failed: [unknown] }> {
  readonly id: string;
  readonly address: string;
  readonly locker: Locker;
  readonly #dataDir: string;
  readonly #keepAliveMs: number | undefined;
  readonly #clock: Clock;
  readonly #open: (mastership: DataMastership) => Promise<DataService>;
  readonly #failovers: FailoverRecord[] = [];
  #supervisor: Supervisor | undefined;
  #data: DataService | undefined;
  /** The signal of the current mastership: its reason says why the mastership ended. */
  #signal: AbortSignal | undefined;
  #role: 'master' | 'slave' = 'slave';
  #token: number | null = null;
  #since = Date.now();
  #master: MasterRecord | undefined;
  #peers: PeerRecord[] = [];
  /** Per peer id: its last `seenAt`, and when (on this server's monotonic clock) it changed. */
  readonly #peerChanges = new Map<string, { seenAt: number; changedAt: number }>();
  #heartbeat: NodeJS.Timeout | undefined;
  #beating: Promise<void> = Promise.resolve();
  #restart: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(parts: {
    id: string;
    address: string;
    dataDir: string;
    options: HaOptions;
    clock: Clock;
    open: (mastership: DataMastership) => Promise<DataService>;
  }) {
    super();
    this.id = parts.id;
    this.address = parts.address;
    this.locker = parts.options.locker;
    this.#keepAliveMs = parts.options.keepAlivePeriodMs;
    this.#dataDir = parts.dataDir;
    this.#clock = parts.clock;
    this.#open = parts.open;
  }

  get role(): 'master' | 'slave' {
    return this.#role;
  }

  /** The data side while master and serving; undefined otherwise. */
  get data(): DataService | undefined {
    return this.#data;
  }

  /** The data side to serve a HELLO with, or why not (naming the master when known). */
  serving(): DataService | NotMasterError {
    const data = this.#data;
    if (data !== undefined) {
      try {
        this.#checkFor(data.epoch);
        return data;
      } catch (err) {
        return err as NotMasterError;
      }
    }
    const master = this.#knownMaster();
    return new NotMasterError(
      master === undefined
        ? `This server (${this.address}) is a slave and knows no master yet: try another server`
        : `This server (${this.address}) is a slave; the master is ${master}`,
      { master },
    );
  }

  /** Starts waiting for mastership, and the heartbeat. */
  start(): void {
    this.#emitRole({ role: 'slave', locker: this.locker.name });
    this.#startSupervisor();
    this.#beatSoon();
    this.#heartbeat = setInterval(() => this.#beatSoon(), HEARTBEAT_MS);
    this.#heartbeat.unref();
  }

  /** Stops: the data side is closed (sessions end), the lock given back, the record removed. */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#heartbeat);
    clearTimeout(this.#restart);
    await this.#beating;
    await this.#supervisor?.stop();
    await unlink(this.#recordPath()).catch(() => undefined);
  }

  status(): HaStatus {
    const master = this.#role === 'master' ? undefined : this.#masterRecord();
    return {
      role: this.#role,
      since: this.#since,
      token: this.#token,
      locker: this.locker.name,
      address: this.address,
      ...(master === undefined
        ? this.#role === 'master' && this.#token !== null
          ? { master: { address: this.address, token: this.#token, since: this.#since } }
          : {}
        : { master: { address: master.address, token: master.token, since: master.since } }),
      peers: this.#peers.map((p) => ({
        id: p.id,
        address: p.address,
        role: p.role,
        state: this.#isGone(p) ? 'gone' : 'live',
        seenAt: p.seenAt,
      })),
      failovers: [...this.#failovers],
    };
  }

  #startSupervisor(): void {
    const service: Service = {
      start: (context) => this.#promote(context),
      stop: () => this.#demote(),
    };
    const supervisor = new Supervisor({
      locker: this.locker,
      service,
      restartAllowed: true,
      clock: this.#clock,
      ...(this.#keepAliveMs === undefined ? {} : { keepAlivePeriodMs: this.#keepAliveMs }),
    });
    this.#supervisor = supervisor;
    supervisor.on('waiting', () => {
      if (this.#role !== 'slave') this.#emitRole({ role: 'slave', locker: this.locker.name });
    });
    supervisor.once('stopped', ({ reason }) => {
      if (this.#closed) return;
      if (this.locker.failIfLocked) {
        // Asked not to wait: another server is master (or the locker cannot start at all).
        this.emit('failed', reason);
        return;
      }
      process.emitWarning(
        `locksmith serve: the supervisor of ${this.locker.name} stopped (${describe(reason)}); waiting again in ${RESTART_DELAY_MS} ms`,
      );
      this.#restart = setTimeout(() => {
        if (!this.#closed) this.#startSupervisor();
      }, RESTART_DELAY_MS);
    });
    // Failures become the 'stopped' event above.
    supervisor.start().catch(() => undefined);
  }

  /** The mastership is certain until the locker's `validUntil` (its monotonic clock). */
  #checkFor(token: number): void {
    const { locker } = this;
    const until = locker.validUntil;
    if (
      this.#signal?.aborted !== false ||
      this.#data?.epoch !== token ||
      locker.token !== token ||
      until === undefined ||
      this.#clock.monotonic() >= until
    ) {
      throw new NotMasterError(
        `This server (${this.address}) is no longer master (its mastership, token ${token}, is over or uncertain)`,
      );
    }
  }

  async #promote({ signal, token }: ServiceContext): Promise<void> {
    const mastership: DataMastership = {
      token,
      check: () => {
        if (signal.aborted) {
          throw new NotMasterError(
            `This server (${this.address}) is no longer master (token ${token})`,
          );
        }
        this.#checkFor(token);
      },
      lost: (reason) => {
        this.#supervisor?.demote(
          new LockLostError(
            `The storage refused this master (token ${token}): ${describe(reason)}`,
            {
              code: 'MASTER_CHANGED',
              cause: reason,
            },
          ),
        );
      },
    };
    this.#signal = signal;
    const data = await this.#open(mastership);
    if (signal.aborted) {
      await data.close(masterChanged(signal.reason));
      return;
    }
    const since = Date.now();
    await writeAtomically(
      join(this.#dataDir, 'master.json'),
      { id: this.id, address: this.address, token, since } satisfies MasterRecord,
      true,
    ).catch(async (err) => {
      await data.close(masterChanged(err));
      throw err;
    });
    this.#master = { id: this.id, address: this.address, token, since };
    this.#data = data;
    this.#role = 'master';
    this.#token = token;
    this.#since = since;
    this.#record({ at: since, role: 'master', token, reason: `acquired ${this.locker.name}` });
    this.#emitRole({ role: 'master', token, locker: this.locker.name });
    this.#beatSoon();
  }

  async #demote(): Promise<void> {
    const data = this.#data;
    if (data === undefined) return;
    this.#data = undefined;
    const token = this.#token;
    // The signal's reason: why the mastership ended (loss, or the supervisor stopping).
    const reason: unknown = this.#signal?.reason;
    this.#role = 'slave';
    this.#token = null;
    this.#since = Date.now();
    await data.close(
      this.#closed
        ? new LockLostError('The server shut down', { code: 'LOCK_LOST' })
        : masterChanged(reason),
    );
    const why = this.#closed ? 'the server shut down' : describe(reason ?? 'mastership ended');
    this.#record({ at: this.#since, role: 'slave', token, reason: why });
    if (!this.#closed) this.#emitRole({ role: 'slave', reason: why, locker: this.locker.name });
  }

  #record(entry: FailoverRecord): void {
    this.#failovers.push(entry);
    if (this.#failovers.length > MAX_FAILOVERS) this.#failovers.shift();
  }

  #emitRole(change: RoleChange): void {
    try {
      this.emit('role', change);
    } catch {
      // A listener's failure is not the server's.
    }
  }

  /** master.json as last read, unless it names this server (then it is out of date). */
  #masterRecord(): MasterRecord | undefined {
    const master = this.#master;
    return master === undefined || master.address === this.address ? undefined : master;
  }

  #knownMaster(): string | undefined {
    return this.#masterRecord()?.address;
  }

  /** See {@link HaStatus.peers}. */
  #isGone(peer: PeerRecord): boolean {
    const change = this.#peerChanges.get(peer.id);
    if (change !== undefined && this.#clock.monotonic() - change.changedAt > PEER_GONE_MS) {
      return true;
    }
    if (peer.role !== 'master') return false;
    const newest = this.#role === 'master' ? this.#token : (this.#masterRecord()?.token ?? null);
    return newest !== null && (peer.token === null || peer.token < newest);
  }

  /** Notes when each peer's record last changed; removes the records gone for long. */
  async #track(peers: PeerRecord[], dir: string): Promise<PeerRecord[]> {
    const now = this.#clock.monotonic();
    const kept: PeerRecord[] = [];
    const ids = new Set<string>();
    for (const peer of peers) {
      ids.add(peer.id);
      const change = this.#peerChanges.get(peer.id);
      if (change === undefined || change.seenAt !== peer.seenAt) {
        this.#peerChanges.set(peer.id, { seenAt: peer.seenAt, changedAt: now });
      } else if (now - change.changedAt > PEER_PRUNED_MS) {
        // A server that comes back writes its record again on its next heartbeat.
        await unlink(join(dir, `${peer.id}.json`)).catch(() => undefined);
        this.#peerChanges.delete(peer.id);
        continue;
      }
      kept.push(peer);
    }
    for (const id of this.#peerChanges.keys()) if (!ids.has(id)) this.#peerChanges.delete(id);
    return kept;
  }

  #recordPath(): string {
    return join(this.#dataDir, 'servers', `${this.id}.json`);
  }

  /** One heartbeat after those under way (so `close` can wait for the last). */
  #beatSoon(): void {
    this.#beating = this.#beating.then(() => this.#beat());
  }

  /** Writes this server's record, reads the others' and master.json. Never rejects. */
  async #beat(): Promise<void> {
    if (this.#closed) return;
    const now = Date.now();
    const mine: PeerRecord = {
      id: this.id,
      address: this.address,
      role: this.#role,
      since: this.#since,
      token: this.#token,
      seenAt: now,
    };
    try {
      await writeAtomically(this.#recordPath(), mine, false);
    } catch {
      // The next beat tries again; status shows the peers as last read.
    }
    // master.json first: the peers read next are judged against the newest master known.
    const master = await readJson(join(this.#dataDir, 'master.json')).catch(() => undefined);
    if (isMaster(master) && (this.#master === undefined || master.token >= this.#master.token)) {
      this.#master = master;
    }
    try {
      const dir = join(this.#dataDir, 'servers');
      const peers: PeerRecord[] = [];
      for (const name of await readdir(dir)) {
        if (!name.endsWith('.json') || name === `${this.id}.json`) continue;
        const peer = await readJson(join(dir, name));
        if (isPeer(peer) && `${peer.id}.json` === name) peers.push(peer);
      }
      this.#peers = (await this.#track(peers, dir)).sort((a, b) => a.id.localeCompare(b.id));
    } catch {
      // As above.
    }
  }
}

/** The loss every session of a master ends with. */
function masterChanged(reason: unknown): LockLostError {
  return new LockLostError(
    `This server is no longer master (${describe(reason ?? 'mastership ended')}): sessions and row locks do not survive a change of master`,
    { code: 'MASTER_CHANGED', cause: reason },
  );
}

async function readJson(path: string): Promise<unknown> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as unknown;
  } catch {
    return undefined;
  }
}

function isPeer(value: unknown): value is PeerRecord {
  const v = value as PeerRecord | undefined;
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof v.id === 'string' &&
    typeof v.address === 'string' &&
    (v.role === 'master' || v.role === 'slave') &&
    (v.token === null || typeof v.token === 'number') &&
    typeof v.seenAt === 'number'
  );
}

function isMaster(value: unknown): value is MasterRecord {
  const v = value as MasterRecord | undefined;
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof v.address === 'string' &&
    typeof v.token === 'number' &&
    typeof v.since === 'number'
  );
}

/** Writes `value` as JSON to a temporary name and renames it over `path` (fsynced if `sync`). */
async function writeAtomically(path: string, value: unknown, sync: boolean): Promise<void> {
  const dir = join(path, '..');
  await mkdir(dir, { recursive: true });
  const temp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  const handle = await open(temp, 'w', 0o644);
  try {
    await handle.writeFile(`${JSON.stringify(value)}\n`);
    if (sync) await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(temp, path);
  } catch (err) {
    await unlink(temp).catch(() => undefined);
    throw err;
  }
}
