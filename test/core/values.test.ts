import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkPositiveDuration } from '../../src/core/duration.js';
import {
  checkCallback,
  checkClock,
  checkDuration,
  checkOptionsObject,
  checkSignal,
  FencingGate,
  MAX_DURATION_MS,
  nextFencingToken,
  parseDuration,
  systemClock,
  validateLockName,
} from '../../src/core/index.js';
import { hasMethods } from '../../src/core/options.js';
import { sleep } from '../helpers.js';

test('parseDuration accepts units and rejects nonsense', () => {
  assert.equal(parseDuration('500ms'), 500);
  assert.equal(parseDuration('2s'), 2000);
  assert.equal(parseDuration('1m'), 60_000);
  assert.equal(parseDuration('1.5s'), 1500);
  assert.equal(parseDuration(250), 250);
  assert.equal(parseDuration(0), 0);
  // A bare number in a string is ambiguous (2 ms? 2 s?): refused, with an example.
  assert.throws(() => parseDuration('2', '--wait'), {
    code: 'INVALID_ARGUMENT',
    message: /--wait "2": a duration needs a unit, like 2s or 2ms/,
  });
  for (const bad of ['', '-1s', 'abc', '1 day', '1e3', 'NaN', '250']) {
    assert.throws(() => parseDuration(bad, '--wait'), {
      code: 'INVALID_ARGUMENT',
      message: /--wait/,
    });
  }
  for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
    assert.throws(() => parseDuration(bad), { code: 'INVALID_ARGUMENT' });
  }
});

test('durations past the longest timer Node can set are refused with the maximum named', () => {
  assert.equal(checkDuration(MAX_DURATION_MS), MAX_DURATION_MS);
  assert.throws(() => parseDuration('600h', '--lease'), {
    code: 'INVALID_ARGUMENT',
    message:
      /--lease 2160000000 ms: the longest duration allowed is 2147483647 ms \(about 24\.8 days\)/,
  });
  assert.throws(() => checkDuration(MAX_DURATION_MS + 1, 'lease'), {
    code: 'INVALID_ARGUMENT',
    message: /lease/,
  });
});

test('a system-clock timer longer than Node allows fires late, never at once', async () => {
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(w.name);
  process.on('warning', onWarning);
  try {
    let fired = false;
    const cancel = systemClock.setTimer?.(MAX_DURATION_MS * 3, () => {
      fired = true;
    });
    const controller = new AbortController();
    const sleeping = systemClock.sleep(MAX_DURATION_MS + 10, controller.signal);
    await sleep(50);
    assert.equal(fired, false);
    controller.abort(new Error('enough'));
    await assert.rejects(sleeping, /enough/);
    cancel?.();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(warnings, []);
  } finally {
    process.off('warning', onWarning);
  }
});

test('lock names are single path components of at most 255 bytes', () => {
  assert.equal(validateLockName('write.lock'), 'write.lock');
  assert.equal(validateLockName('x'.repeat(255)), 'x'.repeat(255));
  const bad: [unknown, RegExp][] = [
    ['', /empty/],
    ['.', /not file names/],
    ['..', /not file names/],
    ['a/b', /separator/],
    ['a\\b', /separator/],
    ['a\0b', /NUL/],
    ['x'.repeat(256), /256 bytes/],
    ['é'.repeat(128), /256 bytes/],
    [42, /expected a string/],
  ];
  for (const [name, message] of bad) {
    assert.throws(() => validateLockName(name), { code: 'INVALID_ARGUMENT', message });
  }
});

test('fencing tokens strictly increase even when the stored value is lost or the clock is behind', () => {
  const wall = 1_800_000_000_000;
  const first = nextFencingToken(undefined, wall);
  assert.equal(first, wall * 1000);
  const second = nextFencingToken(first, wall);
  assert.equal(second, first + 1);
  // Clock went back: the stored value still wins.
  assert.equal(nextFencingToken(second, wall - 60_000), second + 1);
  // Stored value lost: the clock floor is later than any earlier grant.
  assert.ok(nextFencingToken(undefined, wall + 1) > second);
  // Garbage previous value falls back to the floor.
  assert.equal(nextFencingToken(Number.NaN, wall), wall * 1000);
});

test('a fencing gate rejects older tokens and admits equal or newer ones', () => {
  const gate = new FencingGate();
  gate.admit(10, 'row1');
  gate.admit(10, 'row1');
  gate.admit(12, 'row1');
  assert.throws(() => gate.admit(11, 'row1'), {
    code: 'STALE_TOKEN',
    message: /11 for row1 is older than 12/,
  });
  assert.equal(gate.highest, 12);
});

test('a fencing gate refuses malformed tokens without moving its floor', () => {
  const gate = new FencingGate();
  gate.admit(12, 'row1');
  const hostile: unknown[] = [
    Number.NaN,
    undefined,
    null,
    Number.POSITIVE_INFINITY,
    Number.NEGATIVE_INFINITY,
    -1,
    1.5,
    2 ** 53,
    '13',
    {},
    { valueOf: () => 99 },
    [13],
    13n,
  ];
  for (const token of hostile) {
    assert.throws(() => gate.admit(token as number, 'row1'), {
      code: 'INVALID_ARGUMENT',
      message: /Fencing token for row1 must be a safe integer >= 0/,
    });
    assert.equal(gate.highest, 12);
  }
  // The floor still holds against a stale token after every refusal.
  assert.throws(() => gate.admit(11, 'row1'), { code: 'STALE_TOKEN' });
  assert.throws(() => new FencingGate(Number.NaN), { code: 'INVALID_ARGUMENT' });
  const seeded = new FencingGate(100);
  assert.throws(() => seeded.admit(99), { code: 'STALE_TOKEN' });
});

