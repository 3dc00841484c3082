import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { unlinkSync } from 'node:fs';
import { describe, it } from 'node:test';
import { FakeClock } from '../../src/core/clock.js';
import {
  AbortedError,
  InvalidArgumentError,
  LockIOError,
  LockLostError,
  LockObtainFailedError,
} from '../../src/core/errors.js';
import {
  type Locker,
  type LockerStartOptions,
  Mastership,
  type Service,
  type ServiceContext,
  SharedFileLocker,
  Supervisor,
  type SupervisorEvents,
} from '../../src/store/index.js';
import { eventually, tempDir } from '../helpers.js';
import { recordingLogger, settle, tracked } from './store-helpers.js';

/** A locker driven by the test: start resolves when `grant()` is called. */
class ScriptedLocker extends EventEmitter<{ lost: [LockLostError] }> implements Locker {
  readonly name = 'scripted';
  readonly acquireIntervalMs = 100;
  readonly failIfLocked = false;
  readonly defaultKeepAlivePeriodMs = 1_000;
  token: number | undefined;
  get validUntil(): number | undefined {
    return this.token === undefined ? undefined : Number.POSITIVE_INFINITY;
  }
  calls: string[] = [];
  startOptions: LockerStartOptions[] = [];
  keepAliveResults: (boolean | Error)[] = [];
  startFailure: Error | undefined;
  #grant: (() => void) | undefined;
  #next = 10;

  start(options?: LockerStartOptions): Promise<Mastership> {
    this.calls.push('locker.start');
    this.startOptions.push(options ?? {});
    if (this.startFailure !== undefined) return Promise.reject(this.startFailure);
    return new Promise<Mastership>((resolve, reject) => {
      const signal = options?.signal;
      const onAbort = () => reject(new AbortedError('aborted'));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#grant = () => {
        signal?.removeEventListener('abort', onAbort);
        this.token = this.#next++;
        resolve(new Mastership(this));
      };
    });
  }
  grant(): void {
    this.#grant?.();
    this.#grant = undefined;
  }
  get waiting(): boolean {
    return this.#grant !== undefined;
  }
  async keepAlive(): Promise<boolean> {
    this.calls.push('locker.keepAlive');
    const next = this.keepAliveResults.shift() ?? true;
    if (next instanceof Error) throw next;
    return next;
  }
  async stop(): Promise<void> {
    this.calls.push('locker.stop');
    this.token = undefined;
  }
}

function recordingService(calls: string[]): Service & { contexts: ServiceContext[] } {
  const contexts: ServiceContext[] = [];
  return {
    contexts,
    start: (context) => {
      calls.push(`service.start ${context.token}`);
      contexts.push(context);
    },
    stop: () => {
      calls.push('service.stop');
    },
  };
}

function events(supervisor: Supervisor): string[] {
  const seen: string[] = [];
  for (const name of ['waiting', 'master', 'keepalive-failed', 'demoted', 'stopped'] as const) {
    supervisor.on(name, (e: SupervisorEvents[typeof name][0]) =>
      seen.push(e.token === undefined ? name : `${name} ${e.token}`),
    );
  }
  return seen;
}

