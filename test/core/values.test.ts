import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  FencingGate,
  nextFencingToken,
  parseDuration,
  validateLockName,
} from '../../src/core/index.js';

test('parseDuration accepts units and rejects nonsense', () => {
  assert.equal(parseDuration('500ms'), 500);
  assert.equal(parseDuration('2s'), 2000);
  assert.equal(parseDuration('1m'), 60_000);
  assert.equal(parseDuration('1.5s'), 1500);
  assert.equal(parseDuration('250'), 250);
  assert.equal(parseDuration(0), 0);
  for (const bad of ['', '-1s', 'abc', '1 day', '1e3', 'NaN']) {
    assert.throws(() => parseDuration(bad, '--wait'), {
      code: 'INVALID_ARGUMENT',
      message: /--wait/,
    });
  }
  for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
    assert.throws(() => parseDuration(bad), { code: 'INVALID_ARGUMENT' });
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
