import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { describe, test } from 'node:test';
import { type Clock, FakeClock } from '../../src/core/clock.js';
import {
  AbortedError,
  AlreadyClosedError,
  DeadlockError,
  InvalidArgumentError,
  LockTimeoutError,
  UnknownRowLockError,
} from '../../src/core/errors.js';
import { rowKey, toStringBinary } from '../../src/rows/bytes.js';
import { LeaseQueue } from '../../src/rows/lease-queue.js';
import { newLockId } from '../../src/rows/lock-id.js';
import { type RowLockGrant, RowLockManager } from '../../src/rows/row-lock-manager.js';
import { CONCURRENT_OWNER } from '../../src/rows/wait-for-graph.js';

/** Settles pending promise reactions and immediates, so "still pending" means waiting. */
const tick = () => new Promise<void>((r) => setImmediate(r));

type State = 'pending' | 'fulfilled' | 'rejected';
async function stateOf(promise: Promise<unknown>): Promise<State> {
  let state: State = 'pending';
  promise.then(
    () => {
      state = 'fulfilled';
    },
    () => {
      state = 'rejected';
    },
  );
  await tick();
  return state;
}

/** Records the order in which promises settle. */
function track<T>(promise: Promise<T>, log: string[], name: string): Promise<T> {
  promise.then(
    () => log.push(`${name} ok`),
    (err: Error) => log.push(`${name} ${err.name}`),
  );
  return promise;
}

function manager(clock = new FakeClock(), options: { rowLockWaitMs?: number } = {}) {
  return { clock, locks: new RowLockManager({ clock, ...options }) };
}

describe('explicit locks (conformance R1, R3, R4, R5, R7)', () => {
  test('lockRow grants {row, lockId, token}; unlockRow releases', async () => {
    const { locks } = manager();
    const grant = await locks.lockRow('row1');
    assert.equal(grant.row, 'row1');
    assert.match(grant.lockId ?? '', /^[A-Za-z0-9_-]{20}$/);
    assert.ok(Number.isSafeInteger(grant.token) && grant.token > 0);
    assert.equal(locks.heldCount, 1);
    assert.equal(locks.newestToken('row1'), grant.token);
    locks.unlockRow(grant.lockId as string);
    assert.equal(locks.heldCount, 0);
    assert.notEqual(locks.tryLockRow('row1'), null);
    locks.close();
  });

  test('tryLockRow and tryAcquireImplicit return null at once on a row held either way', async () => {
    const { locks } = manager();
    const explicit = await locks.lockRow('a');
    const implicit = await locks.acquireImplicit('b');
    for (const row of ['a', 'b']) {
      assert.equal(locks.tryLockRow(row), null);
      assert.equal(locks.tryAcquireImplicit(row), null);
    }
    locks.unlockRow(explicit.lockId as string);
    locks.releaseImplicit(implicit);
    assert.notEqual(locks.tryLockRow('a'), null);
    assert.notEqual(locks.tryAcquireImplicit('b'), null);
    locks.close();
  });

  test('useLock with a valid id does not block, returns the grant and renews the lease', async () => {
    const { clock, locks } = manager();
    const grant = await locks.lockRow('r');
    await clock.advance(59_000);
    assert.equal(locks.useLock(grant.lockId as string, 'r'), grant);
    await clock.advance(59_000);
    locks.renewLease(grant.lockId as string);
    await clock.advance(59_000);
    assert.equal(locks.useLock(grant.lockId as string, 'r'), grant, 'alive 177 s after the grant');
    await clock.advance(60_000);
    assert.throws(() => locks.useLock(grant.lockId as string, 'r'), UnknownRowLockError);
    locks.close();
  });

  test('unknown, released and expired ids fail with UNKNOWN_ROW_LOCK everywhere', async () => {
    const { clock, locks } = manager();
    const released = await locks.lockRow('a');
    locks.unlockRow(released.lockId as string);
    const expired = await locks.lockRow('b');
    await clock.advance(60_000);
    for (const id of ['nope', newLockId(), released.lockId, expired.lockId] as string[]) {
      for (const call of [
        () => locks.unlockRow(id),
        () => locks.useLock(id, 'a'),
        () => locks.useLock(id, 'b'),
        () => locks.renewLease(id),
      ]) {
        assert.throws(call, (err: Error & { code?: string }) => {
          assert.ok(err instanceof UnknownRowLockError);
          assert.equal(err.code, 'UNKNOWN_ROW_LOCK');
          return true;
        });
      }
    }
    locks.close();
  });

  test('a lock for row A used on row B is rejected (0.94.16 semantics) and stays valid for A', async () => {
    const { locks } = manager();
    const grant = await locks.lockRow('A');
    assert.throws(
      () => locks.useLock(grant.lockId as string, 'B'),
      (err: Error) =>
        err instanceof UnknownRowLockError && /granted for row=A, not row=B/.test(err.message),
    );
    assert.equal(locks.useLock(grant.lockId as string, 'A'), grant);
    locks.close();
  });

  test('a lease overdue but not yet reaped by the timer counts as expired', async () => {
    let now = 0;
    const timers: (() => void)[] = [];
    // A clock whose timer never fires: only the overdue check can expire the lease.
    const clock: Clock = {
      monotonic: () => now,
      wall: () => 1_700_000_000_000 + now,
      sleep: () => new Promise(() => {}),
      setTimer: (_ms, callback) => {
        timers.push(callback);
        return () => {};
      },
    };
    const locks = new RowLockManager({ clock });
    const expired: RowLockGrant[] = [];
    locks.on('expired', (g) => expired.push(g));
    const grant = await locks.lockRow('r');
    const waiter = locks.acquireImplicit('r', { waitMs: Number.POSITIVE_INFINITY });
    now = 60_000;
    assert.throws(() => locks.useLock(grant.lockId as string, 'r'), UnknownRowLockError);
    assert.deepEqual(expired, [grant]);
    const next = await waiter;
    assert.equal(locks.newestToken('r'), next.token);
    assert.equal(timers.length, 1, 'one lease timer, none for the infinite wait');
    locks.close();
  });
});

