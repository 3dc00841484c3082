// Each subpath re-exports the error classes its functions throw, so a caller can catch by class
// with one import. Imported through the package name (self-reference through package.json
// "exports", resolved to dist/), so this checks what a user of the package sees.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as core from 'locksmith-locks';
import * as client from 'locksmith-locks/client';
import * as directory from 'locksmith-locks/directory';
import * as rows from 'locksmith-locks/rows';
import * as server from 'locksmith-locks/server';
import * as store from 'locksmith-locks/store';

const expected: Record<string, Record<string, unknown>> = {
  'locksmith-locks/directory': directory,
  'locksmith-locks/store': store,
  'locksmith-locks/rows': rows,
  'locksmith-locks/client': client,
  'locksmith-locks/server': server,
};

/** What the functions of every subpath can throw. */
const everywhere = [
  'LocksmithError',
  'LockLostError',
  'AbortedError',
  'AlreadyClosedError',
  'InvalidArgumentError',
  'LockIOError',
  'LockObtainFailedError',
];

const required: Record<string, string[]> = {
  'locksmith-locks/directory': [
    ...everywhere,
    'LockReleaseFailedError',
    'LockTimeoutError',
    'LockViolationError',
    'ProtocolError',
    'UnsupportedOperationError',
  ],
  'locksmith-locks/store': [...everywhere, 'UnsupportedOperationError'],
  'locksmith-locks/rows': [
    ...everywhere,
    'DeadlockError',
    'LockTimeoutError',
    'UnknownRowLockError',
    'StaleTokenError',
  ],
  'locksmith-locks/client': [
    ...everywhere,
    'ConnectionLostError',
    'DeadlockError',
    'LockTimeoutError',
    'NotMasterError',
    'ProtocolError',
    'StaleTokenError',
    'TableError',
    'UnknownRowLockError',
  ],
  'locksmith-locks/server': [...everywhere, 'TableError'],
};

for (const [subpath, names] of Object.entries(required)) {
  test(`${subpath} exports the error classes its functions throw, identical to core's`, () => {
    const mod = expected[subpath] as Record<string, unknown>;
    const coreMod = core as unknown as Record<string, unknown>;
    for (const name of names) {
      assert.equal(typeof mod[name], 'function', `${subpath} lacks ${name}`);
      assert.equal(mod[name], coreMod[name], `${subpath}'s ${name} is not core's class`);
    }
  });
}

test('every error class a subpath exports is the one core exports', () => {
  const coreMod = core as unknown as Record<string, unknown>;
  for (const [subpath, mod] of Object.entries(expected)) {
    for (const [name, value] of Object.entries(mod)) {
      if (!name.endsWith('Error') || !(name in coreMod)) continue;
      assert.equal(value, coreMod[name], `${subpath}'s ${name} differs from core's`);
    }
  }
});

test('a caught directory error is an instance of the class the subpath exports', async () => {
  const dir = new directory.ByteBuffersDirectory();
  const lock = await dir.obtainLock('write.lock');
  await assert.rejects(dir.obtainLock('write.lock'), directory.LockObtainFailedError);
  await lock.close();
  await dir.close();
});

test('the singleton factories refuse a second instance at run time, as their types do', () => {
  const singletons = [
    directory.SimpleFSLockFactory,
    directory.NativeFSLockFactory,
    directory.NoLockFactory,
  ] as const;
  for (const cls of singletons) {
    assert.ok(cls.INSTANCE instanceof cls, `${cls.name}.INSTANCE`);
    // The constructor is private to the type checker; plain JavaScript must not get around it.
    const ctor = cls as unknown as new () => unknown;
    assert.throws(
      () => new ctor(),
      (err: unknown) =>
        err instanceof directory.UnsupportedOperationError &&
        err.code === 'UNSUPPORTED_OPERATION' &&
        err.message.includes(`${cls.name}.INSTANCE`),
    );
  }
});

test('locksmith/client has the client and the values a Table takes, the same classes as locksmith/rows', () => {
  assert.equal(typeof client.connect, 'function');
  assert.equal(typeof client.RemoteTable, 'function');
  for (const name of ['Put', 'Get', 'Scan', 'Delete', 'Increment', 'RowMutations', 'Result']) {
    assert.equal(
      (client as Record<string, unknown>)[name],
      (rows as Record<string, unknown>)[name],
      name,
    );
  }
});

test('locksmith/rows still connects (the client loads on the first call)', () => {
  assert.equal(typeof rows.connect, 'function');
});
