import assert from 'node:assert/strict';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { InvalidArgumentError } from '../../src/core/index.js';
import {
  acquireLock,
  ByteBuffersDirectory,
  type Directory,
  FSDirectory,
  type LockFactory,
  NativeFSLockFactory,
  SimpleFSLockFactory,
  SingleInstanceLockFactory,
  SleepingLockWrapper,
  withLock,
} from '../../src/directory/index.js';
import { tempDir } from '../helpers.js';

/**
 * Every public option of the directory entry points is checked before anything happens: a
 * hostile value is an InvalidArgumentError (INVALID_ARGUMENT) naming the option, and nothing
 * is created, locked or left half-done. Each case runs against a directory that was deleted
 * after it was opened: an obtain that went ahead would recreate it (and its lock file).
 */

const hostileSignals: [string, unknown][] = [
  ['an AbortController', new AbortController()],
  ['a plain object', { aborted: false }],
  ['a string', 'signal'],
  ['null', null],
  ['a number', 1],
];
const hostileTimeouts: [string, unknown][] = [
  ['NaN', Number.NaN],
  ['negative', -1],
  ['a numeric string', '10'],
  ['past 2^31-1 ms', 2 ** 31],
  ['-Infinity', Number.NEGATIVE_INFINITY],
  ['null', null],
  ['an object', {}],
];
const hostileClocks: [string, unknown][] = [
  ['null', null],
  ['an empty object', {}],
  ['a number', 5],
  ['half a clock', { monotonic: () => 0 }],
];
const hostileNames: [string, unknown][] = [
  ['empty', ''],
  ['..', '..'],
  ['a path', 'a/write.lock'],
  ['NUL', 'write\0.lock'],
  ['a number', 5],
  ['null', null],
  ['an object', { toString: () => 'write.lock' }],
];
const hostileOptions: [string, unknown][] = [
  ['a number', 5],
  ['a string', 'write.lock'],
  ['an array', []],
  ['null', null],
];

function isInvalid(pattern?: RegExp) {
  return (err: unknown) => {
    assert.ok(err instanceof InvalidArgumentError, `InvalidArgumentError, got ${String(err)}`);
    assert.equal(err.code, 'INVALID_ARGUMENT');
    if (pattern !== undefined) assert.match(err.message, pattern);
    return true;
  };
}

/** An FSDirectory whose path no longer exists: any obtain would recreate it. */
async function vanished(
  tmp: string,
  factory: LockFactory = NativeFSLockFactory.INSTANCE,
): Promise<{ dir: FSDirectory; untouched: () => void }> {
  const path = join(tmp, 'index');
  const dir = await FSDirectory.open(path, factory);
  rmSync(path, { recursive: true });
  return {
    dir,
    untouched: () => assert.equal(existsSync(path), false, 'nothing was created'),
  };
}

type Entry = (dir: Directory, options: unknown) => Promise<unknown>;
const waitingEntries: [string, Entry][] = [
  ['acquireLock', (dir, options) => acquireLock(dir, options as never)],
  ['withLock', (dir, options) => withLock(dir, () => 'ran', options as never)],
];

for (const [entry, call] of waitingEntries) {
  test(`${entry}: hostile options are refused before anything is touched`, async () => {
    using tmp = tempDir();
    const { dir, untouched } = await vanished(tmp.path);
    const cases: [string, unknown, RegExp][] = [
      ...hostileSignals.map(
        ([what, v]) => [`signal ${what}`, { signal: v }, /signal/] as [string, unknown, RegExp],
      ),
      ...hostileTimeouts.map(
        ([what, v]) =>
          [`timeoutMs ${what}`, { timeoutMs: v }, /timeoutMs/] as [string, unknown, RegExp],
      ),
      ...hostileClocks.map(
        ([what, v]) => [`clock ${what}`, { clock: v }, /clock/] as [string, unknown, RegExp],
      ),
      ...hostileNames.map(
        ([what, v]) => [`name ${what}`, { name: v }, /lock name/] as [string, unknown, RegExp],
      ),
      ...hostileOptions.map(
        ([what, v]) => [`options ${what}`, v, /options/] as [string, unknown, RegExp],
      ),
    ];
    for (const [what, options, pattern] of cases) {
      await assert.rejects(call(dir, options), isInvalid(pattern), `${entry} with ${what}`);
      untouched();
    }
  });

  test(`${entry}: a directory that is not a Directory is refused`, async () => {
    for (const bad of [null, undefined, '/tmp', {}, { lockFactory: {} }]) {
      await assert.rejects(call(bad as never, undefined), isInvalid(/Directory/));
    }
  });
}

test('acquireLock: the AbortController mistake is named in the message', async () => {
  using tmp = tempDir();
  const { dir } = await vanished(tmp.path);
  await assert.rejects(
    acquireLock(dir, { signal: new AbortController() as never }),
    isInvalid(/an AbortController was passed: pass its \.signal/),
  );
});

test('withLock: fn must be a function, checked before the lock is taken', async () => {
  using tmp = tempDir();
  const { dir, untouched } = await vanished(tmp.path);
  for (const bad of [undefined, null, 'fn', {}, 42]) {
    await assert.rejects(withLock(dir, bad as never), isInvalid(/withLock needs a function/));
    untouched();
  }
  // The options-first order is not accepted either: the second argument is the function.
  await assert.rejects(withLock(dir, { timeoutMs: 10 } as never, (() => 1) as never), isInvalid());
  untouched();
});