test('a fencing gate can check without recording, and learn of grants without a write', () => {
  const gate = new FencingGate();
  gate.observe(10);
  gate.check(10, 'row1');
  gate.check(15, 'row1');
  // A checked write moves nothing: the holder of 10 still passes.
  assert.equal(gate.highest, 10);
  assert.throws(() => gate.check(9, 'row1'), {
    code: 'STALE_TOKEN',
    message: /9 for row1 is older than 10/,
  });
  gate.observe(7);
  assert.equal(gate.highest, 10);
  gate.observe(12);
  assert.throws(() => gate.check(10, 'row1'), { code: 'STALE_TOKEN' });
  for (const token of [Number.NaN, -1, '13', 1.5] as unknown as number[]) {
    assert.throws(() => gate.check(token, 'row1'), { code: 'INVALID_ARGUMENT' });
    assert.throws(() => gate.observe(token), { code: 'INVALID_ARGUMENT' });
  }
  assert.equal(gate.highest, 12);
});

test('option checks name the option and refuse look-alikes', () => {
  const controller = new AbortController();
  assert.equal(checkSignal(undefined), undefined);
  assert.equal(checkSignal(controller.signal), controller.signal);
  assert.throws(() => checkSignal(controller), {
    code: 'INVALID_ARGUMENT',
    message:
      /signal must be an AbortSignal, got an object \(AbortController\) \(an AbortController was passed: pass its \.signal\)/,
  });
  for (const bad of [{}, 'x', 1, { aborted: false, addEventListener() {} }]) {
    assert.throws(() => checkSignal(bad, 'options.signal'), {
      code: 'INVALID_ARGUMENT',
      message: /options\.signal/,
    });
  }
  assert.throws(() => checkClock({ monotonic: () => 0 } as never), { code: 'INVALID_ARGUMENT' });
  assert.throws(() => checkCallback('f' as never, 'onLost'), {
    code: 'INVALID_ARGUMENT',
    message: /onLost must be a function/,
  });
  assert.throws(() => checkOptionsObject([] as never, 'options'), { code: 'INVALID_ARGUMENT' });
});

test('checkPositiveDuration is checkDuration without 0', () => {
  assert.equal(checkPositiveDuration(1, 'queryTimeout'), 1);
  assert.throws(() => checkPositiveDuration(0, 'queryTimeout'), {
    code: 'INVALID_ARGUMENT',
    message: 'Invalid queryTimeout 0: must be > 0',
  });
  assert.throws(() => checkPositiveDuration(-1, 'queryTimeout'), { code: 'INVALID_ARGUMENT' });
});

test('hasMethods: an object with a function under each name, nothing else', () => {
  const logger = { info() {}, debug() {}, warn: () => {} };
  assert.equal(hasMethods(logger, 'info', 'debug', 'warn'), true);
  assert.equal(hasMethods(logger, 'info', 'error'), false);
  assert.equal(hasMethods({ start: 1 }, 'start'), false);
  for (const value of [null, undefined, 'start', () => {}]) {
    assert.equal(hasMethods(value, 'start'), false);
  }
  assert.equal(
    hasMethods(
      new (class {
        start() {}
      })(),
      'start',
    ),
    true,
    'inherited methods count',
  );
});

test('library durations are numbers of milliseconds; text is refused with the number to write (one rule for every duration and wait)', async () => {
  const { checkDuration, checkWaitDuration, MAX_DURATION_MS } = await import(
    '../../src/core/duration.js'
  );
  assert.throws(() => checkDuration('1s' as unknown as number, 'timeoutMs'), {
    code: 'INVALID_ARGUMENT',
    message:
      'Invalid timeoutMs "1s": must be a number of milliseconds from 0 to 2147483647, not text (text durations with a unit are for the command line: write 1000 for 1s)',
  });
  assert.throws(() => checkDuration(Number.POSITIVE_INFINITY, 'leaseMs'), /leaseMs Infinity/);
  assert.equal(checkWaitDuration(Number.POSITIVE_INFINITY, 'timeoutMs'), Number.POSITIVE_INFINITY);
  assert.equal(checkWaitDuration(0, 'timeoutMs'), 0);
  assert.throws(
    () => checkWaitDuration('2s', 'waitMs'),
    /or Infinity to wait without limit, not text.*write 2000 for 2s/,
  );
  assert.throws(
    () => checkWaitDuration(MAX_DURATION_MS + 1, 'waitMs'),
    /Infinity waits without limit/,
  );
  assert.throws(() => checkWaitDuration(Number.NaN, 'waitMs'), /Invalid waitMs NaN/);
  assert.throws(() => checkWaitDuration(-1, 'waitMs'), { code: 'INVALID_ARGUMENT' });
  // The same rule at the entry points: a directory wait and a row wait.
  const { withLock, FSDirectory } = await import('../../src/directory/index.js');
  const { Region, Put } = await import('../../src/rows/index.js');
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const root = mkdtempSync(join(tmpdir(), 'durations-'));
  try {
    const dir = await FSDirectory.open(join(root, 'index'));
    await assert.rejects(
      withLock(dir, () => undefined, { timeoutMs: '1s' as unknown as number }),
      /timeoutMs "1s".*write 1000 for 1s/,
    );
    assert.equal(await withLock(dir, () => 'ran', { timeoutMs: Number.POSITIVE_INFINITY }), 'ran');
    await using region = await Region.open({ dir: join(root, 'rows'), families: ['f'] });
    const put = new Put('r').add('f', 'q', 'v');
    await assert.rejects(
      region.put(put, { waitMs: '2s' as unknown as number }),
      /write 2000 for 2s/,
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
