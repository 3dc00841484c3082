import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type PendingCall, PendingCalls } from '../../src/client/pending-calls.js';
import { ConnectionLostError } from '../../src/core/errors.js';

/** Calls with a connection that is `ready` or not; what was sent and cancelled is recorded. */
function calls(ready = true) {
  const sent: [number, PendingCall][] = [];
  const cancelled: number[] = [];
  const state = { ready };
  const pending: PendingCalls = new PendingCalls({
    dispatch: (id, call) => {
      if (state.ready) {
        call.sentAt = 1;
        sent.push([id, call]);
      } else {
        pending.queue(id);
      }
    },
    cancelSent: (id) => {
      if (!state.ready) return false;
      cancelled.push(id);
      return true;
    },
  });
  return { pending, sent, cancelled, state };
}

describe('calls in flight', () => {
  it('a call answered resolves with its value; ids are distinct among calls in flight', async () => {
    const { pending, sent } = calls();
    const a = pending.start('ping', [], {}, 0);
    const b = pending.start('get', ['t', []], {}, 0);
    const [[idA], [idB]] = sent as [[number, PendingCall], [number, PendingCall]];
    assert.notEqual(idA, idB);
    const call = pending.answered(idB) as PendingCall;
    pending.settle(call);
    call.resolve('value');
    assert.equal(await b, 'value');
    assert.equal(pending.size, 1, 'the other call is still listed');
    pending.close(new ConnectionLostError('closed'));
    await assert.rejects(a, { code: 'CONNECTION_LOST', message: 'closed' });
    await assert.rejects(pending.start('ping', [], {}, 0), { message: 'The client is closed' });
  });

  it('a call past its timeout fails naming the method and the timeout; the server is asked to cancel it and it stays listed for its late answer', async () => {
    const { pending, sent, cancelled } = calls();
    const slow = pending.start('lockRow', ['t', 'r', 10], { timeoutMs: 30 }, 0);
    const never = pending.start('get', [], {}, 0);
    await assert.rejects(slow, {
      code: 'CONNECTION_LOST',
      message: 'lockRow got no answer within 30 ms',
    });
    const [[id]] = sent as [[number, PendingCall]];
    assert.deepEqual(cancelled, [id]);
    assert.equal(pending.get(id)?.settled, true, 'kept, settled, until its answer');
    pending.close(new ConnectionLostError('closed'));
    await assert.rejects(never);
  });

  it('deadlines fire in deadline order, each at its own time, with one timer', async () => {
    const { pending } = calls();
    const order: string[] = [];
    const track = (name: string, timeoutMs: number) =>
      pending.start('ping', [], { timeoutMs }, 0).catch(() => order.push(name));
    await Promise.all([track('c', 90), track('a', 10), track('b', 50)]);
    assert.deepEqual(order, ['a', 'b', 'c']);
  });

  it('an aborted call fails with ABORTED at once; an already aborted signal sends nothing', async () => {
    const { pending, sent } = calls();
    const controller = new AbortController();
    const call = pending.start('lockRow', [], { signal: controller.signal }, 0);
    controller.abort(new Error('user gave up'));
    await assert.rejects(call, { code: 'ABORTED', message: 'lockRow was aborted' });
    await assert.rejects(pending.start('get', [], { signal: controller.signal }, 0), {
      code: 'ABORTED',
    });
    assert.equal(sent.length, 1);
  });

  it('a lost connection: unsent and idempotent calls wait for the next one; a sent call fails as maybe applied', async () => {
    const { pending, state } = calls();
    const put = pending.start('put', [], {}, 0);
    const get = pending.start('get', [], { idempotent: true }, 0);
    state.ready = false;
    const later = pending.start('ping', [], {}, 0);
    pending.connectionLost(new ConnectionLostError('the connection closed'));
    await assert.rejects(put, {
      code: 'CONNECTION_LOST',
      message: 'put: the connection closed; the server may or may not have applied it',
    });
    const queued = pending.takeQueued().map(([, call]) => call.method);
    assert.deepEqual(queued.sort(), ['get', 'ping']);
    assert.deepEqual(pending.takeQueued(), [], 'taken once');
    pending.close(new ConnectionLostError('closed'));
    await assert.rejects(get);
    await assert.rejects(later);
  });

  it('a timer for deadlines does not keep the process alive once no timed call is left', async () => {
    const { pending, sent } = calls();
    const call = pending.start('ping', [], { timeoutMs: 60_000 }, 0);
    const [[id]] = sent as [[number, PendingCall]];
    const answered = pending.answered(id) as PendingCall;
    pending.settle(answered);
    answered.resolve(null);
    assert.equal(await call, null);
    // The test process ends on its own only if the 60 s timer was unref'd.
    await sleep(1);
  });
});
