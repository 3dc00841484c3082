import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Clock } from '../../src/core/clock.js';
import { TimestampAllocator } from '../../src/rows/timestamp-allocator.js';

/** A wall clock the test sets (the allocator reads nothing else). */
function settableClock(start: number): { clock: Clock; set(ms: number): void } {
  let wall = start;
  const clock = { wall: () => wall, monotonic: () => 0 } as unknown as Clock;
  return { clock, set: (ms) => (wall = ms) };
}

test('a row never gets a time at or before its previous one, within a millisecond and across a clock step back', () => {
  const { clock, set } = settableClock(1000.7);
  const times = new TimestampAllocator(clock);
  assert.equal(times.timeFor('a'), 1000);
  assert.equal(times.timeFor('a'), 1001);
  assert.equal(times.timeFor('b'), 1000);
  set(500);
  assert.equal(times.timeFor('a'), 1002);
  set(2000);
  assert.equal(times.timeFor('a'), 2000);
});

test('rows the clock has passed are forgotten: the map stays near the rows of the current millisecond', () => {
  const { clock, set } = settableClock(0);
  const times = new TimestampAllocator(clock);
  let most = 0;
  // 200,000 distinct rows over 2,000 ms, 100 a millisecond (a lock journal's pattern).
  for (let i = 0; i < 200_000; i++) {
    set(Math.floor(i / 100));
    times.timeFor(`row-${i}`);
    most = Math.max(most, times.size);
  }
  assert.ok(most <= 2 * 1024 + 200, `remembered ${most} rows at most`);
  // A row seen again after being forgotten still moves forward: the clock has passed it.
  set(5000);
  assert.equal(times.timeFor('row-0'), 5000);
});

test('rows the clock has not passed are kept through prunes (a clock stepped back)', () => {
  const { clock, set } = settableClock(10_000);
  const times = new TimestampAllocator(clock);
  for (let i = 0; i < 3000; i++) times.timeFor(`r${i}`);
  set(0);
  for (let i = 0; i < 5000; i++) times.timeFor(`s${i}`);
  // Every r-row's time is ahead of the clock: none was forgotten, and each moves on from it.
  assert.equal(times.timeFor('r1'), 10_001);
});
