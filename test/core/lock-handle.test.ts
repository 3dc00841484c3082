import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  AlreadyClosedError,
  LockHandleBase,
  LockLostError,
  withHandle,
} from '../../src/core/index.js';

/** The smallest handle: loss is reported from outside, as a family's background check does. */
class TestHandle extends LockHandleBase {
  releases = 0;
  broken: Error | undefined;
  releaseError: Error | undefined;
  lose(code: 'LOCK_LOST' | 'LEASE_EXPIRED' | 'LOCK_UNCONFIRMED'): void {
    this.markLost(new LockLostError(`lost ${this.resource}`, { code }));
  }
  protected checkValid(): void {
    if (this.broken !== undefined) this.fail(this.broken);
  }
  protected closeOnce(): void {
    this.releases++;
    if (this.releaseError !== undefined) throw this.releaseError;
  }
}

test('a loss aborts the signal by itself, fires lost once, and stays lost', () => {
  const h = new TestHandle('r', 7);
  const signal = h.signal;
  const seen: string[] = [];
  h.on('lost', (reason) => seen.push(reason.code));
  h.lose('LEASE_EXPIRED');
  h.lose('LOCK_LOST');
  assert.equal(signal.aborted, true);
  assert.ok(signal.reason instanceof LockLostError);
  assert.equal(signal.reason.code, 'LEASE_EXPIRED');
  assert.deepEqual(seen, ['LEASE_EXPIRED']);
  assert.equal(h.lostReason?.code, 'LEASE_EXPIRED');
  assert.throws(() => h.ensureValid(), { code: 'LEASE_EXPIRED' });
  assert.throws(() => h.ensureValid(), { code: 'LEASE_EXPIRED' });
});

test('a signal first asked for after the loss is already aborted with the reason', () => {
  const h = new TestHandle('r', 1);
  h.lose('LOCK_UNCONFIRMED');
  assert.equal(h.signal.aborted, true);
  assert.equal((h.signal.reason as LockLostError).code, 'LOCK_UNCONFIRMED');
});

test('a failed ensureValid keeps throwing the family error it threw first', () => {
  const h = new TestHandle('r', 1);
  h.broken = new AlreadyClosedError('invalidated by an external force');
  assert.throws(() => h.ensureValid(), { code: 'ALREADY_CLOSED' });
  h.broken = undefined;
  assert.throws(() => h.ensureValid(), { code: 'ALREADY_CLOSED', message: /external force/ });
  assert.equal(h.lostReason?.code, 'LOCK_LOST');
  assert.equal(h.signal.reason, h.lostReason);
});

test('close releases once, aborts the signal as released, and a later loss is ignored', async () => {
  const h = new TestHandle('r', 1);
  const signal = h.signal;
  await Promise.all([h.close(), h.close(), h[Symbol.asyncDispose]()]);
  await h.close();
  assert.equal(h.releases, 1);
  assert.ok(signal.reason instanceof AlreadyClosedError);
  h.lose('LOCK_LOST');
  assert.equal(h.lostReason, undefined);
});

test('withHandle releases on return, on throw, and rejects when the lock was lost meanwhile', async () => {
  const ok = new TestHandle('a', 1);
  assert.equal(await withHandle(ok, (h) => h.token + 1), 2);
  assert.equal(ok.releases, 1);

  const thrown = new TestHandle('b', 1);
  await assert.rejects(
    withHandle(thrown, () => {
      throw new Error('work failed');
    }),
    /work failed/,
  );
  assert.equal(thrown.releases, 1);

  const lost = new TestHandle('c', 1);
  await assert.rejects(
    withHandle(lost, async (h) => {
      h.lose('LEASE_EXPIRED');
      return 'done';
    }),
    { code: 'LEASE_EXPIRED' },
  );
  assert.equal(lost.releases, 1);
});

test('withHandle: the loss wins over a failing release, which is kept as suppressed', async () => {
  const h = new TestHandle('d', 1);
  h.releaseError = new Error('cannot release: the lock file is gone');
  const err = await withHandle(h, async (held) => {
    held.lose('LOCK_LOST');
    return 'done';
  }).then(
    () => assert.fail('resolved although the lock was lost'),
    (e: unknown) => e as LockLostError & { suppressed?: Error },
  );
  assert.ok(err instanceof LockLostError);
  assert.equal(err.code, 'LOCK_LOST');
  assert.equal(err.suppressed, h.releaseError);

  const plain = new TestHandle('e', 1);
  plain.releaseError = new Error('release failed');
  await assert.rejects(
    withHandle(plain, () => 1),
    /release failed/,
  );
});
