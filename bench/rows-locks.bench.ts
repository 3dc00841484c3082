/**
 * Row-lock benchmarks: `npm run bench:rows` (its first part) (a script, never a test; needs --expose-gc).
 *
 * In-process keyed locks, locksmith's RowLockManager against what a Node user would pick:
 * `async-lock` (keyed: `lock.acquire(key, fn)`) and `async-mutex` (a `Mutex` per key in a Map).
 *
 * 1. Uncontended lock+unlock, one key at a time over 1024 keys: locksmith's synchronous
 *    `tryAcquireImplicit`/`releaseImplicit`, its awaited `acquireImplicit`, and explicit
 *    `lockRow`/`unlockRow` (id + lease), against the two libraries (each awaited).
 * 2. Contended: 8 tasks on one key, and 256 tasks over 64 keys; each critical section yields
 *    once (`await null`) so that tasks really queue.
 * 3. Memory per held lock with 10^6 locks held at once, each measured in a fresh child process
 *    (heapUsed after gc, minus the baseline with the keys already allocated).
 *
 * Numbers are medians over rounds; ratios are "times faster than" (higher is better for
 * locksmith). The machine may be shared: look at the spread, not one digit.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import AsyncLock from 'async-lock';
import { Mutex } from 'async-mutex';
import { RowLockManager } from '../src/rows/row-lock-manager.js';
import { fmt, median, ratio, table, verdict } from './support.js';

const KEYS = Array.from({ length: 1024 }, (_, i) => `row-${i}`);
const ROUNDS = 9;
const UNCONTENDED_OPS = 200_000;
const CONTENDED_OPS = 100_000;
const HELD = 1_000_000;

type Run = () => Promise<void> | void;

/** ns per operation, median over rounds of `ops` operations (one warm-up round first). */
async function measure(ops: number, make: () => Run): Promise<number> {
  const samples: number[] = [];
  for (let round = 0; round <= ROUNDS; round++) {
    const run = make();
    const start = process.hrtime.bigint();
    await run();
    const ns = Number(process.hrtime.bigint() - start) / ops;
    if (round > 0) samples.push(ns);
  }
  return median(samples);
}

// --- 1. uncontended ---------------------------------------------------------------------------

const uncontended: Record<string, () => Run> = {
  'locksmith tryAcquireImplicit (sync)': () => {
    const locks = new RowLockManager();
    return () => {
      for (let i = 0; i < UNCONTENDED_OPS; i++) {
        const grant = locks.tryAcquireImplicit(KEYS[i & 1023] as string);
        if (grant === null) throw new Error('held');
        locks.releaseImplicit(grant);
      }
      locks.close();
    };
  },
  'locksmith acquireImplicit (await)': () => {
    const locks = new RowLockManager();
    return async () => {
      for (let i = 0; i < UNCONTENDED_OPS; i++) {
        const grant = await locks.acquireImplicit(KEYS[i & 1023] as string);
        locks.releaseImplicit(grant);
      }
      locks.close();
    };
  },
  'locksmith lockRow/unlockRow (await)': () => {
    const locks = new RowLockManager();
    return async () => {
      for (let i = 0; i < UNCONTENDED_OPS; i++) {
        const grant = await locks.lockRow(KEYS[i & 1023] as string);
        locks.unlockRow(grant.lockId as string);
      }
      locks.close();
    };
  },
  'locksmith lockRow/unlockRow, renewing (await)': () => {
    // What Region.lockRow and the server grant by default: no lease to arm or remove.
    const locks = new RowLockManager();
    return async () => {
      for (let i = 0; i < UNCONTENDED_OPS; i++) {
        const grant = await locks.lockRow(KEYS[i & 1023] as string, { renew: true });
        locks.unlockRow(grant.lockId as string);
      }
      locks.close();
    };
  },
  'async-lock acquire(key, fn)': () => {
    const lock = new AsyncLock();
    const fn = () => {};
    return async () => {
      for (let i = 0; i < UNCONTENDED_OPS; i++) {
        await lock.acquire(KEYS[i & 1023] as string, fn);
      }
    };
  },
  'async-mutex Mutex per key': () => {
    const mutexes = new Map<string, Mutex>();
    return async () => {
      for (let i = 0; i < UNCONTENDED_OPS; i++) {
        const key = KEYS[i & 1023] as string;
        let mutex = mutexes.get(key);
        if (mutex === undefined) {
          mutex = new Mutex();
          mutexes.set(key, mutex);
        }
        const release = await mutex.acquire();
        release();
      }
    };
  },
};

