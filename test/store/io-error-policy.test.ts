import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { LockIOError } from '../../src/core/errors.js';
import {
  type IOErrorPolicy,
  ignoreIOErrors,
  LeaseDatabaseLocker,
  leaseLockerIOErrorPolicy,
  Supervisor,
  stopOnUnknownOwnership,
} from '../../src/store/index.js';
import { eventually, tempDir } from '../helpers.js';

const context = (recheck: () => Promise<boolean>) => ({ locker: 'test', recheck });
const fails = () => Promise.reject(new Error('still failing'));

describe('I/O error policies', () => {
  it('ignore (ActiveMQ default handler): every SQL error is ignored, never a recheck (conformance S34)', async () => {
    let rechecks = 0;
    const verdict = await ignoreIOErrors.handle(
      new Error('x'),
      context(async () => {
        rechecks++;
        return false;
      }),
    );
    assert.equal(verdict, 'unknown');
    assert.equal(rechecks, 0);
  });

  it('lease-locker handler: only an authoritative false stops; an error during the check counts as owner (conformance S36)', async () => {
    assert.equal(
      await leaseLockerIOErrorPolicy.handle(
        new Error('x'),
        context(async () => false),
      ),
      'lost',
    );
    assert.equal(await leaseLockerIOErrorPolicy.handle(new Error('x'), context(fails)), 'unknown');
    assert.equal(
      await leaseLockerIOErrorPolicy.handle(
        new Error('x'),
        context(async () => true),
      ),
      'unknown',
    );
  });

  it('the safe default: confirmed ownership continues, anything else stops (conformance S35)', async () => {
    assert.equal(
      await stopOnUnknownOwnership.handle(
        new Error('x'),
        context(async () => true),
      ),
      'owner',
    );
    assert.equal(
      await stopOnUnknownOwnership.handle(
        new Error('x'),
        context(async () => false),
      ),
      'lost',
    );
    assert.equal(await stopOnUnknownOwnership.handle(new Error('x'), context(fails)), 'lost');
  });
});

describe('I/O error policies inside the lease locker', () => {
  /** A master whose renewals start failing (its lock table is dropped behind its back). */
  async function failingMaster(dir: string, ioErrorPolicy?: IOErrorPolicy) {
    const path = `${dir}/io.db`;
    const locker = new LeaseDatabaseLocker({
      database: `sqlite:${path}`,
      lockTableName: 'IO_LOCK',
      leaseMs: 10_000,
      ...(ioErrorPolicy === undefined ? {} : { ioErrorPolicy }),
    });
    await locker.start();
    const db = new Database(path);
    db.exec('DROP TABLE IO_LOCK');
    db.close();
    return locker;
  }

  it('default: a renewal error with ownership unconfirmed makes keepAlive false (conformance S34)', async () => {
    using dir = tempDir();
    const l = await failingMaster(dir.path);
    assert.equal(l.ioErrorPolicy, stopOnUnknownOwnership);
    assert.equal(await l.keepAlive(), false);
    await l.stop();
  });

  it('ActiveMQ policies: the error passes through as "unknown" (a LockIOError) (conformance S34, S36)', async () => {
    for (const policy of [ignoreIOErrors, leaseLockerIOErrorPolicy]) {
      using dir = tempDir();
      const l = await failingMaster(dir.path, policy);
      await assert.rejects(l.keepAlive(), LockIOError);
      await l.stop();
    }
  });

  it('through the supervisor: the default policy stops the service even without stopOnError (conformance S35)', async () => {
    using dir = tempDir();
    const path = `${dir.path}/sup.db`;
    const locker = new LeaseDatabaseLocker({
      database: `sqlite:${path}`,
      lockTableName: 'IO_LOCK',
      leaseMs: 10_000,
    });
    const events: string[] = [];
    const supervisor = new Supervisor({
      locker,
      keepAlivePeriodMs: 50,
      restartAllowed: false,
      service: {
        start: () => {
          events.push('start');
        },
        stop: () => {
          events.push('stop');
        },
      },
    });
    supervisor.on('demoted', () => events.push('demoted'));
    await supervisor.start();
    const db = new Database(path);
    db.exec('DROP TABLE IO_LOCK');
    db.close();
    await eventually(() => events.includes('demoted'), 3_000);
    assert.deepEqual(events, ['start', 'stop', 'demoted']);
    await supervisor.stop();
  });
});
