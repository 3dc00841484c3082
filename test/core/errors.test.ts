import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  AbortedError,
  AlreadyClosedError,
  InvalidArgumentError,
  LockIOError,
  LockObtainFailedError,
  LockReleaseFailedError,
  LocksmithError,
  LockTimeoutError,
} from '../../src/core/index.js';

test('errors carry stable codes, names and causes', () => {
  const cause = new Error('os');
  const cases: [LocksmithError, string][] = [
    [new InvalidArgumentError('x'), 'INVALID_ARGUMENT'],
    [new LockIOError('x', { cause }), 'IO_ERROR'],
    [new LockObtainFailedError('x'), 'LOCK_OBTAIN_FAILED'],
    [new LockTimeoutError('x'), 'LOCK_TIMEOUT'],
    [new LockReleaseFailedError('x'), 'LOCK_RELEASE_FAILED'],
    [new AlreadyClosedError('x'), 'ALREADY_CLOSED'],
    [new AbortedError('x'), 'ABORTED'],
  ];
  for (const [err, code] of cases) {
    assert.ok(err instanceof LocksmithError);
    assert.ok(err instanceof Error);
    assert.equal(err.code, code);
  }
  assert.equal(new LockIOError('x', { cause }).cause, cause);
  assert.equal(new LockObtainFailedError('x').name, 'LockObtainFailedError');
  assert.equal(new AbortedError('x').name, 'AbortError');
});

test('conformance D7: obtain and release failures are I/O errors, AlreadyClosed is not', () => {
  assert.ok(new LockObtainFailedError('x') instanceof LockIOError);
  assert.ok(new LockTimeoutError('x') instanceof LockObtainFailedError);
  assert.ok(new LockReleaseFailedError('x') instanceof LockIOError);
  assert.ok(!(new AlreadyClosedError('x') instanceof LockIOError));
});
