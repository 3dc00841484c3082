import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AbortedError } from '../../src/core/errors.js';
import { callContext, type RowCallContext } from '../../src/rows/call-context.js';
import { checkCallOptions } from '../../src/rows/call-options.js';
import { Put, Region } from '../../src/rows/index.js';
import { RowLockManager } from '../../src/rows/row-lock-manager.js';
import { tempDir } from '../helpers.js';

/** A call context that counts how often its signal was made and its waits, as the server's calls do. */
class Counting implements RowCallContext {
  made = 0;
  waits = 0;
  readonly #controller = new AbortController();
  #aborted = false;

  get aborted(): boolean {
    return this.#aborted;
  }

  get signal(): AbortSignal {
    this.made++;
    return this.#controller.signal;
  }

  waiting(): void {
    this.waits++;
  }

  abort(reason: Error): void {
    this.#aborted = true;
    this.#controller.abort(reason);
  }
}

describe('call context (the server follows its calls through the row store this way)', () => {
  test('survives the option check; a free row is granted without making the signal', async () => {
    const locks = new RowLockManager();
    const deferred = new Counting();
    const checked = checkCallOptions({ [callContext]: deferred }, 'lockRow');
    assert.equal(checked[callContext], deferred);
    const grant = await locks.lockRow('r', checked);
    await locks.acquireImplicitMany(['a', 'b'], checked);
    assert.equal(deferred.made, 0);
    assert.equal(deferred.waits, 0, 'nothing waited');
    locks.unlockRow(grant.lockId as string);
    locks.close();
  });

  test('a call cancelled before it starts is refused even on a free row', async () => {
    const locks = new RowLockManager();
    const deferred = new Counting();
    const reason = new Error('cancelled');
    deferred.abort(reason);
    await assert.rejects(locks.lockRow('r', { [callContext]: deferred }), (err: unknown) => {
      assert.ok(err instanceof AbortedError);
      assert.equal(err.cause, reason);
      return true;
    });
    await assert.rejects(
      locks.acquireImplicitMany(['a'], { [callContext]: deferred }),
      AbortedError,
    );
    assert.equal(locks.heldCount, 0);
    locks.close();
  });

  test('a wait makes the signal and is cancelled by it, in a single row and in many', async () => {
    const locks = new RowLockManager();
    const holder = await locks.lockRow('r', { owner: 'holder' });
    const deferred = new Counting();
    const one = locks.lockRow('r', { owner: 'one', [callContext]: deferred });
    const many = locks.acquireImplicitMany(['a', 'r'], {
      owner: 'many',
      [callContext]: deferred,
    });
    await new Promise((r) => setImmediate(r));
    assert.equal(deferred.made >= 2, true, 'each wait made (asked for) the signal');
    assert.equal(deferred.waits, 2, 'each wait said so, once');
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
      [callContext]: deferred,
    });
    assert.equal(locks.heldCount, 1);
    locks.unlockRow(grant.lockId as string);
    locks.close();
  });

  test('a write that only waits for its fsync says so; one that writes nothing does not', async () => {
    using tmp = tempDir();
    const region = await Region.open({ families: ['f'], dir: tmp.path });
    const context = new Counting();
    await region.put(new Put('r').add('f', 'q', 'v'), { [callContext]: context });
    assert.equal(context.waits, 1);
    assert.equal(context.made, 0);
    const nothing = new Counting();
    await region.checkAndPut('r', 'f', 'q', 'other', new Put('r').add('f', 'q', 'w'), {
      [callContext]: nothing,
    });
    assert.equal(nothing.waits, 0);
    await region.close();
  });
});
