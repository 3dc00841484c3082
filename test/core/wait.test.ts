import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeClock, waitFor } from '../../src/core/index.js';
import { sleep } from '../helpers.js';

test('waitFor returns the first defined result', async () => {
  let n = 0;
  const result = await waitFor(() => (++n === 3 ? 'done' : undefined), {
    resource: 'r',
    minPollMs: 1,
    maxPollMs: 2,
  });
  assert.equal(result, 'done');
  assert.equal(n, 3);
});

test('waitFor retries at once on a wake hint instead of sleeping', async () => {
  let wake: (() => void) | undefined;
  let free = false;
  const started = performance.now();
  const pending = waitFor(() => (free ? 'got it' : undefined), {
    resource: 'r',
    minPollMs: 10_000,
    maxPollMs: 10_000,
    wake: (w) => {
      wake = w;
      return () => {
        wake = undefined;
      };
    },
  });
  await sleep(20);
  free = true;
  wake?.();
  assert.equal(await pending, 'got it');
  assert.ok(performance.now() - started < 1000);
  assert.equal(wake, undefined, 'unsubscribed after the wait');
});

test('waitFor times out with LOCK_TIMEOUT carrying the last failure', async () => {
  const clock = new FakeClock();
  const failure = new Error('held by 42');
  const pending = waitFor(
    (last) => {
      last.error = failure;
      return undefined;
    },
    { resource: 'dir/write.lock', timeoutMs: 1000, clock, minPollMs: 100, maxPollMs: 100 },
  );
  const settled = assert.rejects(pending, (err: Error & { code?: string }) => {
    assert.equal(err.code, 'LOCK_TIMEOUT');
    assert.match(err.message, /timed out after 1000 ms: dir\/write\.lock/);
    assert.equal(err.cause, failure);
    return true;
  });
  for (let i = 0; i < 20 && clock.monotonic() < 1100; i++) await clock.advance(100);
  await settled;
});

test('waitFor rejects with ABORTED (name AbortError) when the signal aborts, and never started work after', async () => {
  const controller = new AbortController();
  let attempts = 0;
  const pending = waitFor(
    () => {
      attempts++;
      return undefined;
    },
    { resource: 'r', signal: controller.signal, minPollMs: 50, maxPollMs: 50 },
  );
  await sleep(10);
  const before = attempts;
  controller.abort(new Error('shutdown'));
  await assert.rejects(pending, (err: Error & { code?: string }) => {
    assert.equal(err.code, 'ABORTED');
    assert.equal(err.name, 'AbortError');
    assert.equal((err.cause as Error).message, 'shutdown');
    return true;
  });
  assert.equal(attempts, before);
});

test('waitFor rejects an invalid timeout', async () => {
  await assert.rejects(
    waitFor(() => 1, { resource: 'r', timeoutMs: -5 }),
    { code: 'INVALID_ARGUMENT' },
  );
});
