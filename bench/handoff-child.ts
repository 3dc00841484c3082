/**
 * The child processes of the handoff and waiter-CPU benchmarks (bench/directory.bench.ts).
 *
 *   node handoff-child.js <role> <path> [options-json]
 *
 * Roles, with `path` a lock directory for locksmith and a lock target file for proper-lockfile:
 * - `native-holder`, `pl-holder`: on "acquire" takes the lock and prints "held"; on "release"
 *   reads the clock, releases, and prints "released <ns>" with the time read just before the
 *   release started.
 * - `native-waiter`, `pl-waiter`: on "wait" starts waiting and prints "waiting" once the wait
 *   is armed; when it holds, reads the clock and prints "got <ns>", then releases and prints
 *   "freed". `options-json` holds proper-lockfile's `retries` option.
 * - `native-cpu`, `pl-cpu`: on "wait" starts waiting for a lock that someone else holds and
 *   prints "cpu <json>" after `windowMs`: `seconds`, one `[wall µs, CPU µs]` pair per second of
 *   the wait (`process.cpuUsage()`, all threads of the process, so worker threads and V8's
 *   helper threads count; startup before the wait is excluded), `startMs`, the process's
 *   uptime when the wait began, and `majorGcs`, `[uptime ms, duration ms]` of every major GC
 *   of the main thread since startup. `options-json` holds `{ windowMs, retries? }`.
 *
 * Every time is `process.hrtime.bigint()` (CLOCK_MONOTONIC, shared by all processes of the
 * machine), so the parent can subtract a holder's time from a waiter's. Each role prints
 * "ready" once loaded, and exits when its stdin closes.
 */
import { PerformanceObserver, constants as perfConstants } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import properLockfile from 'proper-lockfile';
import { LockObtainFailedError } from '../src/core/errors.js';
import {
  acquireLock,
  FSDirectory,
  type Lock,
  NativeFSLockFactory,
} from '../src/directory/index.js';
import { nowNs, sleep } from './support.js';

type Release = () => Promise<void>;

interface Role {
  /** Handles one command line; resolves when its replies have been printed. */
  command(line: string): Promise<void>;
}

const [role = '', path = '', optionsJson = '{}'] = process.argv.slice(2);
const options = JSON.parse(optionsJson) as {
  retries?: properLockfile.LockOptions['retries'];
  windowMs?: number;
};

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

async function nativeObtain(directory: FSDirectory): Promise<Lock> {
  // The parent only asks once the previous holder released, so this normally succeeds at once;
  // the short retry covers a release whose close has not finished yet.
  for (let attempt = 0; ; attempt++) {
    try {
      return await directory.obtainLock('write.lock');
    } catch (err) {
      if (!(err instanceof LockObtainFailedError) || attempt >= 1000) throw err;
      await sleep(1);
    }
  }
}

async function makeRole(): Promise<Role> {
  switch (role) {
    case 'native-holder': {
      const directory = await FSDirectory.open(path, NativeFSLockFactory.INSTANCE);
      let lock: Lock | undefined;
      return {
        async command(line) {
          if (line === 'acquire') {
            lock = await nativeObtain(directory);
            say('held');
          } else if (line === 'release' && lock !== undefined) {
            const t = nowNs();
            await lock.close();
            lock = undefined;
            say(`released ${t}`);
          }
        },
      };
    }
    case 'native-waiter': {
      const directory = await FSDirectory.open(path, NativeFSLockFactory.INSTANCE);
      return {
        async command(line) {
          if (line !== 'wait') return;
          const pending = acquireLock(directory, { timeoutMs: 30_000 });
          // acquireLock subscribes to its wake hints and makes its first attempt synchronously,
          // so the wait is armed by the time it returns.
          say('waiting');
          const lock = await pending;
          const t = nowNs();
          say(`got ${t}`);
          await lock.close();
          say('freed');
        },
      };
    }
    case 'pl-holder': {
      let release: Release | undefined;
      return {
        async command(line) {
          if (line === 'acquire') {
            release = await properLockfile.lock(path, {
              retries: { retries: 1000, minTimeout: 1, maxTimeout: 1 },
            });
            say('held');
          } else if (line === 'release' && release !== undefined) {
            const t = nowNs();
            await release();
            release = undefined;
            say(`released ${t}`);
          }
        },
      };
    }
    case 'pl-waiter': {
      return {
        async command(line) {
          if (line !== 'wait') return;
          const pending = properLockfile.lock(path, { retries: options.retries ?? 0 });
          say('waiting');
          const release = await pending;
          const t = nowNs();
          say(`got ${t}`);
          await release();
          say('freed');
        },
      };
    }
    case 'native-cpu':
    case 'pl-cpu': {
      // Every major GC of this (main) thread from startup on: [uptime ms, duration ms].
      const majorGcs: [number, number][] = [];
      new PerformanceObserver((list) => {
        for (const e of list.getEntries()) {
          const kind = (e as { detail?: { kind?: number } }).detail?.kind;
          if (kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR)
            majorGcs.push([e.startTime, e.duration]);
        }
      }).observe({ entryTypes: ['gc'] });
      const directory =
        role === 'native-cpu'
          ? await FSDirectory.open(path, NativeFSLockFactory.INSTANCE)
          : undefined;
      return {
        async command(line) {
          if (line !== 'wait') return;
          const windowMs = options.windowMs ?? 20_000;
          const used = (a: NodeJS.CpuUsage, b: NodeJS.CpuUsage) =>
            b.user - a.user + (b.system - a.system);
          const t0 = nowNs();
          const cpu0 = process.cpuUsage();
          const startMs = process.uptime() * 1000;
          // The wait outlives the window: it is abandoned when the process exits.
          const pending =
            directory === undefined
              ? properLockfile.lock(path, { retries: options.retries ?? 0 }).then(() => undefined)
              : acquireLock(directory, { timeoutMs: windowMs + 60_000 }).then(() => undefined);
          pending.catch(() => {});
          // One sample per second: [µs of wall clock, µs of CPU] since the previous one.
          const seconds: [number, number][] = [];
          let t = t0;
          let cpu = cpu0;
          while (Number(t - t0) / 1e6 < windowMs - 500) {
            await sleep(1000);
            const tNow = nowNs();
            const cpuNow = process.cpuUsage();
            seconds.push([Number(tNow - t) / 1000, used(cpu, cpuNow)]);
            t = tNow;
            cpu = cpuNow;
          }
          say(`cpu ${JSON.stringify({ startMs, seconds, majorGcs })}`);
          process.exit(0);
        },
      };
    }
    default:
      throw new Error(`unknown role ${JSON.stringify(role)}`);
  }
}

const handler = await makeRole();
say('ready');
for await (const line of createInterface({ input: process.stdin })) {
  await handler.command(line.trim());
}