// --- 2. contended -----------------------------------------------------------------------------

interface Keyed {
  run(key: string, section: () => Promise<void>): Promise<void>;
  close?(): void;
}

const contendedImpls: Record<string, () => Keyed> = {
  'locksmith implicit': () => {
    const locks = new RowLockManager({ rowLockWaitMs: Number.POSITIVE_INFINITY });
    return {
      async run(key, section) {
        const grant = locks.tryAcquireImplicit(key) ?? (await locks.acquireImplicit(key));
        try {
          await section();
        } finally {
          locks.releaseImplicit(grant);
        }
      },
      close: () => locks.close(),
    };
  },
  'locksmith lockRow': () => {
    const locks = new RowLockManager({ rowLockWaitMs: Number.POSITIVE_INFINITY });
    return {
      async run(key, section) {
        const grant = await locks.lockRow(key);
        try {
          await section();
        } finally {
          locks.unlockRow(grant.lockId as string);
        }
      },
      close: () => locks.close(),
    };
  },
  'async-lock': () => {
    const lock = new AsyncLock({ maxPending: Number.POSITIVE_INFINITY });
    return { run: (key, section) => lock.acquire(key, section) };
  },
  'async-mutex': () => {
    const mutexes = new Map<string, Mutex>();
    return {
      run(key, section) {
        let mutex = mutexes.get(key);
        if (mutex === undefined) {
          mutex = new Mutex();
          mutexes.set(key, mutex);
        }
        return mutex.runExclusive(section);
      },
    };
  },
};

const section = async (): Promise<void> => {
  await null;
};

function contended(tasks: number, keys: number): (impl: () => Keyed) => () => Run {
  const perTask = Math.floor(CONTENDED_OPS / tasks);
  return (impl) => () => {
    const keyed = impl();
    return async () => {
      let inside = 0;
      const checked = async () => {
        if (keys === 1 && ++inside !== 1) throw new Error('two holders at once');
        await section();
        if (keys === 1) inside--;
      };
      await Promise.all(
        Array.from({ length: tasks }, async (_, t) => {
          for (let i = 0; i < perTask; i++) {
            await keyed.run(KEYS[(t + i) % keys] as string, checked);
          }
        }),
      );
      keyed.close?.();
    };
  };
}

// --- 3. memory (child processes) --------------------------------------------------------------

const gc = (globalThis as { gc?: () => void }).gc;

function heapAfterGc(): number {
  for (let i = 0; i < 3; i++) gc?.();
  return process.memoryUsage().heapUsed;
}

async function memoryChild(kind: string): Promise<void> {
  const keys = Array.from({ length: HELD }, (_, i) => `row-${i}`);
  const keep: unknown[] = [];
  const before = heapAfterGc();
  if (kind === 'locksmith-explicit' || kind === 'locksmith-implicit') {
    const locks = new RowLockManager();
    const explicit = kind === 'locksmith-explicit';
    for (const key of keys) {
      keep.push(explicit ? locks.tryLockRow(key) : locks.tryAcquireImplicit(key));
    }
    keep.push(locks);
  } else if (kind === 'async-lock') {
    const lock = new AsyncLock({ maxPending: Number.POSITIVE_INFINITY });
    const releases: (() => void)[] = [];
    for (const key of keys) {
      const held = new Promise<void>((resolve) => releases.push(resolve));
      keep.push(lock.acquire(key, () => held));
    }
    // Let every acquisition reach its held state.
    await new Promise<void>((r) => setImmediate(r));
    keep.push(lock, releases);
  } else if (kind === 'async-mutex') {
    const mutexes = new Map<string, Mutex>();
    for (const key of keys) {
      const mutex = new Mutex();
      mutexes.set(key, mutex);
      keep.push(await mutex.acquire());
    }
    keep.push(mutexes);
  } else {
    throw new Error(`unknown memory kind ${kind}`);
  }
  const after = heapAfterGc();
  // The grants are kept by the caller in every case: an array slot each, the same for all.
  process.stdout.write(`${(after - before) / HELD}\n`);
  if (keep.length === 0) throw new Error('unreachable');
}

