import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  AbortedError,
  AlreadyClosedError,
  ConnectionLostError,
  DeadlockError,
  ERROR_CODES,
  errorFromCode,
  FencedError,
  InternalError,
  InvalidArgumentError,
  LimitExceededError,
  LockIOError,
  LockLostError,
  LockObtainFailedError,
  LockReleaseFailedError,
  type LocksmithError,
  type LocksmithErrorCode,
  LockTimeoutError,
  LockViolationError,
  NotMasterError,
  NotServingRegionError,
  ProtocolError,
  StaleTokenError,
  TableError,
  UnauthenticatedError,
  UnknownRowLockError,
  UnsupportedOperationError,
} from '../../src/core/errors.js';
import { decode, encode } from '../../src/wire/codec.js';
import { parseServerMessage, ServerKind } from '../../src/wire/messages.js';
import { errorFrame, fromWireError } from '../../src/wire/wire-error.js';
import { repoRoot } from '../helpers.js';

// Written out here, apart from the table in src/core/errors.ts, so a change to either shows.
const EXPECTED: Record<LocksmithErrorCode, abstract new (...args: never[]) => LocksmithError> = {
  INVALID_ARGUMENT: InvalidArgumentError,
  IO_ERROR: LockIOError,
  LOCK_OBTAIN_FAILED: LockObtainFailedError,
  LOCK_TIMEOUT: LockTimeoutError,
  LOCK_RELEASE_FAILED: LockReleaseFailedError,
  ALREADY_CLOSED: AlreadyClosedError,
  LOCK_LOST: LockLostError,
  LEASE_EXPIRED: LockLostError,
  LOCK_UNCONFIRMED: LockLostError,
  SESSION_EXPIRED: LockLostError,
  MASTER_CHANGED: LockLostError,
  ABORTED: AbortedError,
  UNSUPPORTED_OPERATION: UnsupportedOperationError,
  PROTOCOL_ERROR: ProtocolError,
  LOCK_VIOLATION: LockViolationError,
  UNKNOWN_ROW_LOCK: UnknownRowLockError,
  DEADLOCK: DeadlockError,
  STALE_TOKEN: StaleTokenError,
  CONNECTION_LOST: ConnectionLostError,
  UNAUTHENTICATED: UnauthenticatedError,
  LIMIT_EXCEEDED: LimitExceededError,
  TABLE_NOT_FOUND: TableError,
  TABLE_EXISTS: TableError,
  FENCED: FencedError,
  NOT_MASTER: NotMasterError,
  NOT_SERVING_REGION: NotServingRegionError,
  INTERNAL: InternalError,
};

const RETRYABLE = new Set([
  'LOCK_TIMEOUT',
  'DEADLOCK',
  'LIMIT_EXCEEDED',
  'NOT_MASTER',
  'NOT_SERVING_REGION',
]);

function* sources(dir: string): Generator<[string, string]> {
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile() && e.name.endsWith('.ts')) {
      const path = join(e.parentPath, e.name);
      yield [path.slice(repoRoot.length + 1), readFileSync(path, 'utf8')];
    }
  }
}

describe('one class per error code', () => {
  it('every code makes its class, with its code and retryable flag', () => {
    assert.deepEqual([...ERROR_CODES].sort(), Object.keys(EXPECTED).sort());
    for (const code of ERROR_CODES) {
      const err = errorFromCode(code, `m ${code}`, { cause: 'c' });
      assert.ok(err instanceof EXPECTED[code], `${code}: ${err.constructor.name}`);
      assert.equal(err.constructor, EXPECTED[code], code);
      assert.equal(err.code, code);
      assert.equal(err.message, `m ${code}`);
      assert.equal(err.cause, 'c');
      assert.equal(err.retryable, RETRYABLE.has(code), code);
    }
  });

  it('a remote error has the class, code, message and retryable flag of the local one', () => {
    for (const code of ERROR_CODES) {
      const local = errorFromCode(code, `m ${code}`);
      // Through the real frame: the server's encoder, MessagePack, the client's parser.
      const frame = decode(encode(errorFrame(7, local))) as unknown[];
      const message = parseServerMessage(frame);
      assert.equal(message.kind, ServerKind.ERROR);
      if (message.kind !== ServerKind.ERROR) continue;
      assert.equal(message.retryable, local.retryable, code);
      const remote = fromWireError(message.code, message.message);
      assert.equal(remote.constructor, local.constructor, code);
      assert.equal(remote.code, code);
      assert.equal(remote.message, local.message);
      assert.equal(remote.retryable, local.retryable);
    }
  });

  it('a NOT_MASTER keeps where the master is; an error that is not ours is INTERNAL', () => {
    const frame = errorFrame(0, new NotMasterError('slave', { master: 'h:1' }));
    assert.deepEqual(frame.slice(2), ['NOT_MASTER', 'slave', true, { master: 'h:1' }]);
    assert.deepEqual(errorFrame(3, new TypeError('boom')).slice(2), [
      'INTERNAL',
      'Internal server error: boom',
      false,
    ]);
    assert.ok(fromWireError('NO_SUCH_CODE', 'x') instanceof InternalError);
  });

  it('no code in src/ is raised with another class than its own', () => {
    const offenders: string[] = [];
    for (const [path, text] of sources(join(repoRoot, 'src'))) {
      // The base class is abstract in spirit: a bare one is not `instanceof` its code's class.
      for (const m of text.matchAll(/new LocksmithError\(/g)) offenders.push(`${path}@${m.index}`);
      // A code handed to a class that is not that code's (LockIOError with LOCK_RELEASE_FAILED).
      for (const m of text.matchAll(/new (\w+Error)\((?:(?!new )[^;])*?\bcode: '([A-Z_]+)'/g)) {
        const [, cls, code] = m as unknown as [string, string, LocksmithErrorCode];
        if (EXPECTED[code] !== undefined && EXPECTED[code].name !== cls) {
          offenders.push(`${path}: new ${cls}(… code '${code}')`);
        }
      }
    }
    assert.deepEqual(offenders, []);
  });
});
