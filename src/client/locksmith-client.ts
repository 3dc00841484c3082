import { EventEmitter } from 'node:events';
import type { ConnectionOptions as TlsOptions } from 'node:tls';
import type { Clock } from '../core/clock.js';
import { checkDuration } from '../core/duration.js';
import { InvalidArgumentError, LockLostError } from '../core/errors.js';
import {
  booleanOption,
  clockOption,
  customOption,
  durationOption,
  readOptions,
  type SpecOf,
  signalOption,
  stringOption,
  withDefault,
} from '../core/option-spec.js';
import { checkOptionsObject, checkSignal, describeValue } from '../core/options.js';
import { abortableSleep } from '../core/wait.js';
import type { ColumnFamilySpec } from '../rows/column-family.js';
import { type BytesInput, checkRow } from '../rows/row-input.js';
import type { TableDescription } from '../rows/table-descriptor.js';
import type { ServerStatus } from '../server/server-status.js';
import type { CallArgs, CallResult } from '../wire/calls.js';
import { ClientConnection, type SessionInfo } from './client-connection.js';
import { HeldLocks } from './held-locks.js';
import { LocksmithSession, type SessionCarrier } from './locksmith-session.js';
import { RegionRouter } from './region-router.js';
import { RemoteTable, type TableClient, tableNamed } from './remote-table.js';
import { parseServerAddresses } from './server-address.js';
import { type TypedCall, typedCall } from './typed-call.js';

export type { TableDescription };

export interface ConnectOptions {
  /** The server's token (`locksmith serve --token-file`). */
  token?: string | undefined;
  /** TLS options for `locksmiths://` addresses (`ca` for a private certificate, ...). */
  tls?: TlsOptions | undefined;
  /** The session's lease: how long the server keeps it, and its locks, after losing touch. */
  sessionLeaseMs?: number | undefined;
  /** End the session, releasing its locks, as soon as a connection drops (no resume). */
  releaseOnDisconnect?: boolean | undefined;
  /** A name shown on the server's status page. */
  name?: string | undefined;
  /** Round-trip timeout of a call; a lock call adds its wait (default 30 s). */
  callTimeoutMs?: number | undefined;
  /**
   * How long `connect` keeps trying, over every address given (default 10 s). A quarter of it
   * (less for a list of four addresses or more) bounds each attempt's handshake, here and on
   * every reconnection: a server that accepts and never answers is given up for the next
   * address after that long.
   */
  connectTimeoutMs?: number | undefined;
  signal?: AbortSignal | undefined;
  clock?: Clock | undefined;
}

const CONNECT_SPEC = {
  token: stringOption(4096),
  tls: customOption<TlsOptions>('TLS options (ca, cert, key, ...)', (value, label) => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw new InvalidArgumentError(`${label} must be an object, got ${describeValue(value)}`);
    }
    return value as TlsOptions;
  }),
  sessionLeaseMs: durationOption(),
  releaseOnDisconnect: booleanOption(),
  name: stringOption(256),
  callTimeoutMs: withDefault(durationOption(), 30_000),
  connectTimeoutMs: withDefault(durationOption(), 10_000),
  signal: signalOption(),
  clock: clockOption(),
} as const satisfies SpecOf<ConnectOptions>;

/** Per administrative call: give up when `signal` aborts, or after `timeoutMs`. */
export interface AdminCallOptions {
  signal?: AbortSignal | undefined;
  timeoutMs?: number | undefined;
}

/** What `client.openSession()` takes. */
export interface OpenSessionOptions {
  /** The session's lease (default: the server's), at least the client's own session lease. */
  sessionLeaseMs?: number | undefined;
  /** End the session (releasing its locks) the moment the connection closes. */
  releaseOnDisconnect?: boolean | undefined;
  signal?: AbortSignal | undefined;
  timeoutMs?: number | undefined;
}

