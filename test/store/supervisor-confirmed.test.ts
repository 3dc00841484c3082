import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';
import { LockLostError } from '../../src/core/errors.js';
import { type Locker, Mastership, type Service } from '../../src/store/index.js';
import {
  type ConfirmedEvent,
  Supervisor,
  type SupervisorEvent,
} from '../../src/store/supervisor.js';
import { eventually } from '../helpers.js';

/** Grants at once; keep-alives answer from `answers` (true when empty); a settable deadline. */
class QuickLocker extends EventEmitter<{ lost: [LockLostError] }> implements Locker {
  readonly name = 'quick';
  readonly acquireIntervalMs = 10;
  readonly failIfLocked = false;
  readonly defaultKeepAlivePeriodMs = 20;
  token: number | undefined;
  deadline = 0;
  answers: boolean[] = [];
  #next = 1;
  get validUntil(): number | undefined {
    return this.token === undefined ? undefined : this.deadline;
  }
  async start(): Promise<Mastership> {
    this.token = this.#next++;
    this.deadline = performance.now() + 1000;
    return new Mastership(this);
  }
  async keepAlive(): Promise<boolean> {
    const ok = this.answers.shift() ?? true;
    if (ok) this.deadline = performance.now() + 1000;
    return ok;
  }
  async stop(): Promise<void> {
    this.token = undefined;
  }
}

function service(log: string[]): Service {
  return {
    async start({ token }) {
      log.push(`start ${token}`);
    },
    async stop() {
      log.push('stop');
    },
  };
}

test('Supervisor: confirmed comes before the service starts and after each true keep-alive, with the locker deadline', async () => {
  const locker = new QuickLocker();
  const log: string[] = [];
  const sup = new Supervisor({ locker, service: service(log) });
  const confirmed: ConfirmedEvent[] = [];
  sup.on('confirmed', (e) => {
    confirmed.push(e);
    log.push(`confirmed ${e.token}`);
  });
  await sup.start();
  assert.deepEqual(log.slice(0, 2), ['confirmed 1', 'start 1']);
  await eventually(() => confirmed.length >= 4);
  for (const [i, e] of confirmed.entries()) {
    assert.equal(e.token, 1);
    assert.ok(e.validUntil > e.at, 'the deadline is after the confirmation');
    if (i > 0) assert.ok(e.at > (confirmed[i - 1] as ConfirmedEvent).at, 'in order');
  }
  // A false keep-alive confirms nothing and demotes.
  const before = confirmed.length;
  locker.answers.push(false);
  const demoted = await new Promise<SupervisorEvent>((r) => sup.once('demoted', r));
  assert.ok(demoted.reason instanceof LockLostError);
  assert.ok(confirmed.filter((e) => e.token === 1).length >= before);
  await sup.stop();
});

test('Supervisor.demote(): ends the mastership as a loss once, then waits again; false when not master', async () => {
  const locker = new QuickLocker();
  const log: string[] = [];
  const sup = new Supervisor({ locker, service: service(log), keepAlivePeriodMs: 0 });
  assert.equal(sup.demote(new Error('x')), false, 'not started');
  const masters: number[] = [];
  sup.on('master', ({ token }) => masters.push(token as number));
  const demotions: SupervisorEvent[] = [];
  sup.on('demoted', (e) => demotions.push(e));
  await sup.start();
  const reason = new LockLostError('the watchdog stopped the command');
  assert.equal(sup.demote(reason), true);
  assert.equal(sup.demote(reason), false, 'already ending');
  await eventually(() => masters.length >= 2);
  assert.equal(demotions.length, 1);
  assert.equal(demotions[0]?.reason, reason);
  assert.equal(demotions[0]?.token, 1);
  assert.deepEqual(masters, [1, 2]);
  assert.deepEqual(log.slice(0, 3), ['start 1', 'stop', 'start 2']);
  // Any other reason is wrapped in a LockLostError.
  assert.equal(sup.demote('why'), true);
  await eventually(() => demotions.length >= 2);
  assert.ok(demotions[1]?.reason instanceof LockLostError);
  await sup.stop();
});
