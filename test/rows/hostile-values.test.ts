/**
 * Every public entry point of the row family, called with every hostile value: each call must
 * fail with INVALID_ARGUMENT before changing anything, and the region must work as before:
 * the holder of the contested row can unlock it, another caller can lock it, and no timer
 * throws later (the test runs past a lease and counts uncaught exceptions).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  Delete,
  Get,
  Increment,
  Put,
  Region,
  type RegionOptions,
  type RowLock,
  RowMutations,
} from '../../src/rows/index.js';
import { RowLockManager } from '../../src/rows/row-lock-manager.js';
import { sleep } from '../helpers.js';

// The holder must outlive each case even on a loaded machine (its lease is checked with
// ensureValid), and the leases left held must run out before the final check.
const LEASE_MS = 1_500;
const WAIT_MS = 40;
const ROW = 'contested';

/** Values that are not what an option wants, whatever the option. */
const signals: [string, unknown][] = [
  ['an AbortController', new AbortController()],
  [
    'an aborted AbortController',
    (() => {
      const c = new AbortController();
      c.abort();
      return c;
    })(),
  ],
  ['a signal look-alike', { aborted: false, addEventListener() {}, removeEventListener() {} }],
  ['{}', {}],
  ['null', null],
  ['a string', 'signal'],
  ['a number', 1],
];
const waits: [string, unknown][] = [
  ['NaN', Number.NaN],
  ['-1', -1],
  ["'2'", '2'],
  ['{}', {}],
  ['null', null],
  ['-Infinity', Number.NEGATIVE_INFINITY],
];
const owners: [string, unknown][] = [
  ['null', null],
  ['a number', 5],
  ['an empty string', ''],
  ['an array', []],
  ['a boolean', true],
  ['a symbol', Symbol('owner')],
];
const optionObjects: [string, unknown][] = [
  ['null', null],
  ['a string', 'fast'],
  ['a number', 5],
  ['an array', []],
  ['an unknown option', { sigal: new AbortController().signal }],
  ['a misspelt option', { waitMS: 10 }],
];

/** Every hostile per-call options value. */
const hostileCallOptions: [string, unknown][] = [
  ...signals.map(([name, v]): [string, unknown] => [`signal = ${name}`, { signal: v }]),
  ...waits.map(([name, v]): [string, unknown] => [`waitMs = ${name}`, { waitMs: v }]),
  ...owners.map(([name, v]): [string, unknown] => [`owner = ${name}`, { owner: v }]),
  ...optionObjects.map(([name, v]): [string, unknown] => [`options = ${name}`, v]),
];

const put = () => new Put(ROW).add('f', 'q', 'v');

/** Every public method that takes per-call options, aimed at the contested row. */
const withOptions: [string, (region: Region, options: never) => unknown][] = [
  ['lockRow', (r, o) => r.lockRow(ROW, o)],
  ['get', (r, o) => r.get(new Get(ROW), o)],
  ['withRowLock', (r, o) => r.withRowLock(ROW, () => 1, o)],
  ['put', (r, o) => r.put(put(), o)],
  ['delete', (r, o) => r.delete(new Delete(ROW), o)],
  ['checkAndPut', (r, o) => r.checkAndPut(ROW, 'f', 'q', null, put(), o)],
  ['checkAndDelete', (r, o) => r.checkAndDelete(ROW, 'f', 'q', null, new Delete(ROW), o)],
  ['increment', (r, o) => r.increment(new Increment(ROW).addColumn('f', 'n', 1), o)],
  ['incrementColumnValue', (r, o) => r.incrementColumnValue(ROW, 'f', 'n', 1, o)],
  ['mutateRow', (r, o) => r.mutateRow(new RowMutations(ROW).add(put()), o)],
  ['mutateRows', (r, o) => r.mutateRows([put(), new Put('other').add('f', 'q', 'v')], o)],
  ['batch', (r, o) => r.batch([put()], o)],
];

const notFunctions: [string, unknown][] = [
  ['undefined', undefined],
  ['null', null],
  ['a string', 'fn'],
  ['an object', {}],
  ['a number', 1],
];
const lockArgs: [string, unknown][] = [
  ['undefined', undefined],
  ['null', null],
  ['{}', {}],
  ['a number', 7],
  ['an empty string', ''],
  ['{ lockId: 5 }', { lockId: 5 }],
];

/** Not a boolean: `renew` takes `true` or `false` only ('false' must not read as true). */
const renews: [string, unknown][] = [
  ['null', null],
  ["'false'", 'false'],
  ['0', 0],
  ['1', 1],
  ['{}', {}],
];