describe('waiting (conformance R2, R20)', () => {
  test('a held row makes lockRow and acquireImplicit wait until unlock', async () => {
    const { locks } = manager();
    const held = await locks.lockRow('r');
    const explicit = locks.lockRow('r');
    const implicit = locks.acquireImplicit('r');
    assert.equal(await stateOf(explicit), 'pending');
    assert.equal(await stateOf(implicit), 'pending');
    assert.equal(locks.waitingCount, 2);
    locks.unlockRow(held.lockId as string);
    const second = await explicit;
    assert.equal(await stateOf(implicit), 'pending');
    locks.unlockRow(second.lockId as string);
    const third = await implicit;
    assert.equal(third.lockId, undefined);
    locks.releaseImplicit(third);
    assert.equal(locks.heldCount, 0);
    assert.equal(locks.waitingCount, 0);
    locks.close();
  });

  test('waiters are served in FIFO order, whatever kind of lock they ask for', async () => {
    const { locks } = manager();
    const first = locks.tryAcquireImplicit('r') as RowLockGrant;
    const log: string[] = [];
    const waits = [0, 1, 2, 3, 4].map((i) =>
      track(i % 2 === 0 ? locks.lockRow('r') : locks.acquireImplicit('r'), log, `w${i}`),
    );
    locks.releaseImplicit(first);
    for (const wait of waits) {
      const grant = await wait;
      // Only the holder is granted: the next waiter stays queued until this one releases.
      assert.equal(log.length, waits.indexOf(wait) + 1);
      if (grant.lockId !== undefined) locks.unlockRow(grant.lockId);
      else locks.releaseImplicit(grant);
      await tick();
    }
    assert.deepEqual(log, ['w0 ok', 'w1 ok', 'w2 ok', 'w3 ok', 'w4 ok']);
    locks.close();
  });

  test('the default wait limit is 30000 ms; then "Timed out on getting lock for row=…"', async () => {
    const { clock, locks } = manager();
    await locks.lockRow('r\x00w');
    const wait = locks.acquireImplicit('r\x00w');
    const settled = assert.rejects(wait, (err: Error & { code?: string }) => {
      assert.ok(err instanceof LockTimeoutError);
      assert.equal(err.code, 'LOCK_TIMEOUT');
      assert.equal(err.message, 'Timed out on getting lock for row=r\\x00w');
      return true;
    });
    await clock.advance(29_999);
    assert.equal(await stateOf(wait), 'pending');
    await clock.advance(1);
    await settled;
    assert.equal(locks.waitingCount, 0);
    locks.close();
  });

  test('waitMs overrides per call: Infinity waits past any lease-free limit, 0 tries once', async () => {
    const { clock, locks } = manager(new FakeClock(), { rowLockWaitMs: 100 });
    const held = locks.tryAcquireImplicit('r') as RowLockGrant;
    await assert.rejects(locks.lockRow('r', { waitMs: 0 }), LockTimeoutError);
    const forever = locks.lockRow('r', { waitMs: Number.POSITIVE_INFINITY });
    const short = locks.lockRow('r');
    const shortDone = assert.rejects(short, LockTimeoutError);
    await clock.advance(10_000_000);
    await shortDone;
    assert.equal(await stateOf(forever), 'pending');
    assert.equal(clock.pending, 0, 'no timer for an endless wait');
    locks.releaseImplicit(held);
    assert.equal((await forever).row, 'r');
    locks.close();
  });

  test('a waiter that times out leaves the others queued in order', async () => {
    const { clock, locks } = manager();
    const held = locks.tryAcquireImplicit('r') as RowLockGrant;
    const log: string[] = [];
    const a = track(locks.acquireImplicit('r', { waitMs: 50_000 }), log, 'a');
    const b = track(locks.acquireImplicit('r', { waitMs: 1_000 }), log, 'b');
    const c = track(locks.acquireImplicit('r', { waitMs: 50_000 }), log, 'c');
    await assert.rejects(
      (async () => {
        await clock.advance(1_000);
        return b;
      })(),
      LockTimeoutError,
    );
    assert.equal(locks.waitingCount, 2);
    locks.releaseImplicit(held);
    locks.releaseImplicit(await a);
    locks.releaseImplicit(await c);
    assert.deepEqual(log, ['b LockTimeoutError', 'a ok', 'c ok']);
    assert.equal(clock.pending, 0, 'the wait-limit timer is gone once nobody waits');
    locks.close();
  });

  test('aborting a waiter removes only it; an aborted signal rejects at once', async () => {
    const { locks } = manager();
    const held = locks.tryAcquireImplicit('r') as RowLockGrant;
    const controller = new AbortController();
    const log: string[] = [];
    const a = track(locks.lockRow('r'), log, 'a');
    const b = track(locks.lockRow('r', { signal: controller.signal }), log, 'b');
    const c = track(locks.acquireImplicit('r'), log, 'c');
    const reason = new Error('client went away');
    controller.abort(reason);
    await assert.rejects(b, (err: Error & { code?: string }) => {
      assert.ok(err instanceof AbortedError);
      assert.equal(err.code, 'ABORTED');
      assert.equal(err.cause, reason);
      return true;
    });
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
    await assert.rejects(locks.lockRow('x', { signal: controller.signal }), AbortedError);
    assert.equal(locks.heldCount, 1, 'an aborted call takes nothing, even on a free row');
    locks.releaseImplicit(held);
    const ga = await a;
    locks.unlockRow(ga.lockId as string);
    locks.releaseImplicit(await c);
    assert.deepEqual(log, ['b AbortError', 'a ok', 'c ok']);
    locks.close();
  });

  test('unlockRow never waits, even with many blocked waiters (conformance R20)', async () => {
    const { locks } = manager();
    const held = await locks.lockRow('r');
    const waits = Array.from({ length: 10 }, () => locks.lockRow('r'));
    assert.equal(locks.waitingCount, 10);
    // Synchronous: returns (the released grant, not a promise) before any waiter runs.
    assert.equal(locks.unlockRow(held.lockId as string), held);
    assert.equal(locks.waitingCount, 9);
    for (const wait of waits) locks.unlockRow((await wait).lockId as string);
    assert.equal(locks.heldCount, 0);
    locks.close();
  });

  test('the fast path allocates no timer and no abort listener', async () => {
    const { clock, locks } = manager();
    const controller = new AbortController();
    const grant = await locks.acquireImplicit('r', { signal: controller.signal, waitMs: 5 });
    assert.equal(clock.pending, 0);
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
    locks.releaseImplicit(grant);
    locks.releaseImplicit(grant); // harmless twice
    assert.equal(locks.heldCount, 0);
    locks.close();
  });
});