function memoryOf(kind: string): number {
  const child = spawnSync(
    process.execPath,
    ['--expose-gc', fileURLToPath(import.meta.url), '--memory', kind],
    { encoding: 'utf8', maxBuffer: 1 << 20 },
  );
  if (child.status !== 0) throw new Error(`memory child ${kind} failed: ${child.stderr}`);
  return Number(child.stdout.trim());
}

// --- main -------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const memoryFlag = process.argv.indexOf('--memory');
  if (memoryFlag >= 0) {
    await memoryChild(process.argv[memoryFlag + 1] ?? '');
    return;
  }
  if (gc === undefined) console.warn('(run with --expose-gc for the memory figures)');
  console.log(`Node ${process.version}; ${ROUNDS} rounds per figure, median.\n`);

  const results: Record<string, number> = {};
  for (const [name, make] of Object.entries(uncontended)) {
    results[name] = await measure(UNCONTENDED_OPS, make);
  }
  const asyncLock = results['async-lock acquire(key, fn)'] as number;
  const asyncMutex = results['async-mutex Mutex per key'] as number;
  console.log('### Uncontended lock + unlock (1024 keys, one at a time)\n');
  console.log(
    table(
      ['implementation', 'ns/op', 'ops/s', 'vs async-lock', 'vs async-mutex'],
      Object.entries(results).map(([name, ns]) => [
        name,
        fmt(ns),
        fmt(1e9 / ns),
        ratio(asyncLock / ns),
        ratio(asyncMutex / ns),
      ]),
    ),
  );

  const scenarios: [string, (impl: () => Keyed) => () => Run][] = [
    ['8 tasks × 1 key', contended(8, 1)],
    ['256 tasks × 64 keys', contended(256, 64)],
  ];
  const contendedRows: string[][] = [];
  const contendedRatios: Record<string, number> = {};
  for (const [scenario, make] of scenarios) {
    const ns: Record<string, number> = {};
    for (const [name, impl] of Object.entries(contendedImpls)) {
      ns[name] = await measure(CONTENDED_OPS, make(impl));
    }
    for (const [name, value] of Object.entries(ns)) {
      const vsLock = (ns['async-lock'] as number) / value;
      contendedRows.push([
        scenario,
        name,
        fmt(value),
        ratio(vsLock),
        ratio((ns['async-mutex'] as number) / value),
      ]);
      if (name === 'locksmith implicit') contendedRatios[scenario] = vsLock;
    }
  }
  console.log('\n### Contended (each critical section awaits once)\n');
  console.log(
    table(
      ['scenario', 'implementation', 'ns/op', 'vs async-lock', 'vs async-mutex'],
      contendedRows,
    ),
  );

  const memory: Record<string, number> = {};
  for (const kind of ['locksmith-explicit', 'locksmith-implicit', 'async-lock', 'async-mutex']) {
    memory[kind] = memoryOf(kind);
  }
  console.log(`\n### Memory per held lock (${HELD.toLocaleString('en-US')} held at once)\n`);
  console.log(
    table(
      ['implementation', 'bytes/lock', 'vs async-lock'],
      Object.entries(memory).map(([kind, bytes]) => [
        kind,
        fmt(bytes),
        ratio((memory['async-lock'] as number) / bytes),
      ]),
    ),
  );

  const fast = asyncLock / (results['locksmith tryAcquireImplicit (sync)'] as number);
  const awaited = asyncLock / (results['locksmith acquireImplicit (await)'] as number);
  console.log('\n### Goals\n');
  console.log(
    table(
      ['goal', 'measured', 'verdict'],
      [
        ['uncontended ≥ 3× async-lock (sync path)', ratio(fast), verdict(fast >= 3)],
        ['uncontended ≥ 3× async-lock (awaited path)', ratio(awaited), verdict(awaited >= 3)],
        [
          'explicit lock memory below async-lock',
          `${fmt(memory['locksmith-explicit'] as number)} vs ${fmt(memory['async-lock'] as number)} B`,
          verdict((memory['locksmith-explicit'] as number) < (memory['async-lock'] as number)),
        ],
      ],
    ),
  );
  if (Object.keys(contendedRatios).length === 0) throw new Error('no contended figures');
}

await main();
