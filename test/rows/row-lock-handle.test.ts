/**
 * The RowLock is core's lock handle: fencing token increasing per row (also across a reopen of
 * the region's directory, even with the wall clock set back), a signal that aborts by itself
 * with LEASE_EXPIRED when the lease runs out, `lost`, `ensureValid()`, an idempotent close,
 * `await using`, and `region.withRowLock`: the same for a Region and a RemoteTable (the suites in
 * the loop), and for a Region with its directory and fake clocks (the last suite).
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { FakeClock } from '../../src/core/clock.js';
import { LockHandleBase } from '../../src/core/lock-handle.js';
import { type LockLostError, Put, Region, RowLock } from '../../src/rows/index.js';
import { tempDir } from '../helpers.js';
import { tableVariants } from './table-variants.js';

/** In-process only (FakeClock, `dir`): a Region itself. */
const open = (options: { clock?: FakeClock; dir?: string; leasePeriodMs?: number } = {}) =>
  Region.open({ families: ['f'], rowLockWaitMs: 100_000, ...options });

for (const variant of tableVariants) {
  const open = (options: { leasePeriodMs?: number } = {}) =>
    variant.open({ families: ['f'], rowLockWaitMs: 100_000, ...options });

  describe(`${variant.name}: the row lock is the core lock handle`, () => {
    it('is a LockHandle with the row, the id and a token that increases per row', async () => {
      await using region = await open();
      const a = await region.lockRow('r');
      if (!variant.remote) assert.ok(a instanceof RowLock, 'in process: a RowLock');
      assert.ok(a instanceof LockHandleBase);
      assert.equal(a.row.toString(), 'r');
      // A remote lock's resource also names its table: `table=t row=r`.
      assert.match(a.resource, /(^| )row=r$/);
      assert.equal(typeof a.lockId, 'string');
      assert.equal(a.signal.aborted, false);
      a.ensureValid();
      await a.close();
      await region.put(new Put('r').add('f', 'q', 'v'));
      const b = await region.lockRow('r');
      assert.ok(b.token > a.token);
      await b.close();
    });

    it('with the real clock the signal aborts by itself once the lease runs out (renew: false)', async () => {
      await using region = await open({ leasePeriodMs: 50 });
      const lock = await region.lockRow('r', { renew: false });
      // Lease timers do not keep the process alive (a lease nobody waits on must not): this does.
      const keepAlive = setTimeout(() => {}, 10_000);
      const reason = await new Promise<unknown>((resolve) =>
        lock.signal.addEventListener('abort', () => resolve(lock.signal.reason), { once: true }),
      );
      clearTimeout(keepAlive);
      assert.equal((reason as LockLostError).code, 'LEASE_EXPIRED');
    });

    it('a lock that renews itself (the default) outlives many lease periods until it is closed', async () => {
      await using region = await open({ leasePeriodMs: 50 });
      const lock = await region.lockRow('r');
      const lost: unknown[] = [];
      lock.on('lost', (reason) => lost.push(reason));
      // Ten lease periods, on the real clock, with the lock used now and then and idle otherwise.
      for (let i = 0; i < 5; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        lock.ensureValid();
        await region.put(new Put('r', { rowLock: lock }).add('f', 'q', `v${i}`));
      }
      assert.equal(lock.signal.aborted, false);
      assert.deepEqual(lost, []);
      assert.equal(await region.tryLockRow('r'), null, 'nobody else can take the row meanwhile');
      await lock.close();
      assert.equal(lock.signal.reason?.code, 'ALREADY_CLOSED');
      assert.equal(lock.lostReason, undefined, 'a release is not a loss');
      const next = await region.tryLockRow('r');
      assert.ok(next !== null);
      await next.close();
    });

    it('close() is idempotent, also when concurrent; afterwards the signal says ALREADY_CLOSED', async () => {
      await using region = await open();
      const lock = await region.lockRow('r');
      await Promise.all([lock.close(), lock.close(), lock[Symbol.asyncDispose]()]);
      await lock.close();
      assert.equal(lock.closed, true);
      assert.equal((lock.signal.reason as { code?: string }).code, 'ALREADY_CLOSED');
      assert.throws(() => lock.ensureValid(), { code: 'ALREADY_CLOSED' });
      await assert.rejects(region.unlockRow(lock), { code: 'UNKNOWN_ROW_LOCK' });
      // The row was unlocked exactly once: the next holder is not disturbed by a late close.
      const next = await region.lockRow('r', { waitMs: 0 });
      await lock.close();
      next.ensureValid();
      await next.close();
    });

    it('region.unlockRow(lock) closes the handle too', async () => {
      await using region = await open();
      const lock = await region.lockRow('r');
      const signal = lock.signal;
      await region.unlockRow(lock.lockId);
      assert.equal(lock.closed, true);
      assert.equal(signal.aborted, true);
      assert.equal(lock.lostReason, undefined);
      await lock.close();
    });

    it('await using unlocks at scope exit', async () => {
      await using region = await open();
      let token = 0;
      {
        await using lock = await region.lockRow('r');
        token = lock.token;
        assert.equal(await region.tryLockRow('r'), null);
      }
      const again = await region.tryLockRow('r');
      assert.ok(again !== null && again.token > token);
      await again.close();
    });

    it('closing the region aborts held locks with LOCK_LOST', async () => {
      const region = await open();
      const lock = await region.lockRow('r');
      const signal = lock.signal;
      await region.close();
      assert.equal((signal.reason as LockLostError).code, 'LOCK_LOST');
      await lock.close();
    });
  });

  describe(`${variant.name}: withRowLock`, () => {
    it('inside fn, a wait for the same row fails at once with DEADLOCK; other rows and other tasks are unaffected', async () => {
      // The region's wait is long: a wait that is not refused would outlast the test's patience.
      await using region = await open();
      const order: string[] = [];
      await region.withRowLock('r', async (lock) => {
        await assert.rejects(region.lockRow('r', { waitMs: 60_000 }), { code: 'DEADLOCK' });
        await assert.rejects(
          region.withRowLock('r', () => 'never', { waitMs: 60_000 }),
          {
            code: 'DEADLOCK',
          },
        );
        // A put that forgot to carry the lock would wait for its own caller.
        await assert.rejects(
          region.put(new Put('r').add('f', 'q', 'forgot the lock'), { waitMs: 60_000 }),
          { code: 'DEADLOCK' },
        );
        await region.put(new Put('r', { rowLock: lock }).add('f', 'q', 'with the lock'));
        await region.withRowLock('other', () => order.push('other row'));
        lock.ensureValid();
        order.push('inner done');
      });
      // A task not started inside fn waits for the holder, and gets the row after it.
      let inside = false;
      const holder = region.withRowLock('r', async () => {
        inside = true;
        await new Promise((resolve) => setTimeout(resolve, 100));
        order.push('holder releases');
      });
      while (!inside) await new Promise((resolve) => setTimeout(resolve, 1));
      const outside = region.put(new Put('r').add('f', 'q', 'outside'), { waitMs: 60_000 });
      await holder;
      await outside;
      order.push('outside put');
      assert.deepEqual(order, ['other row', 'inner done', 'holder releases', 'outside put']);
    });

    it('runs fn under the lock and unlocks on return and on throw', async () => {
      await using region = await open();
      const result = await region.withRowLock('r', async (lock) => {
        assert.equal(await region.tryLockRow('r'), null);
        await region.put(new Put('r', { rowLock: lock }).add('f', 'q', 'v'));
        return lock.token;
      });
      assert.equal(typeof result, 'number');
      const boom = new Error('boom');
      await assert.rejects(
        region.withRowLock('r', () => {
          throw boom;
        }),
        boom,
      );
      const free = await region.tryLockRow('r');
      assert.ok(free !== null);
      await free.close();
    });
  });
}