describe('leases (conformance R6)', () => {
  test('an idle lock expires after 60000 ms: the waiter gets in, the old id fails, `expired` fires', async () => {
    const { clock, locks } = manager(new FakeClock(), { rowLockWaitMs: Number.POSITIVE_INFINITY });
    const expired: RowLockGrant[] = [];
    locks.on('expired', (g) => expired.push(g));
    const grant = await locks.lockRow('r');
    const waiter = locks.acquireImplicit('r');
    const other = locks.lockRow('r');
    await clock.advance(59_999);
    assert.equal(await stateOf(waiter), 'pending');
    await clock.advance(1);
    const next = await waiter;
    assert.deepEqual(expired, [grant]);
    assert.ok(next.token > grant.token);
    assert.throws(() => locks.unlockRow(grant.lockId as string), UnknownRowLockError);
    assert.throws(() => locks.useLock(grant.lockId as string, 'r'), UnknownRowLockError);
    assert.equal(await stateOf(other), 'pending', 'later waiters stay queued');
    locks.releaseImplicit(next);
    const third = await other;
    // The handed-over explicit lock has its own full lease from the handover.
    await clock.advance(59_000);
    locks.useLock(third.lockId as string, 'r');
    locks.close();
  });

  test('useLock within the period keeps a lock alive indefinitely', async () => {
    const { clock, locks } = manager();
    const grant = await locks.lockRow('r');
    for (let i = 0; i < 10; i++) {
      await clock.advance(50_000);
      locks.useLock(grant.lockId as string, 'r');
    }
    assert.equal(locks.heldCount, 1);
    assert.equal(clock.pending, 1);
    await clock.advance(60_000);
    assert.equal(locks.heldCount, 0);
    locks.close();
  });

  test('10^5 held locks share one timer; they all expire on time', async () => {
    const { clock, locks } = manager();
    for (let i = 0; i < 100_000; i++) locks.tryLockRow(`row${i}`);
    assert.equal(locks.heldCount, 100_000);
    assert.equal(clock.pending, 1);
    await clock.advance(59_999);
    assert.equal(locks.heldCount, 100_000);
    await clock.advance(1);
    assert.equal(locks.heldCount, 0);
    locks.close();
    assert.equal(clock.pending, 0);
  });

  test('the lease heap stays bounded under lock/unlock churn next to a long-held lock', () => {
    const clock = new FakeClock();
    const items = new Set<{ deadline: number }>();
    const queue = new LeaseQueue<{ deadline: number }>(
      clock,
      (item) => items.has(item),
      () => {},
    );
    const keep = { deadline: 60_000 };
    items.add(keep);
    queue.add(keep);
    for (let i = 0; i < 100_000; i++) {
      const item = { deadline: 60_000 };
      items.add(item);
      queue.add(item);
      items.delete(item);
      queue.remove();
    }
    assert.equal(queue.size, 1);
    assert.ok(queue.entries <= 2 * queue.size + 33, `heap has ${queue.entries} entries`);
    assert.equal(clock.pending, 1);
    queue.close();
  });

  test('on the system clock, leases never keep the process alive; a wait limit does while it waits', async () => {
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const base = timers();
    const locks = new RowLockManager();
    const grant = locks.tryLockRow('x') as RowLockGrant;
    assert.equal(timers(), base, "the lease timer is unref'd");
    const waiter = locks.acquireImplicit('x', { waitMs: 5_000 });
    assert.equal(timers(), base + 1);
    locks.unlockRow(grant.lockId as string);
    assert.equal(timers(), base, 'cancelled once nobody waits');
    locks.releaseImplicit(await waiter);
    locks.close();
  });

  test('a clock without setTimer drives leases through sleep', async () => {
    const fake = new FakeClock();
    const clock: Clock = {
      monotonic: () => fake.monotonic(),
      wall: () => fake.wall(),
      sleep: (ms, signal) => fake.sleep(ms, signal),
    };
    const locks = new RowLockManager({ clock });
    const grant = await locks.lockRow('r');
    const waiter = locks.lockRow('r', { waitMs: 100_000 });
    assert.equal(fake.pending, 2);
    await fake.advance(60_000);
    const next = await waiter;
    assert.throws(() => locks.renewLease(grant.lockId as string), UnknownRowLockError);
    locks.unlockRow(next.lockId as string);
    locks.close();
    await tick();
    assert.equal(fake.pending, 0);
  });
});

