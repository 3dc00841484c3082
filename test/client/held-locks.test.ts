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
  /** Every lock handed on to move (a fleet), with whether its handle was closed meanwhile. */
  const moving: [string, boolean][] = [];
  let validUntil = sessionValidUntil;
  const locks = new HeldLocks({
    clock,
    sessionValidUntil: () => validUntil,
    giveBack: async (table, lockId) => {
      givenBack.push([table, lockId]);
    },
    sessionId: () => 'session-id-of-this-one',
    moving: async (lock, _from, unlock) => {
      moving.push([lock.lockId, unlock]);
    },
    moves: () => true,
  });
  const grant = (lockId: string, token = 1) =>
    locks.granted('t', Buffer.from(lockId), { lockId, token, leaseMs: 60_000 }, clock.monotonic());
  const sessionLost = () => {
    validUntil = 0;
  };
  return { clock, locks, givenBack, grant, moving, sessionLost };
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

  it('a moving lock (a fleet): handed on once, kept through its session’s loss until its adoption decides, valid until its old session’s lease', async () => {
    const { locks, grant, moving, clock, sessionLost } = held(5_000);
    const a = grant('a', 3);
    const b = grant('b', 4);
    assert.equal(a.sessionId, 'session-id-of-this-one', 'a grant knows its session (the proof)');
    locks.moved('a');
    locks.moved('a');
    locks.moved('not-held');
    locks.moved(42);
    assert.deepEqual(moving, [['a', false]], 'one relocation per lock, none for unknown ids');
    assert.equal(a.moving, true);
    // The session is lost (a restarted server welcomed a new one): b is lost, a moves on.
    sessionLost();
    locks.loseAll(new LockLostError('gone', { code: 'SESSION_EXPIRED' }));
    assert.equal(b.signal.aborted, true);
    assert.equal(a.signal.aborted, false, 'a moving lock is not its old session’s to lose');
    a.ensureValid();
    // A reconnect listing nothing leaves it moving; its validity stays its old session's lease.
    locks.reconnected(false, []);
    assert.equal(a.signal.aborted, false);
    await clock.advance(5_001);
    assert.throws(() => a.ensureValid(), { code: 'SESSION_EXPIRED' });
  });

  it('a moving lock adopted by another session is that one’s; one resumed where it was settles there; one closed while moving is released through its relocation', async () => {
    const one = held();
    const other = held();
    const a = one.grant('a', 3);
    one.locks.moved(undefined);
    one.locks.handOver(a, other.locks);
    assert.equal(a.moving, false);
    assert.equal(one.locks.get('a'), undefined);
    assert.equal(other.locks.get('a'), a, 'same handle, now the other session’s');
    assert.equal(a.token, 3);
    await a.close();
    assert.deepEqual(other.givenBack, [['t', 'a']], 'its unlock goes through its new session');
    const b = one.grant('b');
    one.locks.moved('b');
    one.locks.reconnected(true, [['b', 't']]);
    assert.equal(b.moving, false, 'the same session resumed, still holding it');
    assert.deepEqual(one.givenBack, [], 'and it is not given back');
    const c = one.grant('c');
    one.locks.moved('c');
    await c.close();
    assert.deepEqual(one.moving.at(-1), ['c', true], 'closed while moving: released once adopted');
    assert.deepEqual(one.givenBack, [], 'not through the session it left');
  });
});
