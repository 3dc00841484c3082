import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HeldLocks } from '../../src/client/held-locks.js';
import { FakeClock } from '../../src/core/clock.js';
import { LockLostError } from '../../src/core/errors.js';
import { CALLS } from '../../src/wire/calls.js';

/** A session's locks with a fake clock; `givenBack` records every unlock sent. */
function held(sessionValidUntil = 1_000_000) {
  const clock = new FakeClock(0);
  const givenBack: [string, string][] = [];
  const locks = new HeldLocks({
    clock,
    sessionValidUntil: () => sessionValidUntil,
    giveBack: async (table, lockId) => {
      givenBack.push([table, lockId]);
    },
  });
  const grant = (lockId: string, token = 1) =>
    locks.granted('t', Buffer.from(lockId), { lockId, token, leaseMs: 60_000 }, clock.monotonic());
  return { clock, locks, givenBack, grant };
}

describe('the owner of a client session’s locks', () => {
  it('makes a handle per grant, finds it by id, forgets it when released', async () => {
    const { locks, grant, givenBack } = held();
    const lock = grant('a', 7);
    assert.equal(locks.get('a'), lock);
    assert.equal(lock.token, 7);
    assert.equal(locks.size, 1);
    await lock.close();
    assert.equal(locks.get('a'), undefined);
    assert.equal(locks.isGone('a'), false, 'a released id is not remembered');
    assert.deepEqual(givenBack, [['t', 'a']], 'closing sends the unlock');
  });

  it('gives back a grant that arrived after its caller gave up, and only a grant', () => {
    const { locks, givenBack } = held();
    const [table, row] = ['t', 'r'];
    const lockArgs = CALLS.lockRow.encodeArgs(table, row, 100, true);
    locks.lateResult('lockRow', lockArgs, ['late-1', 5, 60_000]);
    locks.lateResult('tryLockRow', CALLS.tryLockRow.encodeArgs(table, row, true), [
      'late-2',
      6,
      60_000,
    ]);
    locks.lateResult('tryLockRow', CALLS.tryLockRow.encodeArgs(table, row, false), null);
    locks.lateResult('get', [table, []], [Buffer.from('r'), []]);
    locks.lateResult('lockRow', lockArgs, 'not a grant');
    assert.deepEqual(givenBack, [
      ['t', 'late-1'],
      ['t', 'late-2'],
    ]);
    assert.equal(locks.size, 0, 'no handle is made for a late grant');
  });

  it('a server notice loses the lock with its code; the lost id is remembered', () => {
    const { locks, grant } = held();
    const lock = grant('a');
    locks.lockLost(['a', 'LEASE_EXPIRED', 'expired on the server']);
    assert.equal(lock.lostReason?.code, 'LEASE_EXPIRED');
    assert.equal(lock.signal.aborted, true);
    assert.equal(locks.isGone('a'), true);
    locks.lockLost(['b', 'LOCK_LOST', 'a lock this client does not know']);
    locks.lockLost('malformed');
    assert.equal(locks.size, 0);
  });

  it('at reconnect: handles the server no longer lists are lost, listed locks without a handle are given back', () => {
    const { locks, grant, givenBack } = held();
    const kept = grant('kept');
    const dropped = grant('dropped');
    locks.reconnected(true, [
      ['kept', 't'],
      ['orphan', 't2'],
    ]);
    assert.equal(kept.signal.aborted, false);
    assert.equal(dropped.lostReason?.code, 'LEASE_EXPIRED', 'resumed session: the lease ran out');
    assert.deepEqual(givenBack, [['t2', 'orphan']]);
    locks.reconnected(false, []);
    assert.equal(kept.lostReason?.code, 'SESSION_EXPIRED', 'a new session holds nothing');
  });

  it('the end of the session, or the client closing it, loses every lock', () => {
    const { locks, grant } = held();
    const [a, b] = [grant('a'), grant('b')];
    locks.loseAll(new LockLostError('master changed', { code: 'MASTER_CHANGED' }));
    assert.equal(a.lostReason?.code, 'MASTER_CHANGED');
    assert.equal(b.lostReason?.code, 'MASTER_CHANGED');
    const c = grant('c');
    locks.clientClosed();
    assert.equal(c.lostReason?.code, 'LOCK_LOST');
    assert.match(c.lostReason?.message ?? '', /the client closed its session/);
    assert.equal(locks.size, 0);
  });

  it('a handle past the session known alive is lost at its first check', async () => {
    const { grant, clock } = held(500);
    const lock = grant('a');
    await clock.advance(501);
    assert.throws(() => lock.ensureValid(), { code: 'SESSION_EXPIRED' });
  });
});