describe('Supervisor', () => {
  it('conformance S6: locker.start, then service.start; a waiting slave starts nothing', async () => {
    const locker = new ScriptedLocker();
    const service = recordingService(locker.calls);
    const clock = new FakeClock();
    const sup = new Supervisor({ locker, service, clock, keepAlivePeriodMs: 0 });
    const seen = events(sup);
    const started = tracked(sup.start());
    assert.equal(sup.start(), started.promise, 'start is idempotent');
    await eventually(() => locker.waiting);
    assert.equal(sup.state, 'waiting');
    assert.deepEqual(locker.calls, ['locker.start']);
    locker.grant();
    await started.promise;
    assert.deepEqual(locker.calls, ['locker.start', 'service.start 10']);
    assert.equal(sup.state, 'master');
    assert.equal(sup.token, 10);
    assert.deepEqual(seen, ['waiting', 'master 10']);
    await sup.stop();
    assert.deepEqual(locker.calls, [
      'locker.start',
      'service.start 10',
      'service.stop',
      'locker.stop',
    ]);
    assert.deepEqual(seen, ['waiting', 'master 10', 'stopped']);
    assert.equal(service.contexts[0]?.signal.aborted, true);
    assert.equal(clock.pending, 0, 'no timer outlives stop');
  });

  it('conformance S5, S19: useLock=false: no locker, no timer, the service starts at once', async () => {
    const calls: string[] = [];
    const clock = new FakeClock();
    const sup = new Supervisor({ useLock: false, service: recordingService(calls), clock });
    assert.equal(sup.locker, undefined);
    assert.equal(sup.keepAlivePeriodMs, 0);
    await sup.start();
    assert.deepEqual(calls, ['service.start 0']);
    assert.equal(clock.pending, 0);
    await sup.stop();
    assert.deepEqual(calls, ['service.start 0', 'service.stop']);
    // useLock defaults to true: without a locker that is a configuration error.
    assert.throws(() => new Supervisor({ service: recordingService([]) }), InvalidArgumentError);
  });

  it('conformance S7: keepAlive at a fixed rate, first run one period in; 0 runs nothing', async () => {
    const locker = new ScriptedLocker();
    const clock = new FakeClock();
    const sup = new Supervisor({ locker, service: recordingService([]), clock });
    assert.equal(sup.keepAlivePeriodMs, 1_000, 'defaults to locker.defaultKeepAlivePeriodMs');
    const started = sup.start();
    await eventually(() => locker.waiting);
    assert.equal(locker.startOptions[0]?.keepAlivePeriodMs, 1_000, 'passed to the locker');
    locker.grant();
    await started;
    const ticks = () => locker.calls.filter((c) => c === 'locker.keepAlive').length;
    await clock.advance(999);
    await settle();
    assert.equal(ticks(), 0);
    await clock.advance(1);
    await eventually(() => ticks() === 1);
    await clock.advance(1_000);
    await eventually(() => ticks() === 2);
    await clock.advance(3_000);
    await eventually(() => ticks() === 5);
    await sup.stop();
    assert.equal(clock.pending, 0);

    const quiet = new ScriptedLocker();
    const none = new Supervisor({
      locker: quiet,
      service: recordingService([]),
      clock,
      keepAlivePeriodMs: 0,
    });
    const s2 = none.start();
    await eventually(() => quiet.waiting);
    quiet.grant();
    await s2;
    await clock.advance(60_000);
    assert.equal(clock.pending, 0);
    assert.ok(!quiet.calls.includes('locker.keepAlive'));
    await none.stop();
  });

  it('conformance S8: keepAlive false demotes exactly once, aborting the signal with LockLostError; restarts when allowed', async () => {
    const locker = new ScriptedLocker();
    const service = recordingService(locker.calls);
    const clock = new FakeClock();
    const sup = new Supervisor({ locker, service, clock, keepAlivePeriodMs: 100 });
    const seen = events(sup);
    const started = sup.start();
    await eventually(() => locker.waiting);
    locker.grant();
    await started;
    locker.keepAliveResults.push(false, false);
    await clock.advance(100);
    await eventually(() => locker.waiting);
    const signal = service.contexts[0]?.signal;
    assert.ok(signal?.aborted);
    assert.ok(signal?.reason instanceof LockLostError);
    assert.deepEqual(seen, [
      'waiting',
      'master 10',
      'keepalive-failed 10',
      'demoted 10',
      'waiting',
    ]);
    assert.equal(locker.calls.filter((c) => c === 'service.stop').length, 1);
    // The service stopped before the lock was given back.
    const i = locker.calls.indexOf('service.stop');
    assert.equal(locker.calls[i + 1], 'locker.stop');
    assert.equal(sup.state, 'waiting');
    locker.grant();
    await eventually(() => sup.state === 'master');
    assert.equal(sup.token, 11);
    assert.equal(service.contexts[1]?.token, 11);
    await sup.stop();
    assert.equal(seen.at(-1), 'stopped');
    assert.equal(clock.pending, 0);
  });

  it('conformance S8: with restartAllowed=false a demotion stops the supervisor', async () => {
    const locker = new ScriptedLocker();
    const clock = new FakeClock();
    const sup = new Supervisor({
      locker,
      service: recordingService([]),
      clock,
      keepAlivePeriodMs: 100,
      restartAllowed: false,
      stopOnError: false,
    });
    const seen = events(sup);
    const started = sup.start();
    await eventually(() => locker.waiting);
    locker.grant();
    await started;
    locker.keepAliveResults.push(false);
    await clock.advance(100);
    await eventually(() => sup.state === 'stopped');
    assert.deepEqual(seen, [
      'waiting',
      'master 10',
      'keepalive-failed 10',
      'demoted 10',
      'stopped',
    ]);
    await sup.stop();
  });

  it('conformance S9: a throwing keepAlive keeps ticking unless stopOnError', async () => {
    const locker = new ScriptedLocker();
    const logger = recordingLogger();
    const clock = new FakeClock();
    const sup = new Supervisor({
      locker,
      service: recordingService([]),
      clock,
      logger,
      keepAlivePeriodMs: 100,
    });
    const seen = events(sup);
    const started = sup.start();
    await eventually(() => locker.waiting);
    locker.grant();
    await started;
    locker.keepAliveResults.push(new LockIOError('disk gone'), new LockIOError('disk gone'));
    await clock.advance(100);
    await eventually(() => seen.length === 3);
    await clock.advance(100);
    await eventually(() => seen.length === 4);
    await clock.advance(100);
    await eventually(() => locker.calls.filter((c) => c === 'locker.keepAlive').length === 3);
    assert.equal(sup.state, 'master');
    assert.deepEqual(seen, ['waiting', 'master 10', 'keepalive-failed 10', 'keepalive-failed 10']);
    assert.equal(logger.count('warn'), 2);
    await sup.stop();

    const strict = new ScriptedLocker();
    const sup2 = new Supervisor({
      locker: strict,
      service: recordingService([]),
      clock,
      keepAlivePeriodMs: 100,
      stopOnError: true,
    });
    const seen2 = events(sup2);
    const s2 = sup2.start();
    await eventually(() => strict.waiting);
    strict.grant();
    await s2;
    strict.keepAliveResults.push(new LockIOError('disk gone'));
    await clock.advance(100);
    await eventually(() => strict.waiting);
    assert.deepEqual(seen2, [
      'waiting',
      'master 10',
      'keepalive-failed 10',
      'demoted 10',
      'waiting',
    ]);
    await sup2.stop();
    assert.equal(clock.pending, 0);
  });

  it("the locker's lost event demotes at once", async () => {
    const locker = new ScriptedLocker();
    const service = recordingService(locker.calls);
    const clock = new FakeClock();
    const sup = new Supervisor({ locker, service, clock, keepAlivePeriodMs: 10_000 });
    const demoted: unknown[] = [];
    sup.on('demoted', (e) => demoted.push(e.reason));
    const started = sup.start();
    await eventually(() => locker.waiting);
    locker.grant();
    await started;
    const lost = new LockLostError('lease self-fenced');
    locker.emit('lost', lost);
    assert.equal(service.contexts[0]?.signal.reason, lost, 'the signal aborts synchronously');
    await eventually(() => demoted.length === 1);
    assert.equal(demoted[0], lost);
    locker.emit('lost', new LockLostError('again')); // not master any more: ignored
    await settle();
    assert.equal(demoted.length, 1);
    await sup.stop();
  });

  it('conformance S4, S10: stop while waiting rejects start, stops the locker, leaves no timer', async () => {
    const locker = new ScriptedLocker();
    const clock = new FakeClock();
    const sup = new Supervisor({ locker, service: recordingService(locker.calls), clock });
    const started = sup.start();
    await eventually(() => locker.waiting);
    await sup.stop();
    await assert.rejects(started, AbortedError);
    assert.ok(!locker.calls.includes('service.start 10'));
    assert.ok(locker.calls.includes('locker.stop'));
    assert.equal(sup.state, 'stopped');
    assert.equal(clock.pending, 0);
    await sup.stop();
    await assert.rejects(sup.start(), AbortedError); // shares the first start
  });

  it('a listener that throws and a service that fails do not escape as exceptions', async () => {
    const locker = new ScriptedLocker();
    const sup = new Supervisor({
      locker,
      keepAlivePeriodMs: 0,
      service: {
        start: () => {
          throw new Error('service cannot open the store');
        },
        stop: () => {},
      },
    });
    sup.on('waiting', () => {
      throw new Error('bad listener');
    });
    const started = sup.start();
    await eventually(() => locker.waiting);
    locker.grant();
    await assert.rejects(started, /service cannot open the store/);
    assert.equal(sup.state, 'stopped');
    assert.ok(locker.calls.includes('locker.stop'));
  });

  it('conformance S3: a failIfLocked locker failing rejects start with its error and stops', async () => {
    const locker = new ScriptedLocker();
    locker.startFailure = new LockObtainFailedError('Lock held by another process');
    const sup = new Supervisor({ locker, service: recordingService([]) });
    await assert.rejects(sup.start(), LockObtainFailedError);
    assert.equal(sup.state, 'stopped');
  });

  it('d: bad configuration throws InvalidArgumentError', () => {
    const service = recordingService([]);
    const locker = new ScriptedLocker();
    const bad: [unknown, RegExp][] = [
      [{ locker, service, lockKeepAlivePeriod: -1 }, /lockKeepAlivePeriod/],
      [{ locker, service, lockKeepAlivePeriod: Number.NaN }, /lockKeepAlivePeriod/],
      [{ locker, service, useLock: 'no' }, /useLock must be a boolean/],
      [{ locker, service, stopOnError: 1 }, /stopOnError must be a boolean/],
      [{ locker, service, restartAllowed: 'x' }, /restartAllowed must be a boolean/],
      [{ locker }, /service must have start\(\) and stop\(\)/],
      [{ service, locker: {} }, /locker must be a Locker/],
      [undefined, /service must have/],
      [42, /must be an object/],
    ];
    for (const [options, message] of bad) {
      assert.throws(
        () => new Supervisor(options as never),
        (err: unknown) => err instanceof InvalidArgumentError && message.test(err.message),
        String(message),
      );
    }
  });

  it('c (in process): deleting the lock file demotes a SharedFileLocker master', async () => {
    using dir = tempDir();
    const locker = new SharedFileLocker({ directory: dir.path, acquireIntervalMs: 50 });
    const calls: string[] = [];
    const sup = new Supervisor({
      locker,
      service: recordingService(calls),
      keepAlivePeriodMs: 20,
    });
    const demoted: unknown[] = [];
    sup.on('demoted', (e) => demoted.push(e.reason));
    await sup.start();
    const first = sup.token as number;
    unlinkSync(locker.path);
    await eventually(() => demoted.length === 1);
    assert.ok(demoted[0] instanceof LockLostError);
    // restartAllowed: it waits again and, the file being free, becomes master with a newer token.
    await eventually(() => sup.state === 'master');
    assert.ok((sup.token as number) > first);
    await sup.stop();
    assert.deepEqual(calls.filter((c) => c === 'service.stop').length, 2);
  });
});
