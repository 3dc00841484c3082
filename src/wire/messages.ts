import { ProtocolError } from '../core/errors.js';
import { describeValue } from '../core/options.js';

/** The protocol version this code speaks; a HELLO asking for another gets an error and a close. */
export const PROTOCOL_VERSION = 1;

/** First element of every client → server message. */
export const ClientKind = { HELLO: 0, CALL: 1, CANCEL: 2 } as const;
/** First element of every server → client message. */
export const ServerKind = { WELCOME: 0, RESULT: 1, ERROR: 2, NOTICE: 3 } as const;

/**
 * Call ids are chosen by the client: integers 1..2^32-1, unique among its calls in flight. So
 * are the numbers of the sessions a connection carries besides its own (`openSession`).
 */
export const MAX_CALL_ID = 0xffff_ffff;

/** What a client asks for in its HELLO (every member optional). */
export interface HelloOptions {
  /** The shared secret, when the server was started with `--token-file`. */
  token?: string | undefined;
  /** Resume this session (its id from an earlier WELCOME) instead of opening a new one. */
  session?: string | undefined;
  /** The session's lease: how long it outlives silence (server-bounded). */
  sessionLeaseMs?: number | undefined;
  /** End the session (releasing its locks) the moment this connection closes. */
  releaseOnDisconnect?: boolean | undefined;
  /** A name for logs and status pages. */
  client?: string | undefined;
  /**
   * With `session`: the `epoch` of the WELCOME that opened it. A server of another epoch (a
   * new master after a failover) answers `ERROR 0 MASTER_CHANGED` instead of resuming.
   */
  epoch?: number | undefined;
}

/** What the server answers a successful HELLO with. */
export interface Welcome {
  session: string;
  resumed: boolean;
  sessionLeaseMs: number;
  lockLeaseMs: number;
  /** How long a lock call waits for its row unless it says otherwise. */
  rowLockWaitMs: number;
  maxFrameBytes: number;
  maxInFlight: number;
  server: string;
  /** On resume: `[lockId, table]` of each row lock the session still holds (the others were lost). */
  locks: [string, string][];
  /** The master's mastership token (its epoch); 0 for a server that runs without `--ha`. */
  epoch: number;
  /** `'standalone'` (no `--ha`) or `'master'`; a slave refuses the HELLO (`NOT_MASTER`). */
  role: 'standalone' | 'master';
}

/** A decoded client message, its shape checked (the arguments are checked by each call). */
export type ClientMessage =
  | { kind: typeof ClientKind.HELLO; protocol: number; options: HelloOptions }
  | {
      kind: typeof ClientKind.CALL;
      id: number;
      method: string;
      args: unknown[];
      /** The session the call is made in, by the number the client gave it (`openSession`); absent: the connection's own. */
      session: number | undefined;
    }
  | { kind: typeof ClientKind.CANCEL; id: number };

/** A decoded server message, its shape checked. */
export type ServerMessage =
  | { kind: typeof ServerKind.WELCOME; protocol: number; welcome: Record<string, unknown> }
  | { kind: typeof ServerKind.RESULT; id: number; value: unknown }
  | {
      kind: typeof ServerKind.ERROR;
      id: number;
      code: unknown;
      message: unknown;
      retryable: boolean;
      /** Optional sixth element: `{ master?: 'host:port' }` with `NOT_MASTER`. */
      details: Record<string, unknown> | undefined;
    }
  | { kind: typeof ServerKind.NOTICE; notice: string; data: unknown };

function isCallId(id: unknown): id is number {
  return typeof id === 'number' && Number.isInteger(id) && id >= 1 && id <= MAX_CALL_ID;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    !(value instanceof Uint8Array)
  );
}

