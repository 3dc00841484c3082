import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Mvcc } from '../../src/rows/mvcc.js';
import { sleep } from '../helpers.js';

describe('Mvcc (TestReadWriteConsistencyControl)', () => {
  it('write numbers strictly increase; the read point moves only over completed prefixes (conformance R12)', () => {
    const mvcc = new Mvcc(10);
    const [a, b, c] = [mvcc.begin(), mvcc.begin(), mvcc.begin()];
    assert.deepEqual([a, b, c], [11, 12, 13]);
    mvcc.complete(c);
    assert.equal(mvcc.readPoint, 10);
    mvcc.complete(a);
    assert.equal(mvcc.readPoint, 11);
    mvcc.complete(b);
    assert.equal(mvcc.readPoint, 13);
    assert.throws(() => mvcc.complete(b), /not outstanding/);
  });

  it('20 writers completing in random order: the read point never goes down, each waits until visible (conformance R12)', async () => {
    const mvcc = new Mvcc();
    let last = 0;
    let stop = false;
    const reader = (async () => {
      while (!stop) {
        assert.ok(mvcc.readPoint >= last);
        last = mvcc.readPoint;
        await new Promise((r) => setImmediate(r));
      }
    })();
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        for (let i = 0; i < 50; i++) {
          const n = mvcc.begin();
          await sleep(Math.random() * 2);
          mvcc.complete(n);
          await mvcc.waitVisible(n);
          assert.ok(mvcc.readPoint >= n, `write ${n} returned before it was visible`);
        }
      }),
    );
    stop = true;
    await reader;
    assert.equal(mvcc.readPoint, 1000);
  });
});