describe('implicit locks (conformance R8)', () => {
  test('released in finally when the operation fails; a caller-held explicit lock is never released', async () => {
    const { locks } = manager();
    await assert.rejects(async () => {
      const grant = await locks.acquireImplicit('r');
      try {
        throw new Error('bad family');
      } finally {
        locks.releaseImplicit(grant);
      }
    }, /bad family/);
    assert.equal(locks.heldCount, 0);
    const explicit = await locks.lockRow('r');
    assert.throws(() => locks.releaseImplicit(explicit), InvalidArgumentError);
    assert.equal(locks.useLock(explicit.lockId as string, 'r'), explicit);
    assert.throws(
      () => locks.releaseImplicit({ row: 'r', lockId: undefined, token: 1 }),
      InvalidArgumentError,
    );
    locks.close();
  });

  test('tokens increase strictly per row across implicit and explicit grants', async () => {
    const { locks } = manager();
    let last = 0;
    for (let i = 0; i < 1000; i++) {
      const grant = i % 3 === 0 ? await locks.lockRow('r') : await locks.acquireImplicit('r');
      assert.ok(grant.token > last);
      assert.equal(locks.newestToken('r'), grant.token);
      last = grant.token;
      if (grant.lockId !== undefined) locks.unlockRow(grant.lockId);
      else locks.releaseImplicit(grant);
    }
    assert.equal(locks.newestToken('r'), undefined, 'free rows are forgotten');
    locks.close();
  });

  test('acquireImplicitMany locks unique rows in byte order, all or nothing', async () => {
    const { clock, locks } = manager();
    const grants = await locks.acquireImplicitMany(['c', '\xff', 'a', 'b', 'a', 'B']);
    assert.deepEqual(
      grants.map((g) => g.row),
      ['B', 'a', 'b', 'c', '\xff'],
    );
    for (const g of grants) locks.releaseImplicit(g);

    // Opposite orders never deadlock: both callers sort.
    const blocker = locks.tryAcquireImplicit('m') as RowLockGrant;
    const one = locks.acquireImplicitMany(['z', 'm', 'a'], { owner: 'one' });
    const two = locks.acquireImplicitMany(['a', 'm', 'z'], { owner: 'two' });
    await tick();
    locks.releaseImplicit(blocker);
    for (const g of await one) locks.releaseImplicit(g);
    for (const g of await two) locks.releaseImplicit(g);
    assert.equal(locks.heldCount, 0);

    // A timeout on a later row gives back the rows already taken.
    const held = locks.tryAcquireImplicit('c') as RowLockGrant;
    const many = locks.acquireImplicitMany(['a', 'b', 'c', 'd'], { waitMs: 1_000 });
    const done = assert.rejects(many, LockTimeoutError);
    await tick();
    assert.equal(locks.heldCount, 3);
    await clock.advance(1_000);
    await done;
    assert.equal(locks.heldCount, 1);
    assert.equal(locks.tryAcquireImplicit('a') === null, false);
    locks.releaseImplicit(held);
    locks.close();
  });

  test('acquireImplicitMany: an abort mid-way gives back the rows taken; an aborted signal takes none', async () => {
    const { locks } = manager();
    const held = locks.tryAcquireImplicit('b') as RowLockGrant;
    const controller = new AbortController();
    const many = locks.acquireImplicitMany(['c', 'b', 'a'], { signal: controller.signal });
    await tick();
    assert.equal(locks.heldCount, 2);
    controller.abort();
    await assert.rejects(many, AbortedError);
    assert.equal(locks.heldCount, 1);
    await assert.rejects(
      locks.acquireImplicitMany(['x'], { signal: controller.signal }),
      AbortedError,
    );
    assert.equal(locks.heldCount, 1);
    locks.releaseImplicit(held);
    locks.close();
  });
});

