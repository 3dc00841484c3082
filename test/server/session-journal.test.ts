/**
 * The session journal: what it records comes back when it is opened again (a restart or a
 * new master), and recovery keeps one holder per row — the newest grant — and drops what no
 * longer stands (a lock of an ended session, a record that does not parse).
 */
import assert from 'node:assert/strict';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { systemClock } from '../../src/core/clock.js';
import { Delete, Put } from '../../src/rows/index.js';
import { Region } from '../../src/rows/region.js';
import { RowStorage } from '../../src/rows/row-storage.js';
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

/** The journal's records as stored (snapshot then log), read with its storage opened directly. */
async function storedRecords(dataDir: string): Promise<string[]> {
  const { storage, recovered } = await RowStorage.open(join(dataDir, 'sessions'));
  await storage.close();
  return [...recovered.snapshot, ...recovered.log].map((r) => Buffer.from(r).toString('utf8'));
}

/** A journal of the first version (a region with a row per session and per lock). */
function firstVersionRegion(dataDir: string): Promise<Region> {
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
    // Records no server wrote: a session with a bad lease, a lock that does not parse, bytes.
    const { storage } = await RowStorage.open(join(dir.path, 'sessions'));
    const bad = { key: sessionKey('bad'), leaseMs: -1, releaseOnDisconnect: false, client: '' };
    await storage.append(Buffer.from(`Js${JSON.stringify(bad)}`));
    await storage.append(Buffer.from('Jl{not json'));
    await storage.append(Buffer.from([0x4a, 0x78, 0, 1, 2]));
    await storage.close();

    const again = await SessionJournal.open(dir.path, options);
    const state = await again.recover();
    assert.deepEqual(state.sessions.map((s) => s.client).sort(), ['a', 'b']);
    assert.deepEqual(
      state.locks.map((l) => l.lockId),
      [lock('new', 'b', 'r', 101).lockId],
    );
    await again.close();
    // What recovery dropped is gone from the storage: one record per session and lock left.
    const left = (await storedRecords(dir.path)).map((r) => JSON.parse(r.slice(2)));
    assert.deepEqual(
      left.map((r) => r.lockId ?? r.client).sort(),
      ['a', 'b', lock('new', 'b', 'r', 101).lockId].sort(),
    );
  });

  it("reads a first version's journal (a region's rows) and rewrites it in its own records", async () => {
    using dir = tempDir();
    const region = await firstVersionRegion(dir.path);
    const a = session('a');
    const { key, ...aFields } = a;
    await region.put(new Put(`s${key}`).add('s', 'v', JSON.stringify(aFields)));
    const held = lock('held', 'a', 'r1', 7);
    const gone = lock('gone', 'a', 'r2', 8);
    for (const l of [held, gone]) {
      const { lockId, ...fields } = l;
      await region.put(new Put(`l${lockId}`).add('l', 'v', JSON.stringify(fields)));
    }
    await region.delete(new Delete(`l${gone.lockId}`));
    await region.close();

    const journal = await SessionJournal.open(dir.path, options);
    const state = await journal.recover();
    await journal.close();
    assert.deepEqual(state.sessions, [a]);
    assert.deepEqual(state.locks, [held]);
    const records = await storedRecords(dir.path);
    assert.ok(
      records.every((r) => r.startsWith('J')),
      'only records of this version are left',
    );
    assert.equal(records.length, 2);
  });

  it('once it follows the live locks, a checkpoint writes those and the journal keeps no copy', async () => {
    using dir = tempDir();
    const fast = { ...options, durability: 'none' as const };
    const journal = await SessionJournal.open(dir.path, fast);
    await journal.recover();
    await journal.opened(session('a'));
    await journal.granted(lock('before', 'a', 'r0', 1));
    // What the server lists: a map it keeps itself, as its sessions do.
    const live = new Map<string, JournalLock>([
      ['before'.padEnd(20, 'x'), lock('before', 'a', 'r0', 1)],
    ]);
    journal.followLocks(() => live.values());
    let token = 2;
    // Churn past the checkpoint threshold (~150 B a record): each grant is listed as it is
    // recorded, and each release stops being listed before it is recorded.
    for (let i = 0; i < 40_000; i++) {
      const l = lock(`c${i}`, 'a', `row${i % 100}`, token++);
      live.set(l.lockId, l);
      const granted = journal.granted(l);
      live.delete(l.lockId);
      const released = journal.released(l.lockId);
      if (i % 1000 === 999) await Promise.all([granted, released]);
    }
    const kept = lock('kept', 'a', 'k', token++);
    live.set(kept.lockId, kept);
    await journal.granted(kept);
    // Listed but never recorded: proves that the checkpoints wrote the list, not a copy.
    const listedOnly = lock('listed', 'a', 'l', token++);
    live.set(listedOnly.lockId, listedOnly);
    for (let i = 0; i < 40_000; i++) {
      const l = lock(`d${i}`, 'a', `row${i % 100}`, token++);
      const granted = journal.granted(l);
      const released = journal.released(l.lockId);
      if (i % 1000 === 999) await Promise.all([granted, released]);
    }
    await journal.close();
    const stored = await storedRecords(dir.path);
    assert.ok(stored.length < 60_000, `the log was checkpointed (${stored.length} records)`);
    const again = await SessionJournal.open(dir.path, fast);
    const state = await again.recover();
    await again.close();
    assert.deepEqual(state.locks.map((l) => l.lockId).sort(), [...live.keys()].sort());
  });

  it('keeps its log bounded: checkpoints write what stands, whatever the churn', async () => {
    using dir = tempDir();
    const fast = { ...options, durability: 'none' as const };
    const journal = await SessionJournal.open(dir.path, fast);
    await journal.recover();
    await journal.opened(session('a'));
    // ~150 B a record, two a cycle: 40,000 cycles log about 12 MB without checkpoints.
    for (let i = 0; i < 40_000; i++) {
      const l = lock(`c${i}`, 'a', `row${i % 100}`, i + 1);
      const granted = journal.granted(l);
      const released = journal.released(l.lockId);
      if (i % 1000 === 999) await Promise.all([granted, released]);
    }
    for (let i = 0; i < 10; i++) await journal.granted(lock(`keep${i}`, 'a', `k${i}`, 50_000 + i));
    await journal.close();
    const bytes = readdirSync(join(dir.path, 'sessions'))
      .map((f) => statSync(join(dir.path, 'sessions', f)).size)
      .reduce((x, y) => x + y, 0);
    assert.ok(bytes < 6 << 20, `the journal holds ${bytes} bytes`);
    const again = await SessionJournal.open(dir.path, fast);
    const state = await again.recover();
    await again.close();
    assert.equal(state.locks.length, 10);
    assert.deepEqual(
      state.locks.map((l) => l.token).sort(),
      Array.from({ length: 10 }, (_, i) => 50_000 + i),
    );
  });
});
