import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RowFencing } from '../../src/rows/row-fencing.js';

test('row fencing refuses a token older than the row newest grant, and only that', () => {
  const fencing = new RowFencing();
  fencing.check('r', 5); // never granted: anything passes
  fencing.check('r', undefined); // no token: nothing to check
  fencing.granted('r', 10);
  fencing.granted('s', 20);
  fencing.check('r', 10); // the holder's own token
  fencing.check('r', 15); // a write's token records nothing...
  fencing.check('r', 10); // ...so the holder still passes
  assert.throws(() => fencing.check('r', 9), {
    code: 'STALE_TOKEN',
    message: /Fencing token 9 for row r is older than 10/,
  });
  fencing.check('r', 19); // another row's grant does not fence this one
  assert.throws(() => fencing.check('s', 19), { code: 'STALE_TOKEN' });
  assert.throws(() => fencing.check('r', Number.NaN), { code: 'INVALID_ARGUMENT' });
});

test('row fencing forgets the least recently granted row into a floor that only refuses more', () => {
  const fencing = new RowFencing(2);
  fencing.granted('a', 1);
  fencing.granted('b', 2);
  fencing.granted('a', 3); // a is now the most recent
  fencing.granted('c', 4); // forgets b (token 2) into the floor
  assert.throws(() => fencing.check('b', 1), { code: 'STALE_TOKEN' });
  fencing.check('b', 2);
  assert.throws(() => fencing.check('never', 1), { code: 'STALE_TOKEN' });
  fencing.check('a', 3); // remembered rows keep their own newest grant
  assert.throws(() => fencing.check('a', 2), { code: 'STALE_TOKEN' });
  fencing.granted('d', 5); // forgets a (token 3)
  assert.throws(() => fencing.check('a', 2), { code: 'STALE_TOKEN' });
  fencing.check('a', 3);
});
