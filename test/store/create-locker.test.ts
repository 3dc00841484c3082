import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  type CreateLockerOptions,
  checkLeaseRules,
  createLocker,
  DATABASE_QUERY_TIMEOUT_MS,
  DatabaseLocker,
  InvalidArgumentError,
  LeaseDatabaseLocker,
  MIN_LEASE_MS,
  SharedFileLocker,
} from '../../src/store/index.js';
import { tempDir } from '../helpers.js';

describe('createLocker', () => {
  it('makes each kind from plain options, connecting to nothing', async () => {
    using tmp = tempDir();
    const shared = await createLocker({
      kind: 'shared-file',
      directory: join(tmp.path, 'store'),
      acquireIntervalMs: 250,
      failIfLocked: true,
    });
    assert.ok(shared instanceof SharedFileLocker);
    assert.equal(shared.acquireIntervalMs, 250);
    assert.equal(shared.failIfLocked, true);

    const url = `sqlite:${join(tmp.path, 'locks.db')}`;
    const lease = await createLocker({
      kind: 'lease-database',
      database: url,
      leaseHolderId: 'a',
      leaseMs: 3000,
    });
    assert.ok(lease instanceof LeaseDatabaseLocker);
    assert.equal(lease.leaseHolderId, 'a');
    assert.equal(lease.leaseMs, 3000, 'the lease is the acquire interval');

    const db = await createLocker({ kind: 'database', database: url, lockTableName: 'L' });
    assert.ok(db instanceof DatabaseLocker);
    assert.equal(db.queryTimeoutMs, DATABASE_QUERY_TIMEOUT_MS);
    assert.equal(db.lockTableName, 'L');
    for (const locker of [shared, lease, db]) await locker.stop();
  });

  it('refuses an unknown kind and bad settings with an InvalidArgumentError', async () => {
    await assert.rejects(
      createLocker({ kind: 'zookeeper' } as unknown as CreateLockerOptions),
      (err: unknown) =>
        err instanceof InvalidArgumentError && /kind must be one of/.test(err.message),
    );
    await assert.rejects(
      createLocker({ kind: 'database', database: 'sqlite:x', lockTableName: 'no such' }),
      InvalidArgumentError,
    );
  });

  it('refuses an option the kind does not take, instead of running with a default', async () => {
    using tmp = tempDir();
    const url = `sqlite:${join(tmp.path, 'locks.db')}`;
    for (const [options, pattern] of [
      // A lease on the held-transaction locker, which has none: it used to be dropped.
      [{ kind: 'database', database: url, leaseMs: 5000 }, /unknown option "leaseMs"/],
      [{ kind: 'lease-database', database: url, leaseMS: 5000 }, /unknown option "leaseMS"/],
      [{ kind: 'lease-database', database: url, acquireIntervalMs: 5000 }, /"acquireIntervalMs"/],
      [{ kind: 'shared-file', directory: tmp.path, database: url }, /unknown option "database"/],
      [{ kind: 'shared-file', directory: tmp.path, failIfLocked: 'yes' }, /failIfLocked/],
      [{ kind: 'lease-database', database: url, leaseMs: 500 }, /leaseMs 500: must be >= 1000/],
    ] as const) {
      await assert.rejects(
        createLocker(options as unknown as CreateLockerOptions),
        (err: unknown) => err instanceof InvalidArgumentError && pattern.test(err.message),
        JSON.stringify(options),
      );
    }
  });
});

describe('checkLeaseRules', () => {
  it('accepts workable timings and refuses the ones that cannot work, in library terms by default', () => {
    checkLeaseRules({ kind: 'lease-database', leaseMs: 4000, renewMs: 1000 });
    checkLeaseRules({ kind: 'shared-file', renewMs: 60_000 });
    assert.throws(
      () => checkLeaseRules({ kind: 'lease-database', leaseMs: MIN_LEASE_MS - 1 }),
      /^InvalidArgumentError: leaseMs \(999ms\) must be at least 1s/,
    );
    assert.throws(
      () => checkLeaseRules({ kind: 'lease-database', renewMs: 12_000 }),
      /renewMs \(12000ms\) must be shorter than leaseMs \(10000ms, the default\)/,
    );
    assert.throws(
      () => checkLeaseRules({ kind: 'lease-database', leaseMs: 4000, renewMs: 1600 }),
      /renewMs \(1600ms\) must be at most 3\/8 of leaseMs \(4000ms\)/,
    );
    assert.throws(
      () => checkLeaseRules({ kind: 'database', renewMs: 2_147_483_000 }),
      /renewMs \(2147483000ms\) is too long/,
    );
  });
});