/** What a table is created with. */
export interface CreateTableOptions {
  /** HBase 0.90's batch timestamps, read when a mutation arrives (default false). */
  timestampOnArrival?: boolean | undefined;
  /**
   * Split the table into regions at these row keys (each the first row of a region; up to
   * 1,000, in any order, none twice). Default: one region.
   */
  splits?: readonly BytesInput[] | undefined;
}

export interface LocksmithClientEvents {
  /** The session ended; every lock it held is lost (its handles' signals aborted). */
  sessionLost: [reason: LockLostError];
  /** Connected (again): `resumed` tells whether the old session, and its locks, survived. */
  connected: [resumed: boolean];
  disconnected: [reason: Error];
  /**
   * The client now talks to another master (a failover, or another server of the list after
   * the first went away). The old session is gone (`sessionLost` came first, its locks'
   * signals aborted, `MASTER_CHANGED` when the new master said so or has another epoch); a
   * fresh session is open on `to`.
   */
  failover: [event: FailoverEvent];
}

export { parseServerUrl } from './server-address.js';

/** What the `failover` event tells: the session moved from one master to another. */
export interface FailoverEvent {
  /** `host:port` of the previous master. */
  from: string;
  /** `host:port` of the new one. */
  to: string;
  /** The new master's epoch (its mastership token; 0 for a standalone server). */
  epoch: number;
}

/**
 * A connection to a locksmith server, with one session: tables (`table(name)`, the
 * {@link Table} interface), administration, and the session's lifecycle as events. Close it
 * to end the session (releasing every lock it holds); `await using` does that at scope exit.
 */
