/**
 * A refused `Region.open` changes nothing on disk: for each refusal, the directory listing and
 * every file's bytes are the same before and after (no new log segment, no repair of a torn
 * tail, no token file, no advanced fencing token, no directory created).
 */
import assert from 'node:assert/strict';
import { appendFileSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Get, Put, Region, type RegionOptions } from '../../src/rows/index.js';
import { tempDir } from '../helpers.js';

/** Every file under `dir` with its bytes (hex), sorted by name. */
function contents(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(dir, { recursive: true }).map(String).sort()) {
    const path = join(dir, name);
    try {
      out[name] = readFileSync(path).toString('hex');
    } catch {
      out[name] = '<dir>';
    }
  }
  return out;
}

/** A directory holding cells of families a and b: a snapshot, then more log records. */
async function populated(dir: string): Promise<void> {
  const region = await Region.open({ families: ['a', 'b'], dir, durability: 'none' });
  await region.put(new Put('r1').add('a', 'q', '1').add('b', 'q', '1'));
  await region.flush();
  await region.put(new Put('r2').add('a', 'q', '2'));
  await region.put(new Put('r3').add('b', 'q', '3'));
  await region.close();
}

async function assertRefusedUnchanged(
  dir: string,
  options: unknown,
  code: string,
  message?: RegExp,
): Promise<void> {
  const before = contents(dir);
  await assert.rejects(Region.open(options as RegionOptions), (err: unknown) => {
    assert.equal((err as { code?: unknown }).code, code, String(err));
    if (message !== undefined) assert.match(String((err as Error).message), message);
    return true;
  });
  assert.deepEqual(contents(dir), before, 'the refused open changed the directory');
}

describe('Region.open refused: nothing on disk changes', () => {
  const refusals: [string, (dir: string) => unknown][] = [
    ['a dropped family', (dir) => ({ families: ['a'], dir })],
    ['every family renamed', (dir) => ({ families: ['c'], dir })],
    ['leasePeriodMs NaN', (dir) => ({ families: ['a', 'b'], dir, leasePeriodMs: Number.NaN })],
    ['rowLockWaitMs -1', (dir) => ({ families: ['a', 'b'], dir, rowLockWaitMs: -1 })],
    ['an unknown option', (dir) => ({ families: ['a', 'b'], dir, leasePeriodMS: 5 })],
    ['a bad clock', (dir) => ({ families: ['a', 'b'], dir, clock: {} })],
    ['a bad durability', (dir) => ({ families: ['a', 'b'], dir, durability: 'maybe' })],
    ['a bad checkpointBytes', (dir) => ({ families: ['a', 'b'], dir, checkpointBytes: 0 })],
    ['a duplicate family', (dir) => ({ families: ['a', 'a', 'b'], dir })],
  ];
  for (const [name, options] of refusals) {
    it(`${name}: INVALID_ARGUMENT, same files, same bytes`, async () => {
      using dir = tempDir('locksmith-refused-');
      await populated(dir.path);
      await assertRefusedUnchanged(dir.path, options(dir.path), 'INVALID_ARGUMENT');
      // The data is intact and an accepted open still works.
      await using region = await Region.open({ families: ['a', 'b'], dir: dir.path });
      const row = await region.get(new Get('r3'));
      assert.equal(row.cells[0]?.value.toString(), '3');
    });
  }

  it('a dropped family with a torn tail: the tail is not repaired by the refused open', async () => {
    using dir = tempDir('locksmith-refused-');
    await populated(dir.path);
    const last = readdirSync(dir.path)
      .filter((n) => n.startsWith('log-'))
      .sort()
      .at(-1) as string;
    appendFileSync(join(dir.path, last), Buffer.from([0, 0, 0, 40, 1, 2, 3]));
    await assertRefusedUnchanged(
      dir.path,
      { families: ['a'], dir: dir.path },
      'INVALID_ARGUMENT',
      /column family b/,
    );
    await using region = await Region.open({ families: ['a', 'b'], dir: dir.path });
    assert.equal((await region.get(new Get('r2'))).cells[0]?.value.toString(), '2');
  });

  it('a directory already open (in this process): LOCK_OBTAIN_FAILED, nothing changes', async () => {
    using dir = tempDir('locksmith-refused-');
    await populated(dir.path);
    await using first = await Region.open({ families: ['a', 'b'], dir: dir.path });
    await assertRefusedUnchanged(
      dir.path,
      { families: ['a', 'b'], dir: dir.path },
      'LOCK_OBTAIN_FAILED',
    );
    assert.equal((await first.get(new Get('r1'))).cells.length, 2);
  });

  it('bad options for a directory that does not exist: it is not created', async () => {
    using parent = tempDir('locksmith-refused-');
    const dir = join(parent.path, 'new');
    await assert.rejects(Region.open({ families: ['a'], dir, leasePeriodMs: -1 }), {
      code: 'INVALID_ARGUMENT',
    });
    assert.equal(existsSync(dir), false);
  });
});