test('acquireLock and withLock accept Infinity as "wait forever" and MAX_DURATION_MS', async () => {
  using tmp = tempDir();
  const dir = await FSDirectory.open(tmp.path);
  await (await acquireLock(dir, { timeoutMs: Number.POSITIVE_INFINITY })).close();
  assert.equal(await withLock(dir, () => 'ran', { timeoutMs: 2 ** 31 - 1 }), 'ran');
});

for (const [label, factory] of [
  ['native', NativeFSLockFactory.INSTANCE],
  ['simple', SimpleFSLockFactory.INSTANCE],
] as const) {
  test(`${label}: obtainLock refuses hostile names and options, touching nothing`, async () => {
    using tmp = tempDir();
    const { dir, untouched } = await vanished(tmp.path, factory);
    for (const [what, name] of hostileNames) {
      await assert.rejects(dir.obtainLock(name as never), isInvalid(/lock name/), `name ${what}`);
      await assert.rejects(
        factory.obtainLock(dir, name as never),
        isInvalid(/lock name/),
        `factory, name ${what}`,
      );
      untouched();
    }
    for (const [what, signal] of hostileSignals) {
      await assert.rejects(
        dir.obtainLock('write.lock', { signal } as never),
        isInvalid(/signal/),
        `signal ${what}`,
      );
      untouched();
    }
    for (const [what, options] of hostileOptions) {
      await assert.rejects(
        dir.obtainLock('write.lock', options as never),
        isInvalid(/options/),
        `options ${what}`,
      );
      untouched();
    }
    for (const bad of [null, undefined, {}, '/tmp']) {
      await assert.rejects(factory.obtainLock(bad as never, 'write.lock'), isInvalid(/Directory/));
    }
  });
}

test('single-instance: hostile directories, names and options are refused, nothing is held', async () => {
  const factory = new SingleInstanceLockFactory();
  const dir = new ByteBuffersDirectory(factory);
  for (const bad of [null, undefined, {}, 'dir']) {
    await assert.rejects(factory.obtainLock(bad as never, 'write.lock'), isInvalid(/Directory/));
  }
  for (const [, name] of hostileNames) {
    await assert.rejects(dir.obtainLock(name as never), isInvalid(/lock name/));
  }
  for (const [, signal] of hostileSignals) {
    await assert.rejects(dir.obtainLock('write.lock', { signal } as never), isInvalid(/signal/));
  }
  assert.equal(factory.isHeldElsewhere(dir, 'write.lock'), false, 'nothing was obtained');
});

test('SleepingLockWrapper: hostile constructor values are refused', async () => {
  const inner = new ByteBuffersDirectory();
  const cases: [string, () => unknown, RegExp][] = [
    ['lockWaitTimeout NaN', () => new SleepingLockWrapper(inner, Number.NaN), /lockWaitTimeout/],
    [
      'lockWaitTimeout string',
      () => new SleepingLockWrapper(inner, '10' as never),
      /lockWaitTimeout/,
    ],
    ['lockWaitTimeout -2', () => new SleepingLockWrapper(inner, -2), /lockWaitTimeout/],
    ['pollInterval NaN', () => new SleepingLockWrapper(inner, 100, Number.NaN), /pollInterval/],
    [
      'pollInterval string',
      () => new SleepingLockWrapper(inner, 100, '10' as never),
      /pollInterval/,
    ],
    ['pollInterval past 2^31-1', () => new SleepingLockWrapper(inner, -1, 2 ** 31), /pollInterval/],
    ['pollInterval 0 with a timeout', () => new SleepingLockWrapper(inner, 100, 0), /pollInterval/],
    ['clock null', () => new SleepingLockWrapper(inner, 100, 10, null as never), /clock/],
    ['clock {}', () => new SleepingLockWrapper(inner, 100, 10, {} as never), /clock/],
    ['delegate null', () => new SleepingLockWrapper(null as never, 100), /Directory/],
  ];
  for (const [what, make, pattern] of cases) {
    assert.throws(make, isInvalid(pattern), what);
  }
});

test('SleepingLockWrapper.obtainLock: hostile signals and names are refused before the first attempt', async () => {
  using tmp = tempDir();
  const { dir, untouched } = await vanished(tmp.path);
  const wrapper = new SleepingLockWrapper(dir, 1000, 10);
  for (const [what, signal] of hostileSignals) {
    await assert.rejects(
      wrapper.obtainLock('write.lock', { signal } as never),
      isInvalid(/signal/),
      `signal ${what}`,
    );
    untouched();
  }
  for (const [what, name] of hostileNames) {
    await assert.rejects(wrapper.obtainLock(name as never), isInvalid(/lock name/), what);
    untouched();
  }
});

test('FSDirectory.open: hostile paths and lock factories are refused before anything is created', async () => {
  using tmp = tempDir();
  const target = join(tmp.path, 'new-index');
  for (const path of ['', 'a\0b', 5, null, undefined, {}, 10n, Symbol('x')]) {
    await assert.rejects(FSDirectory.open(path as never), isInvalid(/directory path/));
  }
  for (const factory of [null, {}, 'native', SimpleFSLockFactory]) {
    await assert.rejects(FSDirectory.open(target, factory as never), isInvalid(/lock factory/));
  }
  assert.deepEqual(readdirSync(tmp.path), [], 'nothing was created');
});