/** The other calls: each entry is [name, call]. */
const otherCalls: [string, (region: Region) => unknown][] = [
  ...notFunctions.map(([name, v]): [string, (region: Region) => unknown] => [
    `withRowLock fn = ${name}`,
    (r) => r.withRowLock(ROW, v as never),
  ]),
  ...owners.map(([name, v]): [string, (region: Region) => unknown] => [
    `tryLockRow owner = ${name}`,
    (r) => r.tryLockRow(ROW, { owner: v } as never),
  ]),
  ...optionObjects.map(([name, v]): [string, (region: Region) => unknown] => [
    `tryLockRow options = ${name}`,
    (r) => r.tryLockRow(ROW, v as never),
  ]),
  ...renews.map(([name, v]): [string, (region: Region) => unknown] => [
    `lockRow renew = ${name}`,
    (r) => r.lockRow(ROW, { renew: v } as never),
  ]),
  ...renews.map(([name, v]): [string, (region: Region) => unknown] => [
    `withRowLock renew = ${name}`,
    (r) => r.withRowLock(ROW, () => 1, { renew: v } as never),
  ]),
  ...renews.map(([name, v]): [string, (region: Region) => unknown] => [
    `tryLockRow renew = ${name}`,
    (r) => r.tryLockRow(ROW, { renew: v } as never),
  ]),
  ...lockArgs.map(([name, v]): [string, (region: Region) => unknown] => [
    `unlockRow(${name})`,
    (r) => r.unlockRow(v as never),
  ]),
  ...lockArgs.map(([name, v]): [string, (region: Region) => unknown] => [
    `renewLease(${name})`,
    (r) => r.renewLease(v as never),
  ]),
  ['get() with a Get carrying a bogus lock', (r) => r.get(new Get(ROW, {} as never))],
  ['get() with a string', (r) => r.get(ROW as never)],
  ['scan() with a plain object', (r) => r.scan({} as never).next()],
  ['put() with a plain object', (r) => r.put({ row: ROW } as never)],
  ['mutateRows() with an empty array', (r) => r.mutateRows([])],
  ['batch() with a non-array', (r) => r.batch(put() as never)],
  ['a Put with options null', (r) => r.put(new Put(ROW, null as never).add('f', 'q', 'v'))],
  ['a Put with token NaN', (r) => r.put(new Put(ROW, { token: Number.NaN }).add('f', 'q', 'v'))],
  ['a Put with token -1', (r) => r.put(new Put(ROW, { token: -1 }).add('f', 'q', 'v'))],
  ["a Put with token '2'", (r) => r.put(new Put(ROW, { token: '2' as never }).add('f', 'q', 'v'))],
  [
    'a Put with rowLock {}',
    (r) => r.put(new Put(ROW, { rowLock: {} as never }).add('f', 'q', 'v')),
  ],
  ['an increment by NaN', (r) => r.incrementColumnValue(ROW, 'f', 'n', Number.NaN)],
  [
    'incrementColumnValue options null',
    (r) => r.incrementColumnValue(ROW, 'f', 'n', 1, null as never),
  ],
];

/** Hostile Region.open options (each refused before anything is opened). */
const base = { families: ['f'] };
const hostileOpen: [string, unknown][] = [
  ['options undefined', undefined],
  ['options null', null],
  ['options a string', 'f'],
  ['unknown option leasePeriodMS', { ...base, leasePeriodMS: 1000 }],
  ...[Number.NaN, Number.POSITIVE_INFINITY, -1, 0, '2', {}, 2 ** 31, null].map(
    (v): [string, unknown] => [`leasePeriodMs = ${String(v)}`, { ...base, leasePeriodMs: v }],
  ),
  ...[Number.NaN, -1, '2', {}, null].map((v): [string, unknown] => [
    `rowLockWaitMs = ${String(v)}`,
    { ...base, rowLockWaitMs: v },
  ]),
  ...[0, -5, 1.5, '2', Number.NaN, Number.POSITIVE_INFINITY].map((v): [string, unknown] => [
    `checkpointBytes = ${String(v)}`,
    { ...base, checkpointBytes: v },
  ]),
  ...[{}, null, 'system', { monotonic: 1, wall: 2, sleep: 3 }, Date].map((v): [string, unknown] => [
    `clock = ${String(v)}`,
    { ...base, clock: v },
  ]),
  ['timestampOnArrival = "yes"', { ...base, timestampOnArrival: 'yes' }],
  ['durability = "always"', { ...base, durability: 'always' }],
  ['dir = ""', { ...base, dir: '' }],
  ['dir = 5', { ...base, dir: 5 }],
  ['families = []', { families: [] }],
  ['families = "f"', { families: 'f' }],
  ['maxVersions = NaN', { families: [{ name: 'f', maxVersions: Number.NaN }] }],
];