/** Checks the envelope of a message from a client; `PROTOCOL_ERROR` names what is wrong. */
export function parseClientMessage(value: unknown): ClientMessage {
  if (!Array.isArray(value) || value.length === 0) {
    throw new ProtocolError('A message must be a non-empty MessagePack array');
  }
  const [kind, a, b, c] = value as unknown[];
  switch (kind) {
    case ClientKind.HELLO:
      if (value.length !== 3 || typeof a !== 'number' || !isPlainObject(b)) {
        throw new ProtocolError('HELLO is [0, protocol, {options}]');
      }
      return { kind, protocol: a, options: parseHelloOptions(b) };
    case ClientKind.CALL: {
      const session = value[4];
      if (
        (value.length !== 4 && value.length !== 5) ||
        !isCallId(a) ||
        typeof b !== 'string' ||
        !Array.isArray(c) ||
        (value.length === 5 && !isCallId(session))
      ) {
        throw new ProtocolError(
          'CALL is [1, callId (1..2^32-1), method, [args], session number (1..2^32-1)?]',
        );
      }
      return { kind, id: a, method: b, args: c, session: session as number | undefined };
    }
    case ClientKind.CANCEL:
      if (value.length !== 2 || !isCallId(a)) throw new ProtocolError('CANCEL is [2, callId]');
      return { kind, id: a };
    default:
      throw new ProtocolError(`Unknown message kind ${describeValue(kind)}`);
  }
}

const HELLO_KEYS = new Set([
  'token',
  'session',
  'sessionLeaseMs',
  'releaseOnDisconnect',
  'client',
  'epoch',
]);

function parseHelloOptions(raw: Record<string, unknown>): HelloOptions {
  for (const key of Object.keys(raw)) {
    if (!HELLO_KEYS.has(key))
      throw new ProtocolError(`HELLO: unknown option ${JSON.stringify(key)}`);
  }
  const { token, session, sessionLeaseMs, releaseOnDisconnect, client, epoch } = raw;
  const out: HelloOptions = {};
  if (token != null) {
    if (typeof token !== 'string' || token.length > 4096)
      throw new ProtocolError('HELLO: token must be a string of at most 4096 characters');
    out.token = token;
  }
  if (session != null) {
    if (typeof session !== 'string' || session.length > 128)
      throw new ProtocolError('HELLO: session must be a session id string');
    out.session = session;
  }
  if (sessionLeaseMs != null) {
    if (
      typeof sessionLeaseMs !== 'number' ||
      !Number.isSafeInteger(sessionLeaseMs) ||
      sessionLeaseMs < 0
    ) {
      throw new ProtocolError('HELLO: sessionLeaseMs must be a non-negative integer');
    }
    out.sessionLeaseMs = sessionLeaseMs;
  }
  if (releaseOnDisconnect != null) {
    if (typeof releaseOnDisconnect !== 'boolean')
      throw new ProtocolError('HELLO: releaseOnDisconnect must be a boolean');
    out.releaseOnDisconnect = releaseOnDisconnect;
  }
  if (client != null) {
    if (typeof client !== 'string' || client.length > 256)
      throw new ProtocolError('HELLO: client must be a string of at most 256 characters');
    out.client = client;
  }
  if (epoch != null) {
    if (typeof epoch !== 'number' || !Number.isSafeInteger(epoch) || epoch < 0)
      throw new ProtocolError('HELLO: epoch must be a non-negative integer');
    out.epoch = epoch;
  }
  return out;
}

/** Checks the envelope of a message from a server. */
export function parseServerMessage(value: unknown): ServerMessage {
  if (!Array.isArray(value) || value.length === 0) {
    throw new ProtocolError('A server message must be a non-empty MessagePack array');
  }
  const [kind, a, b, c, d, e] = value as unknown[];
  switch (kind) {
    case ServerKind.WELCOME:
      if (typeof a !== 'number' || !isPlainObject(b)) throw new ProtocolError('Malformed WELCOME');
      return { kind, protocol: a, welcome: b };
    case ServerKind.RESULT:
      if (!isCallId(a)) throw new ProtocolError('Malformed RESULT');
      return { kind, id: a, value: b };
    case ServerKind.ERROR:
      if (typeof a !== 'number' || !Number.isInteger(a) || a < 0 || a > MAX_CALL_ID)
        throw new ProtocolError('Malformed ERROR');
      return {
        kind,
        id: a,
        code: b,
        message: c,
        retryable: d === true,
        details: isPlainObject(e) ? e : undefined,
      };
    case ServerKind.NOTICE:
      if (typeof a !== 'string') throw new ProtocolError('Malformed NOTICE');
      return { kind, notice: a, data: b };
    default:
      throw new ProtocolError(`Unknown server message kind ${describeValue(kind)}`);
  }
}
