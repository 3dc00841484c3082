// The fleet's assignment of regions to members: even, the same on every member, sticky, and
// moving only what balance needs when a member joins or leaves.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assignRegions } from '../../src/server/fleet-assignment.js';

const regions = (n: number) => Array.from({ length: n }, (_, i) => `tables/t@${i}`);
const members = (...ids: string[]) => ids.map((id) => ({ id }));

function loads(plan: Map<string, string>): number[] {
  const count = new Map<string, number>();
  for (const m of plan.values()) count.set(m, (count.get(m) ?? 0) + 1);
  return [...count.values()].sort((a, b) => a - b);
}

function moves(before: Map<string, string>, after: Map<string, string>): number {
  let n = 0;
  for (const [r, m] of after) if (before.get(r) !== m) n++;
  return n;
}

describe('assignRegions', () => {
  it('spreads regions evenly: every member floor(R/N) or ceil(R/N)', () => {
    for (const [r, ids] of [
      [12, ['a', 'b', 'c']],
      [13, ['a', 'b', 'c']],
      [2, ['a', 'b', 'c']],
      [100, ['a', 'b', 'c', 'd', 'e', 'f', 'g']],
    ] as const) {
      const plan = assignRegions(regions(r), members(...ids), new Map());
      assert.equal(plan.size, r);
      const l = loads(plan);
      assert.ok(
        (l.at(-1) as number) - (l[0] ?? 0) <= 1,
        `${r} regions over ${ids.length}: loads ${l}`,
      );
      if (r >= ids.length) assert.equal(l.length, ids.length, 'every member has a share');
    }
  });

  it('is the same whatever order the members and regions come in (every member agrees)', () => {
    const owners = new Map([['tables/t@3', 'b']]);
    const one = assignRegions(regions(20), members('a', 'b', 'c'), owners);
    const two = assignRegions(regions(20).reverse(), members('c', 'a', 'b'), owners);
    assert.deepEqual([...one].sort(), [...two].sort());
  });

  it('keeps a region with its live owner while the owner is within its share', () => {
    const first = assignRegions(regions(12), members('a', 'b', 'c'), new Map());
    const again = assignRegions(regions(12), members('a', 'b', 'c'), first);
    assert.equal(moves(first, again), 0);
  });

  it('moves only the new member’s share when one joins, and only the dead one’s when one goes', () => {
    const three = assignRegions(regions(12), members('a', 'b', 'c'), new Map());
    const four = assignRegions(regions(12), members('a', 'b', 'c', 'd'), three);
    assert.deepEqual(loads(four), [3, 3, 3, 3]);
    assert.equal(moves(three, four), 3, 'three regions go to the new member, no others move');
    for (const [r, m] of four) if (three.get(r) !== m) assert.equal(m, 'd');
    // c dies: only its regions move, and they spread over the others.
    const owners = new Map([...four].map(([r, m]) => [r, m === 'c' ? null : m]));
    const after = assignRegions(regions(12), members('a', 'b', 'd'), owners);
    assert.deepEqual(loads(after), [4, 4, 4]);
    for (const [r, m] of after) if (four.get(r) !== 'c') assert.equal(m, four.get(r));
  });

  it('gives nothing without members, and ignores owners that are not members', () => {
    assert.equal(assignRegions(regions(3), [], new Map()).size, 0);
    const plan = assignRegions(regions(4), members('a', 'b'), new Map([['tables/t@0', 'gone']]));
    assert.deepEqual(loads(plan), [2, 2]);
    assert.ok(![...plan.values()].includes('gone'));
  });
});