describe('deadlock detection (conformance R22)', () => {
  test('opposite-order explicit lockers: the one closing the cycle fails at once, the other proceeds', async () => {
    const { locks } = manager();
    const a1 = await locks.lockRow('row1', { owner: 'A' });
    const b2 = await locks.lockRow('row2', { owner: 'B' });
    const aWaits = locks.lockRow('row2', { owner: 'A' });
    await assert.rejects(
      locks.lockRow('row1', { owner: 'B' }),
      (err: Error & { code?: string }) => {
        assert.ok(err instanceof DeadlockError);
        assert.equal(err.code, 'DEADLOCK');
        assert.equal(
          err.message,
          'Deadlock: "B" waiting for row=row1 would close the cycle "B" -[row=row1]-> "A" -[row=row2]-> "B"; this request gives up',
        );
        return true;
      },
    );
    assert.equal(await stateOf(aWaits), 'pending', "A's wait is untouched");
    assert.equal(locks.useLock(b2.lockId as string, 'row2'), b2, "B's lock is untouched");
    locks.unlockRow(b2.lockId as string);
    const a2 = await aWaits;
    locks.unlockRow(a1.lockId as string);
    locks.unlockRow(a2.lockId as string);
    locks.close();
  });

  test('a cycle of three owners through explicit locks and a multi-row call', async () => {
    const { locks } = manager();
    const owners = [{}, {}, {}] as const;
    await locks.lockRow('x', { owner: owners[0] });
    await locks.lockRow('z', { owner: owners[2] });
    // owners[1]'s multi-row call takes y, then waits for z: it holds y until it gets z.
    const many = locks.acquireImplicitMany(['y', 'z'], { owner: owners[1] });
    await tick();
    assert.equal(locks.waitingCount, 1);
    const w2 = locks.acquireImplicit('x', { owner: owners[2] }); // holds z, waits for x
    await assert.rejects(
      locks.acquireImplicit('y', { owner: owners[0] }), // holds x, waits for the call's y
      (err: Error) =>
        err instanceof DeadlockError &&
        /-\[row=y\]->.*-\[row=z\]->.*-\[row=x\]->/.test(err.message) &&
        /Object#\d+/.test(err.message) &&
        !/RowsCall/.test(err.message),
    );
    assert.equal(await stateOf(many), 'pending');
    assert.equal(await stateOf(w2), 'pending');
    assert.equal(locks.waitingCount, 2);
    locks.close();
    await assert.rejects(many, AlreadyClosedError);
    await assert.rejects(w2, AlreadyClosedError);
  });

  test('a chain that is not a cycle is not reported', async () => {
    const { locks } = manager();
    await locks.lockRow('x', { owner: 'A' });
    await locks.lockRow('y', { owner: 'B' });
    const c = (await locks.lockRow('z', { owner: 'C' })).lockId as string;
    const aWaits = locks.acquireImplicit('y', { owner: 'A' }); // A -> B
    const bWaits = locks.lockRow('z', { owner: 'B' }); // B -> C
    const dWaits = locks.lockRow('x', { owner: 'D' }); // D -> A: no cycle
    const anon = locks.acquireImplicit('x'); // anonymous: never part of a cycle
    for (const p of [aWaits, bWaits, dWaits, anon]) assert.equal(await stateOf(p), 'pending');
    locks.unlockRow(c);
    locks.unlockRow((await bWaits).lockId as string);
    assert.equal(await stateOf(aWaits), 'pending', 'B still holds y');
    assert.equal(locks.activity().deadlocks, 0);
    locks.close();
    await Promise.allSettled([aWaits, dWaits, anon]);
  });

  test('waiting behind a queued request counts: a cycle through the FIFO queue is found', async () => {
    const { locks } = manager();
    await locks.lockRow('r1', { owner: 'A' });
    await locks.lockRow('r2', { owner: 'C' });
    const b = locks.lockRow('r1', { owner: 'B' }); // B -> A
    const c = locks.lockRow('r1', { owner: 'C' }); // C -> B (B is served first, and keeps r1)
    // B -> C closes B -> C -> B: once A releases r1, B gets it and waits for C, who waits for B.
    await assert.rejects(locks.acquireImplicit('r2', { owner: 'B' }), DeadlockError);
    for (const p of [b, c]) assert.equal(await stateOf(p), 'pending');
    locks.close();
    await Promise.allSettled([b, c]);
  });

  test('requests ahead that will not keep the row pass the edge through to whoever is ahead', async () => {
    const { locks } = manager();
    await locks.lockRow('r1', { owner: 'A' });
    await locks.lockRow('r2', { owner: 'B' });
    const anon = locks.acquireImplicit('r1'); // anonymous -> A
    const single = locks.acquireImplicit('r1', { owner: 'E' }); // a single-row call -> A
    const b = locks.lockRow('r1', { owner: 'B' }); // B -> (anonymous, E's call) -> A
    await assert.rejects(locks.acquireImplicit('r2', { owner: 'A' }), DeadlockError);
    locks.close();
    await Promise.allSettled([anon, single, b]);
  });

  test('single-row calls never deadlock: their implicit locks are held while waiting for nothing', async () => {
    const { locks } = manager();
    // The false cycle of an older graph: A's call holds x while another of A's calls waits for
    // y, B's call holds y while another of B's waits for x. Each holder finishes without waiting.
    const ax = locks.tryAcquireImplicit('x', 'A') as RowLockGrant;
    const by = locks.tryAcquireImplicit('y', 'B') as RowLockGrant;
    const ay = locks.acquireImplicit('y', { owner: 'A' });
    const bx = locks.acquireImplicit('x', { owner: 'B' });
    const many = locks.acquireImplicitMany(['x', 'y'], { owner: 'A' });
    for (const p of [ay, bx, many]) assert.equal(await stateOf(p), 'pending');
    locks.releaseImplicit(ax);
    locks.releaseImplicit(by);
    locks.releaseImplicit(await ay);
    locks.releaseImplicit(await bx);
    for (const g of await many) locks.releaseImplicit(g);
    assert.equal(locks.activity().deadlocks, 0);
    assert.equal(locks.heldCount, 0);
    locks.close();
  });

  test('a multi-row call that would close a cycle fails, keeping nothing; the others go on', async () => {
    const { locks } = manager();
    await locks.lockRow('a', { owner: 'A' });
    const bb = await locks.lockRow('b', { owner: 'B' });
    const aWaits = locks.lockRow('b', { owner: 'A' }); // A -> B
    // B's call takes '0', then waits for A's 'a'; B keeps b meanwhile: A -> B -> A.
    await assert.rejects(locks.acquireImplicitMany(['a', '0'], { owner: 'B' }), DeadlockError);
    assert.notEqual(locks.tryAcquireImplicit('0', 'X'), null, 'the call gave its row back');
    assert.equal(await stateOf(aWaits), 'pending');
    locks.unlockRow(bb.lockId as string);
    assert.equal(await stateOf(aWaits), 'fulfilled');
    locks.close();
  });

  test('re-locking a row the owner holds is a deadlock; anonymous callers just wait (HBase)', async () => {
    const { locks } = manager();
    const held = await locks.lockRow('r', { owner: 'client' });
    await assert.rejects(locks.lockRow('r', { owner: 'client' }), DeadlockError);
    await assert.rejects(locks.acquireImplicit('r', { owner: 'client' }), DeadlockError);
    const anon = locks.acquireImplicit('r');
    assert.equal(await stateOf(anon), 'pending');
    locks.unlockRow(held.lockId as string);
    locks.releaseImplicit(await anon);
    locks.close();
  });
});

