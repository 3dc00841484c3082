/**
 * docs/protocol.md's "Methods" tables and the call table (`src/wire/calls.ts`) say the same
 * thing: the same methods in the same order, each in the same lane, with the same argument
 * shape and the same resend policy. A method added to one and not the other fails here.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { CALLS, METHOD_NAMES, type Method, shapeArity } from '../../src/wire/calls.js';
import { repoRoot } from '../helpers.js';

interface DocumentedMethod {
  method: string;
  lane: 'handler' | 'priority';
  shape: string;
  resent: boolean;
}

/** The rows of the tables under "## Methods", with the lane of the paragraph above each. */
function documentedMethods(): DocumentedMethod[] {
  const text = readFileSync(join(repoRoot, 'docs/protocol.md'), 'utf8');
  const start = text.indexOf('\n## Methods\n');
  assert.ok(start >= 0, 'docs/protocol.md has a "## Methods" section');
  const end = text.indexOf('\n## ', start + 1);
  const section = text.slice(start, end < 0 ? undefined : end);
  const found: DocumentedMethod[] = [];
  let lane: DocumentedMethod['lane'] | undefined;
  for (const line of section.split('\n')) {
    if (line.startsWith('Handler lane')) lane = 'handler';
    else if (line.startsWith('Priority lane')) lane = 'priority';
    const row = /^\| `(\w+)` +\| `(.*?)` +\| .* \| (yes|no) +\|$/.exec(line);
    if (row === null) continue;
    assert.ok(lane !== undefined, `${row[1]} is listed under a lane`);
    found.push({
      method: row[1] as string,
      lane,
      shape: (row[2] as string).replaceAll('\\|', '|'),
      resent: row[3] === 'yes',
    });
  }
  return found;
}

describe('docs/protocol.md and the call table', () => {
  const documented = documentedMethods();

  it('list the same methods in the same order', () => {
    assert.deepEqual(
      documented.map((d) => d.method),
      METHOD_NAMES,
    );
  });

  it('agree on each method: lane, argument shape, resend', () => {
    for (const d of documented) {
      const call = CALLS[d.method as Method];
      assert.ok(call !== undefined, `${d.method} is in the call table`);
      assert.deepEqual(
        { method: d.method, lane: call.lane, shape: call.shape, resent: call.resend },
        d,
        `${d.method}: the docs and the call table disagree`,
      );
    }
  });

  it('read argument counts from the shapes (trailing name? optional)', () => {
    assert.deepEqual(shapeArity('[]'), [0, 0]);
    assert.deepEqual(shapeArity('[table, Put, waitMs?]'), [2, 3]);
    assert.deepEqual(shapeArity('[table, row, waitMs | nil]'), [3, 3]);
    assert.deepEqual(shapeArity('[a, {b?}]'), [2, 2]);
    assert.deepEqual(
      shapeArity('[name, [family | {name, maxVersions}, ...], {timestampOnArrival?}?]'),
      [2, 3],
    );
  });

  it('only lock grants are given back when they arrive late', () => {
    const giveBack = METHOD_NAMES.filter((m) => CALLS[m].late === 'giveBack');
    assert.deepEqual(giveBack, ['lockRow', 'tryLockRow']);
  });
});
