/**
 * The session journal: what it records comes back when it is opened again (a restart or a
 * new master), and recovery keeps one holder per row — the newest grant — and drops what no
 * longer stands (a lock of an ended session, a record that does not parse).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { systemClock } from '../../src/core/clock.js';
import { Put, Scan } from '../../src/rows/index.js';
import { Region } from '../../src/rows/region.js';
import { type JournalLock, SessionJournal, sessionKey } from '../../src/server/session-journal.js';
import { tempDir } from '../helpers.js';

const options = { durability: 'fsync' as const, clock: systemClock };

function session(name: string) {
  return { key: sessionKey(name), leaseMs: 10_000, releaseOnDisconnect: false, client: name };
}

function lock(id: string, sessionName: string, row: string, token: number): JournalLock {
  return {
    lockId: id.padEnd(20, 'x'),
    table: 't',
    row,
    token,
    session: sessionKey(sessionName),
    renew: true,
  };
}

/** The journal's region opened directly, to write what no server would and to see what is left. */
function journalRegion(dataDir: string): Promise<Region> {
  return Region.open({
    families: [
      { name: 's', maxVersions: 1 },
      { name: 'l', maxVersions: 1 },
    ],
    dir: `${dataDir}/sessions`,
    durability: 'fsync',
  });
}

describe('session journal', () => {
  it('gives back every session and lock recorded, after a reopen', async () => {
    using dir = tempDir();
    const journal = await SessionJournal.open(dir.path, options);
    assert.deepEqual(await journal.recover(), { sessions: [], locks: [] });
    await journal.opened(session('a'));
    await journal.opened(session('b'));
    const binaryRow = Buffer.from([0, 0xff, 0x80, 0x41]).toString('latin1');
    await journal.granted(lock('la', 'a', binaryRow, 10));
    await journal.granted({ ...lock('lb', 'b', 'r2', 11), renew: false });
    await journal.granted(lock('lb2', 'b', 'r3', 12));
    await journal.released(lock('lb2', 'b', 'r3', 12).lockId);
    await journal.close();

    const again = await SessionJournal.open(dir.path, options);
    const state = await again.recover();
    await again.close();
    assert.deepEqual(
      state.sessions.map((s) => s.client).sort(),
      ['a', 'b'],
      'both sessions are back',
    );
    assert.deepEqual(
      state.sessions.find((s) => s.client === 'a'),
      session('a'),
    );
    const byId = new Map(state.locks.map((l) => [l.lockId, l]));
    assert.equal(state.locks.length, 2, 'the released lock is not back');
    assert.deepEqual(
      byId.get(lock('la', 'a', binaryRow, 10).lockId),
      lock('la', 'a', binaryRow, 10),
    );
    assert.equal(byId.get(lock('lb', 'b', 'r2', 11).lockId)?.renew, false);
  });

  it('keeps the newest grant of a row, drops the locks of ended sessions and unreadable records', async () => {
    using dir = tempDir();
    const journal = await SessionJournal.open(dir.path, options);
    await journal.recover();
    await journal.opened(session('a'));
    await journal.opened(session('b'));
    // a's release of r was never recorded before b's grant of r was: the larger token holds.
    await journal.granted(lock('old', 'a', 'r', 100));
    await journal.granted(lock('new', 'b', 'r', 101));
    // c ended: its session record is gone, its lock's release was never recorded.
    await journal.opened(session('c'));
    await journal.granted(lock('orphan', 'c', 'q', 102));
    await journal.ended(sessionKey('c'));
    await journal.close();
    // Records no server wrote: a session with a bad lease, a lock that does not parse.
    const region = await journalRegion(dir.path);
    await region.put(
      new Put(`s${sessionKey('bad')}`).add(
        's',
        'v',
        JSON.stringify({ leaseMs: -1, releaseOnDisconnect: false, client: '' }),
      ),
    );
    await region.put(new Put(`l${'junk'.padEnd(20, 'x')}`).add('l', 'v', '{not json'));
    await region.close();

    const again = await SessionJournal.open(dir.path, options);
    const state = await again.recover();
    assert.deepEqual(state.sessions.map((s) => s.client).sort(), ['a', 'b']);
    assert.deepEqual(
      state.locks.map((l) => l.lockId),
      [lock('new', 'b', 'r', 101).lockId],
    );
    await again.close();
    // What recovery dropped it also deleted: the region holds only what stands.
    const left = await journalRegion(dir.path);
    const rows: string[] = [];
    for await (const result of left.scan(new Scan())) rows.push(result.row.toString('latin1'));
    await left.close();
    assert.deepEqual(
      rows.sort(),
      [
        `l${lock('new', 'b', 'r', 101).lockId}`,
        `s${sessionKey('a')}`,
        `s${sessionKey('b')}`,
      ].sort(),
    );
  });
});