describe('ids, validation, close', () => {
  test('lock ids are unique over 10^6 grants', () => {
    const { locks } = manager();
    const ids = new Set<string>();
    for (let i = 0; i < 1_000_000; i++) {
      const grant = locks.tryLockRow('r') as RowLockGrant;
      ids.add(grant.lockId as string);
      locks.unlockRow(grant.lockId as string);
    }
    assert.equal(ids.size, 1_000_000);
    locks.close();
  });

  test('bad arguments are INVALID_ARGUMENT', async () => {
    const { locks } = manager();
    const invalid = (err: Error & { code?: string }) => err.code === 'INVALID_ARGUMENT';
    for (const row of ['', 'x'.repeat(32_768), 42, undefined] as unknown as string[]) {
      await assert.rejects(locks.lockRow(row), invalid);
      await assert.rejects(locks.acquireImplicit(row), invalid);
      assert.throws(() => locks.tryLockRow(row), invalid);
      assert.throws(() => locks.tryAcquireImplicit(row), invalid);
      await assert.rejects(locks.acquireImplicitMany(['a', row]), invalid);
    }
    assert.notEqual(locks.tryLockRow('x'.repeat(32_767)), null);
    for (const waitMs of [-1, Number.NaN, '5'] as unknown as number[]) {
      await assert.rejects(locks.lockRow('w', { waitMs }), invalid);
    }
    await assert.rejects(locks.lockRow('w', { owner: null as unknown as string }), invalid);
    assert.throws(() => locks.unlockRow(''), invalid);
    assert.throws(() => locks.useLock(7 as unknown as string, 'a'), invalid);
    for (const leasePeriodMs of [0, -1, Number.POSITIVE_INFINITY, Number.NaN]) {
      assert.throws(() => new RowLockManager({ leasePeriodMs }), InvalidArgumentError);
    }
    assert.throws(() => new RowLockManager({ rowLockWaitMs: -5 }), InvalidArgumentError);
    locks.close();
  });

  test('close rejects pending waits and later calls with ALREADY_CLOSED and stops the timers', async () => {
    const { clock, locks } = manager();
    const held = await locks.lockRow('r');
    const implicit = locks.tryAcquireImplicit('s') as RowLockGrant;
    const waits = [locks.lockRow('r'), locks.acquireImplicit('s', { waitMs: 10 })];
    assert.equal(clock.pending, 2);
    locks.close();
    for (const wait of waits) await assert.rejects(wait, AlreadyClosedError);
    assert.equal(clock.pending, 0);
    assert.equal(locks.heldCount, 0);
    assert.equal(locks.waitingCount, 0);
    await assert.rejects(locks.lockRow('x'), AlreadyClosedError);
    assert.throws(() => locks.tryLockRow('x'), AlreadyClosedError);
    assert.throws(() => locks.unlockRow(held.lockId as string), AlreadyClosedError);
    assert.throws(() => locks.useLock(held.lockId as string, 'r'), AlreadyClosedError);
    locks.releaseImplicit(implicit); // a no-op after close
    locks.close();
  });
});

