// A fleet member's catalog and its reads of the shared catalog (the reads themselves are the
// fleet's, here played by hand, so that they can come back in any order): a read that comes
// back after a later one was taken in is not applied, and many describes at once share reads.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { systemClock } from '../../src/core/clock.js';
import { checkTableDescriptor, type TableDescriptor } from '../../src/rows/table-descriptor.js';
import { type CatalogFleet, TableCatalog } from '../../src/server/table-catalog.js';
import { tempDir } from '../helpers.js';

/** A fleet whose `read()`s wait until the test answers them, one by one. */
function handPlayedFleet(initial: TableDescriptor[]) {
  const pending: ((d: TableDescriptor[]) => void)[] = [];
  let reads = 0;
  const fleet: CatalogFleet = {
    read: () => {
      reads++;
      if (reads === 1) return Promise.resolve(initial);
      return new Promise((resolve) => pending.push(resolve));
    },
    change: () => Promise.reject(new Error('no changes here')),
    serving: () => undefined,
    changed: () => undefined,
    released: () => Promise.resolve(),
    claimDaughter: () => Promise.reject(new Error('no splits here')),
    commitSplit: () => Promise.reject(new Error('no splits here')),
    splitServed: () => undefined,
    splitFailed: () => Promise.resolve(),
    opened: () => Promise.resolve(),
    tableGone: () => Promise.resolve(),
  };
  return {
    fleet,
    pending,
    get reads() {
      return reads;
    },
  };
}

const table = (splits: string[]) => checkTableDescriptor('t', ['f'], { splits });
const options = {
  leasePeriodMs: 60_000,
  rowLockWaitMs: 1000,
  durability: 'none' as const,
  clock: systemClock,
};

describe('a fleet member’s catalog', () => {
  it('does not apply a read of the shared catalog that comes back after a later one', async () => {
    using dir = tempDir();
    const played = handPlayedFleet([table(['m'])]);
    const catalog = await TableCatalog.open(dir.path, options, undefined, played.fleet);
    try {
      const older = catalog.refresh();
      const newer = catalog.refresh();
      await new Promise((r) => setImmediate(r));
      assert.equal(played.pending.length, 2);
      // Another member split the table at g: the newer read shows it, and comes back first.
      played.pending[1]?.([table(['g', 'm'])]);
      await newer;
      played.pending[0]?.([table(['m'])]);
      await older;
      assert.deepEqual(catalog.describe('t').splits, ['g', 'm']);
      assert.deepEqual(
        catalog
          .regions('t')
          .ranges()
          .map((r) => [r.startKey, r.endKey]),
        [
          ['', 'g'],
          ['g', 'm'],
          ['m', ''],
        ],
      );
    } finally {
      await catalog.close();
    }
  });

  it('shares its reads among describes made at once: one running, one next', async () => {
    using dir = tempDir();
    const played = handPlayedFleet([table([])]);
    const catalog = await TableCatalog.open(dir.path, options, undefined, played.fleet);
    try {
      const first = catalog.current();
      const rest = Array.from({ length: 100 }, () => catalog.current());
      await new Promise((r) => setImmediate(r));
      assert.equal(played.reads, 2, 'the first read (the load) and one running');
      played.pending[0]?.([table(['k'])]);
      await first;
      await new Promise((r) => setImmediate(r));
      // The 100 that came while the first ran share the one after it: it sees what they may
      // have been told of.
      assert.equal(played.reads, 3);
      played.pending[1]?.([table(['k', 'p'])]);
      await Promise.all(rest);
      assert.deepEqual(catalog.describe('t').splits, ['k', 'p']);
    } finally {
      await catalog.close();
    }
  });
});