export class LocksmithClient
  extends EventEmitter<LocksmithClientEvents>
  implements AsyncDisposable
{
  readonly #connection: ClientConnection;
  readonly #call: TypedCall;
  readonly #locks: HeldLocks;
  readonly #tables = new Map<string, RemoteTable>();
  readonly #tableClient: TableClient;
  readonly #router: RegionRouter;
  /** Where this session's moving locks go to be adopted (see `RegionRouter.relocate`). */
  #relocator: RegionRouter;
  readonly #clock: Clock;
  readonly #callTimeoutMs: number;
  /** The sessions this client's connection carries besides its own, by number. */
  readonly #carried = new Map<number, LocksmithSession>();
  readonly #carrier: SessionCarrier;
  #nextSessionNumber = 1;

  private constructor(
    connection: ClientConnection,
    clock: Clock,
    callTimeoutMs: number,
    memberOptions: ConnectOptions,
  ) {
    super();
    this.#connection = connection;
    this.#clock = clock;
    this.#callTimeoutMs = callTimeoutMs;
    const call = typedCall(connection);
    this.#call = call;
    const carried = this.#carried;
    this.#carrier = {
      clock,
      call,
      callTimeoutMs,
      get connected() {
        return connection.connected;
      },
      get validUntil() {
        return connection.sessionValidUntil;
      },
      get leaseMs() {
        return connection.session?.leaseMs;
      },
      get rowLockWaitMs() {
        return connection.session?.rowLockWaitMs ?? 30_000;
      },
      forget: (session) => {
        if (carried.get(session.number) === session) carried.delete(session.number);
      },
    };
    const locks = new HeldLocks({
      clock,
      sessionValidUntil: () => connection.sessionValidUntil,
      giveBack: (table, lockId) => call('unlockRow', [table, lockId]),
      sessionId: () => connection.session?.id,
      moving: (lock, from, unlock) => this.#relocator.relocate(lock, from, unlock),
      moves: () => this.#relocator.routing,
    });
    this.#locks = locks;
    this.#tableClient = {
      call,
      locks,
      now: () => clock.monotonic(),
      get rowLockWaitMs() {
        return connection.session?.rowLockWaitMs ?? 30_000;
      },
      callTimeoutMs,
      scanBatch: 100,
      get connected() {
        return connection.connected;
      },
      get session() {
        return connection.session;
      },
    };
    // The other servers of a fleet, each with a session of its own, opened at first use.
    this.#router = new RegionRouter(this.#tableClient, async (address) => {
      const member = await LocksmithClient.connect(address, memberOptions);
      // A member's locks move through the routing of the client that opened it.
      member.#relocator = this.#router;
      return { tables: member.#tableClient, close: () => member.close() };
    });
    this.#relocator = this.#router;
    connection.on('notice', (name, data) => {
      if (name === 'lockLost') {
        const lockId = Array.isArray(data) ? data[0] : undefined;
        for (const session of this.#carried.values()) if (session.lockLost(lockId, data)) return;
        locks.lockLost(data);
      } else if (name === 'lockMoved' && Array.isArray(data)) locks.moved(data[0]);
      else if (name === 'sessionEnded' && Array.isArray(data)) {
        const [number, code, message] = data as unknown[];
        this.#carried.get(number as number)?.lose(
          new LockLostError(String(message), {
            code: code === 'MASTER_CHANGED' ? 'MASTER_CHANGED' : 'SESSION_EXPIRED',
          }),
        );
      }
    });
    connection.on('sessionLost', (reason) => {
      // The sessions carried with it count their leases from the same frames: lost with it
      // (early rather than late, where a longer lease might have let one live on).
      for (const session of [...this.#carried.values()]) session.lose(reason);
      locks.loseAll(reason);
      this.emit('sessionLost', reason);
    });
    connection.on('disconnected', (reason) => {
      // In a fleet the server may be gone for good: its regions' next servers keep the locks.
      locks.moved(undefined);
      for (const session of this.#carried.values()) session.disconnected();
      this.emit('disconnected', reason);
    });
    connection.on('failover', (from, to, epoch) => this.emit('failover', { from, to, epoch }));
    connection.on('connected', (_info, resumed, held) => {
      // Before the calls queued meanwhile go out: theirs must find their sessions carried.
      for (const session of [...this.#carried.values()]) session.reconnected();
      locks.reconnected(resumed, held);
      this.emit('connected', resumed);
    });
  }

  /**
   * Connects and opens a session: to `url`, or to the master among several servers
   * (`'locksmith://h1:p1,h2:p2'` or an array of addresses), the first that welcomes the client.
   */
  static async connect(
    url: string | readonly string[],
    options: ConnectOptions = {},
  ): Promise<LocksmithClient> {
    const addresses = parseServerAddresses(url);
    const opts = readOptions(options, 'connect options', CONNECT_SPEC, 'connect option ');
    const { clock, callTimeoutMs, signal } = opts;
    let client: LocksmithClient | undefined;
    const connection = new ClientConnection({
      addresses,
      token: opts.token,
      tls: opts.tls,
      sessionLeaseMs: opts.sessionLeaseMs,
      releaseOnDisconnect: opts.releaseOnDisconnect,
      client: opts.name,
      callTimeoutMs,
      connectTimeoutMs: opts.connectTimeoutMs,
      reconnectMinMs: 50,
      reconnectMaxMs: 2_000,
      clock,
      // A grant answered after its caller gave up is given back by the owner of the locks.
      lateResult: (method, args, value, session) => {
        if (client === undefined) return;
        if (session === undefined) client.#locks.lateResult(method, args, value);
        else client.#carried.get(session)?.lateResult(method, args, value);
      },
    });
    const memberOptions: ConnectOptions = { ...opts, signal: undefined };
    client = new LocksmithClient(connection, clock, callTimeoutMs, memberOptions);
    await connection.open(signal);
    return client;
  }

  /** The session as the server granted it (undefined between a loss and the next connection). */
  get session(): SessionInfo | undefined {
    return this.#connection.session;
  }

  get connected(): boolean {
    return this.#connection.connected;
  }

  /**
   * `host:port` of the master this client talks to (the server of its session; the last one
   * while reconnecting).
   */
  get master(): string {
    return this.#connection.master ?? '';
  }

  /** The epoch of that master (its mastership token; 0 for a standalone server). */
  get epoch(): number {
    return this.#connection.epoch ?? 0;
  }

  /** Row locks this client holds now (on every server of a fleet it talks to). */
  get heldLocks(): number {
    return this.#router.clients().reduce((n, c) => n + c.locks.size, 0);
  }

  /**
   * Opens a session of its own over this client's connection (see {@link LocksmithSession}):
   * its locks are its own, and it costs the server a session, not a connection. Its lease
   * (`sessionLeaseMs`, default the server's) must be at least this client's own session lease,
   * since the client's keep-alives are paced by that one. Refused by a fleet server
   * (`UNSUPPORTED_OPERATION`): open a client per session there.
   */
  async openSession(options: OpenSessionOptions = {}): Promise<LocksmithSession> {
    const opts = checkOptionsObject(options, 'openSession options');
    for (const key of Object.keys(opts)) {
      if (!['sessionLeaseMs', 'releaseOnDisconnect', 'signal', 'timeoutMs'].includes(key)) {
        throw new InvalidArgumentError(
          `openSession: unknown option ${JSON.stringify(key)} (known: sessionLeaseMs, releaseOnDisconnect, signal, timeoutMs)`,
        );
      }
    }
    const leaseMs =
      opts.sessionLeaseMs === undefined
        ? undefined
        : checkDuration(opts.sessionLeaseMs, 'openSession option sessionLeaseMs');
    const own = this.#connection.session?.leaseMs;
    if (leaseMs !== undefined && own !== undefined && leaseMs < own) {
      throw new InvalidArgumentError(
        `openSession: sessionLeaseMs ${leaseMs} ms is shorter than this client's own session lease (${own} ms), which paces its keep-alives`,
      );
    }
    const releaseOnDisconnect = opts.releaseOnDisconnect ?? false;
    if (typeof releaseOnDisconnect !== 'boolean') {
      throw new InvalidArgumentError(
        `openSession option releaseOnDisconnect must be true or false, got ${describeValue(releaseOnDisconnect)}`,
      );
    }
    const call = this.#adminOptions('openSession', {
      signal: opts.signal,
      timeoutMs: opts.timeoutMs,
    });
    const number = this.#nextSessionNumber++;
    const sentAt = this.#clock.monotonic();
    const opened = await this.#call(
      'openSession',
      [number, leaseMs, releaseOnDisconnect],
      call,
    ).catch((err: unknown) => {
      const code = (err as { code?: unknown }).code;
      if (code === 'TIMEOUT' || code === 'ABORTED') {
        // Opened maybe: closed at once if so (its number is never used again).
        typedCall(this.#connection, number)('closeSession', [], { timeoutMs: 5_000 }).catch(
          () => undefined,
        );
      }
      throw err;
    });
    const session = new LocksmithSession(
      this.#carrier,
      number,
      { ...opened, sentAt },
      typedCall(this.#connection, number),
    );
    this.#carried.set(number, session);
    return session;
  }

  /** A table by name (no round trip: a missing table fails its first call, `TABLE_NOT_FOUND`). */
  table(name: string): RemoteTable {
    return tableNamed(
      this.#tables,
      name,
      () => new RemoteTable(name, this.#tableClient, this.#router),
    );
  }

  async createTable(
    name: string,
    families: readonly ColumnFamilySpec[],
    options: CreateTableOptions = {},
    call?: AdminCallOptions,
  ): Promise<TableDescription> {
    const { signal, timeoutMs = this.#callTimeoutMs } = this.#adminOptions('createTable', call);
    const deadline = this.#clock.monotonic() + timeoutMs;
    for (let pause = 50; ; pause = Math.min(2 * pause, 1000)) {
      const left = deadline - this.#clock.monotonic();
      try {
        return await this.#call('createTable', [name, families, options], {
          signal,
          timeoutMs: Math.max(1, left),
        });
      } catch (err) {
        // A fleet refuses the create while a table of that name, dropped a moment ago, still
        // has regions closing on another member: nothing was made, and the refusal says to try
        // again shortly. Sent again until the call's timeout; any other error is the answer.
        if ((err as { code?: unknown }).code !== 'NOT_SERVING_REGION') throw err;
        if (this.#clock.monotonic() + pause >= deadline) throw err;
        await abortableSleep(pause, signal, this.#clock, 'createTable');
      }
    }
  }

  async listTables(options?: AdminCallOptions): Promise<string[]> {
    return this.#admin('listTables', [], options);
  }

  async describeTable(name: string, options?: AdminCallOptions): Promise<TableDescription> {
    return this.#admin('describeTable', [name], options);
  }

  async dropTable(name: string, options?: AdminCallOptions): Promise<void> {
    await this.#admin('dropTable', [name], options);
  }

  /**
   * Splits table `name` at row `key`, live: the region holding `key` ends there and a new
   * region holds the rows from `key` on (with their row locks). Refused (`INVALID_ARGUMENT`)
   * if the table is split at `key` already. Resolves with the table's new description.
   */
  async splitTable(
    name: string,
    key: BytesInput,
    options?: AdminCallOptions,
  ): Promise<TableDescription> {
    const row = checkRow(key, 'split key');
    const opts = this.#adminOptions('splitTable', options);
    // In a fleet, the server of the region holding `key` splits it.
    return this.#router.run(
      name,
      row,
      (route) => route.client.call('splitTable', [name, row], opts),
      opts.signal,
    );
  }

  /** The server's status (what `GET /status` serves). */
  async status(options?: AdminCallOptions): Promise<ServerStatus> {
    return this.#admin('status', [], options);
  }

  /** A round trip that only renews the session (the client pings by itself when idle). */
  async ping(options?: AdminCallOptions): Promise<void> {
    await this.#admin('ping', [], options);
  }

  /** An administrative call with its options checked: a signal and a timeout, as every call. */
  #admin<
    M extends 'createTable' | 'listTables' | 'describeTable' | 'dropTable' | 'status' | 'ping',
  >(method: M, args: CallArgs<M>, options: AdminCallOptions | undefined): Promise<CallResult<M>> {
    return this.#call(method, args, this.#adminOptions(method, options));
  }

  #adminOptions(
    method: string,
    options: AdminCallOptions | undefined,
  ): { signal: AbortSignal | undefined; timeoutMs?: number } {
    const opts = checkOptionsObject(options ?? {}, `${method} options`);
    for (const key of Object.keys(opts)) {
      if (key !== 'signal' && key !== 'timeoutMs') {
        throw new InvalidArgumentError(
          `${method}: unknown option ${JSON.stringify(key)} (known: signal, timeoutMs)`,
        );
      }
    }
    return {
      signal: checkSignal(opts.signal, `${method} option signal`),
      ...(opts.timeoutMs === undefined
        ? {}
        : { timeoutMs: checkDuration(opts.timeoutMs, `${method} option timeoutMs`) }),
    };
  }

  /**
   * Ends the session (the server releases its locks), and every session opened over this
   * client's connection, and closes the connection. Idempotent.
   */
  async close(): Promise<void> {
    await Promise.all([...this.#carried.values()].map((s) => s.close()));
    this.#locks.clientClosed();
    await this.#router.close();
    await this.#connection.close();
  }
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/**
 * Connects to a locksmith server: `await connect('locksmith://127.0.0.1:7420')`, or to the
 * master among several: `connect('locksmith://h1:7420,h2:7420')`, `connect([url1, url2])`.
 */
export function connect(
  url: string | readonly string[],
  options?: ConnectOptions,
): Promise<LocksmithClient> {
  return LocksmithClient.connect(url, options);
}