describe('bytes', () => {
  test('toStringBinary prints like HBase Bytes.toStringBinary', () => {
    assert.equal(toStringBinary('row1'), 'row1');
    assert.equal(toStringBinary('a b\x00\xff\\'), 'a b\\x00\\xFF\\x5C');
    assert.equal(toStringBinary('\n~'), '\\x0A~');
  });

  test('rowKey: strings as UTF-8 bytes, Uint8Array byte for byte, order = byte order', () => {
    assert.equal(rowKey('abc'), 'abc');
    assert.equal(rowKey('é'), '\xc3\xa9');
    assert.equal(rowKey(new Uint8Array([0, 255, 65])), '\x00\xffA');
    const big = Buffer.from([9, 1, 2, 3]);
    assert.equal(rowKey(big.subarray(1, 3)), '\x01\x02');
    const keys = [[1], [255], [0, 1], [128]].map((b) => rowKey(new Uint8Array(b)));
    assert.deepEqual(
      [...keys].sort().map((k) => [...Buffer.from(k, 'latin1')]),
      [[0, 1], [1], [128], [255]],
    );
    assert.throws(() => rowKey(5 as unknown as string), InvalidArgumentError);
  });
});

describe('cost per wait (a hot row with many waiters)', () => {
  /** Queues `n` waiters of mixed owners on one held row, then drains them: the best of `runs`, ms. */
  async function queueAndDrain(n: number, runs = 1): Promise<number> {
    let best = Number.POSITIVE_INFINITY;
    for (let run = 0; run < runs; run++) {
      const { locks } = manager(new FakeClock(), { rowLockWaitMs: Number.POSITIVE_INFINITY });
      const sessions = Array.from({ length: 50 }, () => ({ [CONCURRENT_OWNER]: true as const }));
      const holder = locks.tryAcquireImplicit('hot', 'H') as RowLockGrant;
      const started = performance.now();
      const waits: Promise<RowLockGrant>[] = [];
      for (let i = 0; i < n; i++) {
        // What a server queues: sessions' locks and puts, multi-row calls; anonymous calls.
        const options = i % 3 === 0 ? {} : { owner: sessions[i % sessions.length] as object };
        if (i % 5 === 0) waits.push(locks.lockRow('hot', options));
        else if (i % 7 === 0) {
          waits.push(locks.acquireImplicitMany(['hot'], options).then((g) => g[0] as RowLockGrant));
        } else waits.push(locks.acquireImplicit('hot', options));
      }
      locks.releaseImplicit(holder);
      for (const wait of waits) {
        const grant = await wait;
        if (grant.lockId === undefined) locks.releaseImplicit(grant);
        else locks.unlockRow(grant.lockId);
      }
      best = Math.min(best, performance.now() - started);
      assert.equal(locks.heldCount, 0);
      assert.equal(locks.activity().deadlocks, 0);
      locks.close();
    }
    return best;
  }

  test('queueing and granting a wait cost about the same with 4x as many waiters (no walk over the queue)', async () => {
    await queueAndDrain(2_000, 3); // warm-up
    // The two sizes in turn, the best of 5 each: a busy machine (another process, a GC) slows
    // single runs by several times, and in turn both sizes meet the same spells of it.
    let small = Number.POSITIVE_INFINITY;
    let large = Number.POSITIVE_INFINITY;
    for (let round = 0; round < 5; round++) {
      small = Math.min(small, await queueAndDrain(10_000));
      large = Math.min(large, await queueAndDrain(40_000));
    }
    // Linear work grows 4x; a walk over every waiter ahead grows it 16x (34x measured before).
    assert.ok(
      large < small * 12,
      `10k waiters: ${small.toFixed(1)} ms, 40k: ${large.toFixed(1)} ms`,
    );
  });
});

