import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { InvalidArgumentError } from '../../src/core/index.js';
import {
  FSDirectory,
  inspectLock,
  type LockInspection,
  NativeFSLockFactory,
  NoLockFactory,
  SimpleFSLockFactory,
} from '../../src/directory/index.js';
import { tempDir } from '../helpers.js';

function reasonOf(inspection: LockInspection): string {
  assert.equal(inspection.state, 'cannot-lock', JSON.stringify(inspection));
  return inspection.state === 'cannot-lock' ? inspection.reason : '';
}

test('inspectLock checks its arguments before looking at anything', () => {
  for (const [dir, options] of [
    ['', undefined],
    ['a\0b', undefined],
    [42, undefined],
    ['/tmp', { name: '../x' }],
    ['/tmp', { name: '' }],
    ['/tmp', { lockFactory: NoLockFactory.INSTANCE }],
    ['/tmp', { lockFactory: 'native' }],
    ['/tmp', 'write.lock'],
  ] as const) {
    assert.throws(
      () => inspectLock(dir as string, options as never),
      InvalidArgumentError,
      JSON.stringify([dir, options]),
    );
  }
});

test('inspectLock: free (no directory, no lock file, unlocked), held in this process, never creating anything', async () => {
  using tmp = tempDir();
  const missing = inspectLock(join(tmp.path, 'a', 'b'));
  assert.equal(missing.state, 'free');
  assert.equal(missing.state === 'free' && missing.detail, 'no-directory');
  const empty = inspectLock(tmp.path);
  assert.deepEqual(empty, {
    state: 'free',
    path: join(tmp.path, 'write.lock'),
    fenceCounter: undefined,
    detail: 'no-lock-file',
  });
  assert.deepEqual(readdirSync(tmp.path), []);

  const directory = await FSDirectory.open(tmp.path);
  const lock = await directory.obtainLock('write.lock');
  try {
    const held = inspectLock(tmp.path);
    assert.equal(held.state, 'held');
    if (held.state === 'held') {
      assert.equal(held.mayBeStale, false);
      assert.ok(held.holders?.some((h) => h.pid === process.pid));
      assert.ok((held.fenceCounter as number) > lock.token);
    }
  } finally {
    await lock.close();
  }
  const after = inspectLock(tmp.path);
  assert.equal(after.state === 'free' && after.detail, 'unlocked');
  assert.ok((after.fenceCounter as number) > lock.token);
});

test('inspectLock: SimpleFS calls an existing lock file held, maybe stale', async () => {
  using tmp = tempDir();
  writeFileSync(join(tmp.path, 'write.lock'), '');
  const seen = inspectLock(tmp.path, { lockFactory: SimpleFSLockFactory.INSTANCE });
  assert.equal(seen.state, 'held');
  assert.ok(seen.state === 'held' && seen.mayBeStale && seen.since instanceof Date);
  const native = inspectLock(tmp.path, { lockFactory: NativeFSLockFactory.INSTANCE });
  assert.equal(native.state, 'free', 'a native lock file nobody locks is free');
});

test('inspectLock: cannot-lock names each reason an obtain would fail on', () => {
  using tmp = tempDir();
  const target = join(tmp.path, 'target');
  writeFileSync(target, '');
  const dir = (name: string) => {
    const path = join(tmp.path, name);
    mkdirSync(path);
    return path;
  };
  assert.equal(reasonOf(inspectLock(target)), 'not-a-directory');
  assert.equal(reasonOf(inspectLock(join(target, 'below'))), 'not-a-directory');
  const link = dir('link');
  symlinkSync(target, join(link, 'write.lock'));
  assert.equal(reasonOf(inspectLock(link)), 'lock-file-symlink');
  const dangling = dir('dangling');
  symlinkSync(join(tmp.path, 'nothing'), join(dangling, 'write.lock'));
  assert.equal(reasonOf(inspectLock(dangling)), 'lock-file-symlink');
  const nested = dir('nested');
  mkdirSync(join(nested, 'write.lock'));
  assert.equal(reasonOf(inspectLock(nested)), 'lock-file-directory');
  assert.equal(
    reasonOf(inspectLock(nested, { lockFactory: SimpleFSLockFactory.INSTANCE })),
    'lock-file-directory',
  );
  const fenceLink = dir('fence-link');
  symlinkSync(target, join(fenceLink, 'write.lock.fence'));
  assert.equal(reasonOf(inspectLock(fenceLink)), 'fence-file-symlink');
  const fenceDir = dir('fence-dir');
  mkdirSync(join(fenceDir, 'custom.fence'));
  assert.equal(reasonOf(inspectLock(fenceDir, { name: 'custom' })), 'fence-file-directory');
  assert.equal(inspectLock(fenceDir).state, 'free', 'only the named lock is inspected');
  const result = inspectLock(link);
  assert.ok(result.state === 'cannot-lock' && result.message.includes(result.path));
});

test('a missing directory the OS will not create (/proc/x) cannot be locked; a creatable one is free and nothing stays', () => {
  const proc = inspectLock('/proc/locksmith-x/sub');
  assert.equal(reasonOf(proc), 'directory-unwritable');
  assert.match(
    proc.state === 'cannot-lock' ? proc.message : '',
    /cannot be created in \/proc: E[A-Z]+/,
  );
  using dir = tempDir();
  const free = inspectLock(join(dir.path, 'a', 'b'));
  assert.equal(free.state, 'free');
  assert.deepEqual(readdirSync(dir.path), [], 'the probe left nothing behind');
});
