import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeClock } from '../../src/core/clock.js';
import { Put } from '../../src/rows/mutation.js';
import { Region } from '../../src/rows/region.js';
import { RowFencing } from '../../src/rows/row-fencing.js';
import { tempDir } from '../helpers.js';

test('row fencing refuses a token older than the row newest grant, and only that', () => {
  const fencing = new RowFencing();
  fencing.check('r', 5, undefined); // never granted: anything passes
  fencing.check('r', undefined, undefined); // no token: nothing to check
  fencing.check('r', 10, 10); // held with 10: the holder's own token
  assert.throws(() => fencing.check('r', 9, 10), {
    code: 'STALE_TOKEN',
    message: /Fencing token 9 for row r is older than 10/,
  });
  fencing.released('r', 10);
  fencing.released('s', 20);
  fencing.check('r', 10, undefined); // the last holder's own token, once free
  fencing.check('r', 15, undefined); // a write's token records nothing...
  fencing.check('r', 10, undefined); // ...so the last holder's still passes
  assert.throws(() => fencing.check('r', 9, undefined), { code: 'STALE_TOKEN' });
  fencing.check('r', 19, undefined); // another row's grant does not fence this one
  assert.throws(() => fencing.check('s', 19, undefined), { code: 'STALE_TOKEN' });
  assert.throws(() => fencing.check('r', Number.NaN, undefined), { code: 'INVALID_ARGUMENT' });
});

test('row fencing forgets the least recently released row into a floor that only refuses more, never for a held row', () => {
  const fencing = new RowFencing(2);
  fencing.released('a', 1);
  fencing.released('b', 2);
  fencing.released('a', 3); // a is now the most recent
  fencing.released('c', 4); // forgets b (token 2) into the floor
  assert.throws(() => fencing.check('b', 1, undefined), { code: 'STALE_TOKEN' });
  fencing.check('b', 2, undefined);
  assert.throws(() => fencing.check('never', 1, undefined), { code: 'STALE_TOKEN' });
  fencing.check('a', 3, undefined); // remembered rows keep their own newest grant
  assert.throws(() => fencing.check('a', 2, undefined), { code: 'STALE_TOKEN' });
  fencing.released('d', 5); // forgets a (token 3)
  assert.throws(() => fencing.check('a', 2, undefined), { code: 'STALE_TOKEN' });
  fencing.check('a', 3, undefined);
  // A held row is fenced by its holder alone: the floor (4 now) does not refuse the holder.
  fencing.check('held', 1, 1);
});

test('a lock held while more rows than fencing remembers are locked and released keeps writing with its own token', async () => {
  // Before: the held row's grant was remembered like any other, so 100,000 later grants of
  // other rows forgot it into a floor above its token, and its holder's puts were refused
  // with STALE_TOKEN while it still held the row.
  await using region = await Region.open({ families: ['f'] });
  const held = await region.lockRow('long-held');
  const before = await region.lockRow('before');
  await region.unlockRow(before);
  for (let i = 0; i < 100_010; i++) await region.unlockRow(await region.lockRow(`churn-${i}`));
  await region.put(new Put('long-held', { rowLock: held, token: held.token }).add('f', 'q', 'v'));
  // Still fenced: an older token on the held row, and the forgotten row's old token.
  await assert.rejects(
    region.put(new Put('long-held', { token: held.token - 1 }).add('f', 'q', 'x')),
    {
      code: 'STALE_TOKEN',
    },
  );
  await assert.rejects(
    region.put(new Put('before', { token: before.token - 1 }).add('f', 'q', 'x')),
    {
      code: 'STALE_TOKEN',
    },
  );
  await region.unlockRow(held);
  await region.put(new Put('long-held', { token: held.token }).add('f', 'q', 'after'));
});

test('every end of an explicit lock is remembered: unlockRow, close(), and lease expiry', async () => {
  const clock = new FakeClock();
  await using region = await Region.open({ families: ['f'], clock, leasePeriodMs: 1000 });
  const ends: [string, (lock: Awaited<ReturnType<Region['lockRow']>>) => Promise<void>][] = [
    ['unlockRow', (lock) => region.unlockRow(lock)],
    ['close()', (lock) => lock.close()],
    ['lease expiry', () => clock.advance(2000)],
  ];
  for (const [how, end] of ends) {
    const row = `row-${how}`;
    const first = await region.lockRow(row);
    await region.unlockRow(first);
    const second = await region.lockRow(row, { renew: false });
    await end(second);
    assert.ok(second.signal.aborted, `${how}: the lock did not end`);
    // Had this end not been recorded, the row would be fenced by the first lock only.
    await assert.rejects(
      region.put(new Put(row, { token: first.token }).add('f', 'q', 'stale')),
      { code: 'STALE_TOKEN' },
      `${how}: a token older than the ended lock's was admitted`,
    );
    await region.put(new Put(row, { token: second.token }).add('f', 'q', 'fresh'));
  }
});

test('after a reopen, a token from before it is refused on every row not held; a restored lock keeps its own', async () => {
  // Before: the reopened region knew no grant, so any old token passed on a free row.
  using dir = tempDir('locksmith-fencing-');
  let region = await Region.open({ families: ['f'], dir: dir.path });
  const first = await region.lockRow('free');
  await region.unlockRow(first);
  const newest = await region.lockRow('free');
  await region.unlockRow(newest);
  const kept = await region.lockRow('kept', { renew: false });
  await region.close();

  region = await Region.open({ families: ['f'], dir: dir.path });
  try {
    const restored = region.restoreRowLock('kept', {
      lockId: kept.lockId,
      token: kept.token,
      renew: false,
    });
    await assert.rejects(region.put(new Put('free', { token: first.token }).add('f', 'q', 'x')), {
      code: 'STALE_TOKEN',
    });
    // The floor refuses too much rather than too little: even the free row's newest grant.
    await assert.rejects(region.put(new Put('free', { token: newest.token }).add('f', 'q', 'x')), {
      code: 'STALE_TOKEN',
    });
    await region.put(
      new Put('kept', { rowLock: restored, token: kept.token }).add('f', 'q', 'held'),
    );
    const next = await region.lockRow('free');
    assert.ok(next.token > newest.token);
    await region.put(new Put('free', { rowLock: next, token: next.token }).add('f', 'q', 'ok'));
    await region.unlockRow(next);
    await region.unlockRow(restored);
  } finally {
    await region.close();
  }
});

test('raiseTokens (a split): tokens up to the floor are refused on rows not held here', async () => {
  await using region = await Region.open({ families: ['f'] });
  const held = await region.lockRow('held');
  const floor = held.token + 1000;
  region.raiseTokens(floor);
  await assert.rejects(region.put(new Put('held', { token: held.token - 1 }).add('f', 'q', 'x')), {
    code: 'STALE_TOKEN',
  });
  await assert.rejects(region.put(new Put('free', { token: floor }).add('f', 'q', 'x')), {
    code: 'STALE_TOKEN',
  });
  await region.put(new Put('held', { rowLock: held, token: held.token }).add('f', 'q', 'x'));
  const next = await region.lockRow('free');
  assert.ok(next.token > floor);
  await region.unlockRow(next);
  await region.put(new Put('free', { token: next.token }).add('f', 'q', 'x'));
});