describe('restoreRowLock: a lock recorded before a restart or a failover', () => {
  test('comes back with its id and token, a full lease, and every later grant above its token', async () => {
    const clock = new FakeClock();
    const locks = new RowLockManager({ clock, leasePeriodMs: 60_000 });
    const id = newLockId();
    const restored = locks.restoreRowLock('r', id, 5_000, undefined, false);
    assert.equal(restored.lockId, id);
    assert.equal(restored.token, 5_000);
    assert.equal(locks.leaseRemaining(id), 60_000, 'a full lease from now');
    assert.equal(locks.tryLockRow('r'), null, 'the row is held');
    const waiting = locks.lockRow('r', { waitMs: 600_000 });
    await clock.advance(59_000);
    locks.useLock(id, 'r');
    await clock.advance(59_000);
    assert.equal(await stateOf(waiting), 'pending', 'a use renewed the restored lease');
    locks.unlockRow(id);
    const next = await waiting;
    assert.ok(next.token > 5_000);
    // A recorded token above every token issued here moves the sequence past it.
    const high = next.token + 1_000_000_000;
    locks.restoreRowLock('q', newLockId(), high, undefined, true);
    const after = locks.tryLockRow('s');
    assert.ok(after !== null && after.token > high, `${after?.token} > ${high}`);
  });

  test('a renewing lock has no lease', async () => {
    const clock = new FakeClock();
    const locks = new RowLockManager({ clock, leasePeriodMs: 1_000 });
    const id = newLockId();
    locks.restoreRowLock('r', id, 1, {}, true);
    await clock.advance(10_000);
    assert.equal(locks.isHeldId(id), true, 'no lease ran out');
    assert.equal(locks.leaseRemaining(id), Number.POSITIVE_INFINITY);
    locks.unlockRow(id);
    assert.notEqual(locks.tryLockRow('r'), null);
  });

  test('refuses a second holder and hostile values, changing nothing', () => {
    const { locks } = manager();
    const held = locks.tryLockRow('r');
    assert.ok(held !== null);
    const id = newLockId();
    assert.throws(() => locks.restoreRowLock('r', id, 1, undefined, true), {
      code: 'INVALID_ARGUMENT',
      message: /already held/,
    });
    locks.restoreRowLock('q', id, 1, undefined, true);
    assert.throws(() => locks.restoreRowLock('p', id, 1, undefined, true), {
      code: 'INVALID_ARGUMENT',
    });
    for (const bad of ['', 'short', 'x'.repeat(21), 'a/b'.padEnd(20, 'c'), 42, null]) {
      assert.throws(
        () => locks.restoreRowLock('z', bad as string, 1, undefined, true),
        { code: 'INVALID_ARGUMENT' },
        String(bad),
      );
    }
    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '7']) {
      assert.throws(
        () => locks.restoreRowLock('z', newLockId(), bad as number, undefined, true),
        { code: 'INVALID_ARGUMENT' },
        String(bad),
      );
    }
    assert.throws(() => locks.restoreRowLock('z', newLockId(), 1, undefined, 'yes' as never), {
      code: 'INVALID_ARGUMENT',
    });
    assert.equal(locks.tryLockRow('z') !== null, true, 'nothing was left behind on z');
  });
});
