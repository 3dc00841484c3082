import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AbortedError } from '../../src/core/errors.js';
import { checkCallOptions } from '../../src/rows/call-options.js';
import { type DeferredSignal, deferredSignal } from '../../src/rows/deferred-signal.js';
import { RowLockManager } from '../../src/rows/row-lock-manager.js';

/** A deferred signal that counts how often its signal was made, as the server's calls do. */
class Counting implements DeferredSignal {
  made = 0;
  readonly #controller = new AbortController();
  #aborted = false;

  get aborted(): boolean {
    return this.#aborted;
  }

  get signal(): AbortSignal {
    this.made++;
    return this.#controller.signal;
  }

  abort(reason: Error): void {
    this.#aborted = true;
    this.#controller.abort(reason);
  }
}

describe('deferred signal (the server passes its calls cancellation this way)', () => {
  test('survives the option check; a free row is granted without making the signal', async () => {
    const locks = new RowLockManager();
    const deferred = new Counting();
    const checked = checkCallOptions({ [deferredSignal]: deferred }, 'lockRow');
    assert.equal(checked[deferredSignal], deferred);
    const grant = await locks.lockRow('r', checked);
    await locks.acquireImplicitMany(['a', 'b'], checked);
    assert.equal(deferred.made, 0);
    locks.unlockRow(grant.lockId as string);
    locks.close();
  });

  test('a call cancelled before it starts is refused even on a free row', async () => {
    const locks = new RowLockManager();
    const deferred = new Counting();
    const reason = new Error('cancelled');
    deferred.abort(reason);
    await assert.rejects(locks.lockRow('r', { [deferredSignal]: deferred }), (err: unknown) => {
      assert.ok(err instanceof AbortedError);
      assert.equal(err.cause, reason);
      return true;
    });
    await assert.rejects(
      locks.acquireImplicitMany(['a'], { [deferredSignal]: deferred }),
      AbortedError,
    );
    assert.equal(locks.heldCount, 0);
    locks.close();
  });

  test('a wait makes the signal and is cancelled by it, in a single row and in many', async () => {
    const locks = new RowLockManager();
    const holder = await locks.lockRow('r', { owner: 'holder' });
    const deferred = new Counting();
    const one = locks.lockRow('r', { owner: 'one', [deferredSignal]: deferred });
    const many = locks.acquireImplicitMany(['a', 'r'], {
      owner: 'many',
      [deferredSignal]: deferred,
    });
    await new Promise((r) => setImmediate(r));
    assert.equal(deferred.made >= 2, true, 'each wait made (asked for) the signal');
    deferred.abort(new Error('cancelled'));
    await assert.rejects(one, AbortedError);
    await assert.rejects(many, AbortedError);
    assert.equal(locks.heldCount, 1, 'only the holder; the rows taken on the way are given back');
    locks.unlockRow(holder.lockId as string);
    locks.close();
  });

  test('a signal given with it wins', async () => {
    const locks = new RowLockManager();
    const deferred = new Counting();
    deferred.abort(new Error('deferred'));
    const grant = await locks.lockRow('r', {
      signal: new AbortController().signal,
      [deferredSignal]: deferred,
    });
    assert.equal(locks.heldCount, 1);
    locks.unlockRow(grant.lockId as string);
    locks.close();
  });
});