describe('RowLock (in process only): durable tokens, fake and stuck clocks', () => {
  it('the token keeps increasing across a reopen of the directory, even with the wall clock set back', async () => {
    using dir = tempDir('locksmith-tokens-');
    const tokens: number[] = [];
    // The second and third openings run on a wall clock an hour, then a day, behind the first.
    for (const wallStart of [1_700_000_000_000, 1_700_000_000_000 - 3_600_000, 1_600_000_000_000]) {
      await using region = await open({ dir: dir.path, clock: new FakeClock(0, wallStart) });
      for (let i = 0; i < 3; i++) {
        const lock = await region.lockRow('r');
        tokens.push(lock.token);
        await lock.close();
      }
    }
    assert.ok(existsSync(join(dir.path, 'row-lock.tokens')));
    for (let i = 1; i < tokens.length; i++) {
      assert.ok((tokens[i] as number) > (tokens[i - 1] as number), `tokens ${tokens.join(', ')}`);
    }
  });

  it('lease expiry aborts the signal with LEASE_EXPIRED, fires lost and lock-expired (fake clock)', async () => {
    const clock = new FakeClock();
    await using region = await open({ clock, leasePeriodMs: 1_000 });
    const lock = await region.lockRow('r', { renew: false });
    const signal = lock.signal;
    const lost: LockLostError[] = [];
    const expired: RowLock[] = [];
    lock.on('lost', (reason) => lost.push(reason));
    region.on('lock-expired', (l) => expired.push(l));
    await clock.advance(999);
    assert.equal(signal.aborted, false);
    lock.ensureValid();
    await clock.advance(1);
    assert.equal(signal.aborted, true);
    assert.equal((signal.reason as LockLostError).code, 'LEASE_EXPIRED');
    assert.equal(lost.length, 1);
    assert.equal(lost[0], signal.reason);
    assert.deepEqual(expired, [lock]);
    assert.throws(() => lock.ensureValid(), { code: 'LEASE_EXPIRED' });
    assert.equal(lock.lostReason?.code, 'LEASE_EXPIRED');
    // The row is free and the old lock is refused where it is used.
    await assert.rejects(region.put(new Put('r', { rowLock: lock }).add('f', 'q', 'late')), {
      code: 'UNKNOWN_ROW_LOCK',
    });
    assert.ok((await region.tryLockRow('r')) !== null);
    await lock.close(); // after expiry: resolves, does nothing
  });

  it('an overdue lease found by ensureValid() before its timer fired is reported as lost', async () => {
    // A clock whose timers never fire, as if the event loop were blocked past the deadline.
    let now = 0;
    const clock = {
      monotonic: () => now,
      wall: () => 1_700_000_000_000 + now,
      sleep: () => new Promise<void>(() => {}),
      setTimer: () => () => {},
    };
    await using region = await Region.open({ families: ['f'], clock, leasePeriodMs: 1_000 });
    const lock = await region.lockRow('r', { renew: false });
    const signal = lock.signal;
    now = 500;
    await region.renewLease(lock);
    now = 1_499;
    lock.ensureValid();
    assert.equal(signal.aborted, false);
    now = 1_500;
    assert.throws(() => lock.ensureValid(), { code: 'LEASE_EXPIRED' });
    assert.equal((signal.reason as LockLostError).code, 'LEASE_EXPIRED');
  });

  it('rejects with LEASE_EXPIRED when the lease ran out while fn ran', async () => {
    const clock = new FakeClock();
    await using region = await open({ clock, leasePeriodMs: 1_000 });
    await assert.rejects(
      region.withRowLock(
        'r',
        async (lock) => {
          await clock.advance(1_000);
          assert.equal(lock.signal.aborted, true);
          return 'done';
        },
        { renew: false },
      ),
      { code: 'LEASE_EXPIRED' },
    );
  });
});
