import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { SessionLease, silenceLimitMs } from '../../src/client/session-lease.js';
import { type Clock, systemClock } from '../../src/core/clock.js';

/** A clock the test moves by hand; timers still run on real time (0-delay when past). */
function manualClock(start = 1_000) {
  let now = start;
  const clock: Clock = { ...systemClock, monotonic: () => now };
  return { clock, set: (t: number) => (now = t) };
}

describe('the session lease as the client tracks it', () => {
  it('a reply to a call sent at t proves the session alive until t + lease, never longer', () => {
    const { clock } = manualClock();
    const lease = new SessionLease(clock, () => assert.fail('not expired yet'));
    lease.aliveAt(1_000, 500);
    assert.equal(lease.validUntil, 1_500);
    lease.aliveAt(900, 500);
    assert.equal(lease.validUntil, 1_500, 'an older proof does not shorten it');
    lease.aliveAt(1_200, 500);
    assert.equal(lease.validUntil, 1_700);
    lease.end();
    assert.equal(lease.validUntil, 0);
  });

  it('expires only once the last proof has run out', async () => {
    const { clock, set } = manualClock();
    let expired = 0;
    const lease = new SessionLease(clock, () => expired++);
    lease.aliveAt(1_000, 20);
    set(1_010);
    lease.aliveAt(1_010, 20);
    await sleep(40);
    assert.equal(expired, 0, 'the clock says 1010 < 1030: still alive');
    set(1_030);
    // The expiry comes at the timer's next turn: bounded generously for a busy machine.
    for (let waited = 0; expired === 0 && waited < 5_000; waited += 10) await sleep(10);
    assert.equal(expired, 1);
  });

  it('ended: no expiry fires', async () => {
    const { clock, set } = manualClock();
    let expired = 0;
    const lease = new SessionLease(clock, () => expired++);
    lease.aliveAt(1_000, 10);
    set(5_000);
    lease.end();
    await sleep(30);
    assert.equal(expired, 0);
  });

  it('a connection is dead after 5/8 of the lease of silence', () => {
    assert.equal(silenceLimitMs(8_000), 5_000);
    assert.equal(silenceLimitMs(1_000), 625);
  });
});