const uncaught: unknown[] = [];
const onUncaught = (err: unknown) => uncaught.push(err);
const regions: Region[] = [];

async function openRegion(): Promise<Region> {
  const region = await Region.open({
    families: ['f'],
    leasePeriodMs: LEASE_MS,
    rowLockWaitMs: WAIT_MS,
  } satisfies RegionOptions);
  regions.push(region);
  return region;
}

/** Runs `call`, which must throw or reject with INVALID_ARGUMENT. */
async function refused(call: () => unknown): Promise<void> {
  await assert.rejects((async () => call())(), (err: unknown) => {
    assert.equal((err as { code?: unknown }).code, 'INVALID_ARGUMENT', String(err));
    return true;
  });
}

/** The region still works: the holder can unlock, and another caller can lock and unlock. */
async function stillWorks(region: Region, holder: RowLock): Promise<void> {
  holder.ensureValid();
  await region.unlockRow(holder);
  const next = await region.tryLockRow(ROW);
  assert.ok(next !== null, 'the contested row is free once its holder unlocked');
  await region.put(new Put(ROW, { rowLock: next }).add('f', 'q', 'after'));
  await next.close();
  await region.put(new Put(ROW).add('f', 'q', 'implicit'));
  const again = await region.lockRow(ROW, { waitMs: 0 });
  // Left held on purpose: its lease runs out later, which must not throw from the timer.
  assert.ok(again.token > next.token);
  assert.equal((await region.get(new Get(ROW))).cells[0]?.value.toString(), 'implicit');
}

describe('hostile values: every entry point refuses with INVALID_ARGUMENT and changes nothing', () => {
  before(() => {
    process.on('uncaughtException', onUncaught);
  });
  after(async () => {
    for (const region of regions) await region.close();
    process.off('uncaughtException', onUncaught);
  });

  for (const [method, call] of withOptions) {
    for (const [name, options] of hostileCallOptions) {
      it(`${method} with ${name}`, async () => {
        const region = await openRegion();
        const holder = await region.lockRow(ROW);
        await refused(() => call(region, options as never));
        await stillWorks(region, holder);
      });
    }
  }

  for (const [name, call] of otherCalls) {
    it(name, async () => {
      const region = await openRegion();
      const holder = await region.lockRow(ROW);
      await refused(() => call(region));
      await stillWorks(region, holder);
    });
  }

  for (const [name, options] of hostileOpen) {
    it(`Region.open with ${name}`, async () => {
      await refused(() => Region.open(options as RegionOptions));
    });
  }

  // The manager under the region checks the same values itself (defence in depth).
  const managerCalls: [string, (locks: RowLockManager, options: never) => Promise<unknown>][] = [
    ['lockRow', (l, o) => l.lockRow(ROW, o)],
    ['acquireImplicit', (l, o) => l.acquireImplicit(ROW, o)],
    ['acquireImplicitMany', (l, o) => l.acquireImplicitMany(['a', ROW], o)],
  ];
  for (const [method, call] of managerCalls) {
    for (const [name, signal] of signals) {
      it(`RowLockManager.${method} with signal = ${name}`, async () => {
        const locks = new RowLockManager({ leasePeriodMs: LEASE_MS, rowLockWaitMs: WAIT_MS });
        const holder = await locks.lockRow(ROW);
        await refused(() => call(locks, { signal } as never));
        locks.unlockRow(holder.lockId as string);
        assert.equal(locks.waitingCount, 0);
        const next = locks.tryAcquireImplicit(ROW);
        assert.ok(next !== null);
        locks.releaseImplicit(next);
        assert.equal(locks.heldCount, 0);
        locks.close();
      });
    }
  }

  it('a real AbortSignal and good values still work on a held row (control case)', async () => {
    const region = await openRegion();
    const holder = await region.lockRow(ROW);
    const controller = new AbortController();
    const waiting = region.put(put(), { signal: controller.signal, waitMs: 10_000, owner: 'o' });
    controller.abort();
    await assert.rejects(waiting, { code: 'ABORTED' });
    await stillWorks(region, holder);
  });

  it('afterwards, for longer than a lease, no timer throws', async () => {
    await sleep(LEASE_MS * 2 + WAIT_MS * 2);
    assert.deepEqual(uncaught, []);
  });
});
