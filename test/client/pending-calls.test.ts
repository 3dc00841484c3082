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

  it('a call with a server-side wait: each send carries what is left of it; queued past it, the call fails with LOCK_TIMEOUT, long before its round-trip timeout', async () => {
    const { pending, sent, state } = calls();
    const startedAt = performance.now();
    const wait = { until: startedAt + 300, arg: 2 };
    const lock = pending.start(
      'lockRow',
      ['t', 'r', 300, false],
      { idempotent: true, timeoutMs: 30_300, wait },
      0,
    );
    const [[, first]] = sent as [[number, PendingCall]];
    const args = pending.argsToSend(first);
    assert.ok((args[2] as number) <= 300 && (args[2] as number) > 0, `first send: ${args[2]}`);
    await sleep(100);
    state.ready = false;
    pending.connectionLost(new ConnectionLostError('the connection closed'));
    const [[, again]] = pending.takeQueued() as [[number, PendingCall]];
    pending.queue(sent[0]?.[0] as number);
    assert.ok((pending.argsToSend(again)[2] as number) < 300, 'a resend waits only what is left');
    await assert.rejects(lock, { code: 'LOCK_TIMEOUT' });
    const tookMs = performance.now() - startedAt;
    // Bound: the wait, plus a margin for a busy machine (the round-trip timeout would be 30 s).
    assert.ok(tookMs >= 290 && tookMs < 5_000, `failed after ${tookMs} ms`);
    // A call sent and in flight is left to the server's answer (or its round-trip timeout).
    state.ready = true;
    const inFlight = pending.start(
      'lockRow',
      ['t', 'r', 50, false],
      { idempotent: true, timeoutMs: 60_000, wait: { until: performance.now() + 50, arg: 2 } },
      0,
    );
    let settled = false;
    inFlight.then(
      () => {
        settled = true;
      },
      () => {
        settled = true;
      },
    );
    await sleep(200);
    assert.equal(settled, false, 'a sent call is not timed out by its wait');
    pending.close(new ConnectionLostError('closed'));
    await assert.rejects(inFlight);
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
