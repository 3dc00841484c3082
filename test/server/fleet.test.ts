// A fleet of real `locksmith serve --fleet` processes on the PostgreSQL storage (each test its
// own table prefix in the test database): regions spread evenly, a client of one server
// reaches every region, and what a member's death (kill -9), pause (SIGSTOP past its lease),
// leaving (SIGTERM) or arrival moves loses no acknowledged write.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { connect } from '../../src/client/locksmith-client.js';
import { Get, Put, Scan } from '../../src/rows/index.js';
import { POSTGRES_URL } from '../fixtures/db-servers.js';
import { type ServeProcess, startServeProcess } from '../fixtures/serve-process.js';
import { cliPath, eventually, fixture, run, sleep } from '../helpers.js';
import {
  dirs,
  Fleet,
  fleetWithTable,
  LEASE_MS,
  pauseUnderLoad,
  prefixes,
  RENEW_MS,
  ROW_PREFIXES,
  SPLITS,
  writers,
} from './fleet-fixture.js';
import { RawClient } from './raw-client.js';

// The suite's timeout bounds all its tests together (each has its own bound besides).
describe('a fleet of servers on PostgreSQL', { timeout: 1_200_000 }, () => {
  it('spreads 12 regions evenly over 3 servers; a client of one reaches every region (puts, gets, a scan, a batch, row locks)', async () => {
    const fleet = new Fleet();
    try {
      const client = await fleetWithTable(fleet, 3);
      const per = await fleet.balanced(fleet.members[0] as ServeProcess, fleet.members, 20_000);
      assert.deepEqual([...per.values()].sort(), [4, 4, 4]);
      const t = client.table('t');
      for (const p of ROW_PREFIXES) await t.put(new Put(`${p}x`).add('f', 'q', p));
      const rows: string[] = [];
      for await (const r of t.scan(new Scan())) rows.push(r.row.toString());
      assert.deepEqual(
        rows,
        ROW_PREFIXES.map((p) => `${p}x`),
        'every row once, in key order',
      );
      const part: string[] = [];
      for await (const r of t.scan(new Scan({ startRow: 'bx', stopRow: 'fa' })))
        part.push(r.row.toString());
      assert.deepEqual(part, ['bx', 'cx', 'dx', 'ex']);
      const statuses = await t.batch(ROW_PREFIXES.map((p) => new Put(`${p}y`).add('f', 'q', 'b')));
      assert.ok(
        statuses.every((s) => s.ok),
        JSON.stringify(statuses),
      );
      await assert.rejects(
        t.mutateRows([new Put('ax').add('f', 'q', '1'), new Put('kx').add('f', 'q', '2')]),
        { code: 'INVALID_ARGUMENT' },
      );
      await t.mutateRows([new Put('kx').add('f', 'q', '1'), new Put('ky').add('f', 'q', '2')]);
      // A row lock on every region: each held by the session on that region's server.
      const locks = [];
      for (const p of ROW_PREFIXES) {
        const lock = await t.lockRow(`${p}x`);
        await t.put(new Put(`${p}x`, { rowLock: lock }).add('f', 'q', 'locked'));
        locks.push(lock);
      }
      assert.equal(client.heldLocks, ROW_PREFIXES.length);
      const other = await fleet.client(fleet.members[1] as ServeProcess);
      assert.equal(
        await other.table('t').tryLockRow('gx'),
        null,
        'held: another client cannot take it',
      );
      // Calls leave in the order they were made, routed or not: a put under a lock, then the
      // lock's close without waiting for the put, never has its unlock overtake it.
      const last = locks.pop() as (typeof locks)[number];
      const put = t.put(new Put(last.row, { rowLock: last }).add('f', 'q', 'last'));
      await last.close();
      await put;
      for (const lock of locks) await t.unlockRow(lock);
      assert.equal(client.heldLocks, 0);
      assert.notEqual(await other.table('t').tryLockRow('gx'), null);
      for (const p of ROW_PREFIXES)
        assert.equal(
          (await t.get(new Get(`${p}x`))).cells[0]?.value.toString(),
          p === 'm' ? 'last' : 'locked',
        );
    } finally {
      await fleet.close();
    }
  });

  it('kill -9 of a server: the others serve its regions within the lease bound, and every acknowledged write is there', async () => {
    const fleet = new Fleet();
    try {
      const client = await fleetWithTable(fleet, 3);
      const load = writers(fleet, client, 4, 'w');
      await sleep(1000);
      const victim = fleet.members[2] as ServeProcess;
      const killedAt = Date.now();
      await victim.kill9();
      const live = fleet.members.slice(0, 2);
      await fleet.balanced(fleet.members[0] as ServeProcess, live, 30_000);
      const tookMs = Date.now() - killedAt;
      // The contract: a dead member's regions are claimed at the first look after its lease
      // ran out on the database's clock (a renew period), plus a generous margin here.
      const bound = LEASE_MS + 2 * RENEW_MS + 5_000;
      assert.ok(tookMs <= bound, `regions taken over after ${tookMs} ms (bound ${bound} ms)`);
      // The survivors' /metrics count the regions they claimed, and no region unserved.
      const metrics = await eventually(
        async () => {
          const line = fleet.members[0]?.line(/dashboard on http/) ?? '';
          const port = /dashboard on http:\/\/[^:]+:(\d+)\//.exec(line)?.[1];
          const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
          return /locksmith_fleet_regions_unserved 0/.test(text) ? text : false;
        },
        10_000,
        'a survivor’s /metrics to show every region served',
        100,
      );
      assert.match(metrics, /locksmith_fleet_members 2\n/);
      assert.match(metrics, /locksmith_regions_served 6\n/);
      assert.match(metrics, /locksmith_region_moves_total\{change="claimed"\} [6-9]\n/);
      // A series per region served, labelled by the region's opaque id (no table, no key).
      const first = fleet.members[0] as ServeProcess;
      const mine = (await fleet.status(first)).regions
        .filter((r) => r.server === `127.0.0.1:${first.port}`)
        .map((r) => r.id)
        .sort();
      const labelled = [
        ...metrics.matchAll(/locksmith_region_rows\{region="([0-9a-f]{16})"\} \d+/g),
      ]
        .map((m) => m[1])
        .sort();
      assert.equal(mine.length, 6);
      assert.deepEqual(labelled, mine);
      assert.doesNotMatch(metrics, /table="|="t"/, 'no series names the table');
      const before = load.acks;
      await sleep(1500);
      await load.stop();
      assert.ok(load.acks > before, 'writes go on after the takeover');
      await load.check(client);
      // The client's session on the dead server is closed once no map names it: nothing dials
      // its address any more (it would, every 2 s at most, until the client closed).
      let dials = 0;
      const listener = createServer((socket) => {
        dials++;
        socket.destroy();
      });
      await new Promise<void>((resolve) => listener.listen(victim.port, '127.0.0.1', resolve));
      try {
        await sleep(5_000);
      } finally {
        await new Promise((resolve) => listener.close(resolve));
      }
      assert.equal(dials, 0, 'the client still dials the dead server');
    } finally {
      await fleet.close();
    }
  });

  it('row locks outlive their region’s move: kill -9 of their server, and its SIGTERM hand-over; same handle and token, puts under them work, nobody else takes the rows; a lock whose client died too is released after its session lease', async () => {
    const fleet = new Fleet();
    try {
      const client = await fleetWithTable(fleet, 3);
      const other = await fleet.client(fleet.members[1] as ServeProcess);
      const t = client.table('t');
      const o = other.table('t');
      const locks = await Promise.all(ROW_PREFIXES.map((p) => t.lockRow(`${p}-lock`)));
      const tokens = locks.map((l) => l.token);
      const serverOf = async (row: string) =>
        [...(await fleet.status(fleet.members[0] as ServeProcess)).regions]
          .reverse()
          .find((r) => r.startKey <= row)?.server;
      const victim = fleet.members[2] as ServeProcess;
      const gone = `127.0.0.1:${victim.port}`;
      const onVictim: string[] = [];
      for (const l of locks)
        if ((await serverOf(l.row.toString())) === gone) onVictim.push(l.row.toString());
      assert.ok(onVictim.length >= 3, `locks on the victim's regions: ${onVictim.join(',')}`);
      // A client process of its own, holding a lock on a region of the victim: killed with it.
      const orphanRow = `${onVictim[0]}-orphan`;
      let t0Awaiting = 0;
      const holder = spawn(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `import { connect } from ${JSON.stringify(pathToFileURL(join(dirname(cliPath), '..', 'client', 'index.js')).href)};
           const c = await connect(${JSON.stringify(victim.url)}, { sessionLeaseMs: 3000 });
           const l = await c.table('t').lockRow(${JSON.stringify(orphanRow)});
           console.log('locked', l.token);
           setInterval(() => {}, 1000);`,
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      fleet.loads.push({ stop: async () => void holder.kill('SIGKILL') });
      let said = '';
      holder.stdout.on('data', (d: Buffer) => {
        said += d.toString();
      });
      await eventually(() => said.includes('locked'), 20_000, 'the holder process to lock its row');
      holder.kill('SIGKILL');
      await victim.kill9();
      const killedAt = Date.now();
      await fleet.balanced(fleet.members[0] as ServeProcess, fleet.members.slice(0, 2), 30_000);
      // Every lock held by the same handle, with its token; a put under it works where its row
      // is served now, and nobody else gets its row.
      for (const [i, l] of locks.entries()) {
        const row = l.row.toString();
        await t.put(new Put(row, { rowLock: l }).add('f', 'locked', 'after-kill'));
        assert.equal(l.signal.aborted, false, `the lock on ${row} is held on`);
        assert.equal(l.token, tokens[i]);
        assert.equal(await o.tryLockRow(row), null, `nobody else gets ${row}`);
      }
      assert.equal(client.heldLocks, locks.length);
      // The dead client's lock is kept for its session lease (3 s) from its region's reopening,
      // then released: another client gets the row. Meanwhile a survivor counts it.
      const awaiting = await Promise.all(
        fleet.members
          .slice(0, 2)
          .map(async (m) => (await fleet.status(m)).fleet?.locksAwaitingAdoption),
      );
      t0Awaiting = awaiting.reduce((a, b) => (a ?? 0) + (b ?? 0), 0) ?? 0;
      const waited = Date.now();
      const taken = await o.lockRow(orphanRow, { waitMs: 30_000 });
      const afterKill = Date.now() - killedAt;
      assert.ok(
        afterKill >= 3000,
        `the orphaned lock held at least its holder's session lease after the kill (${afterKill} ms; waited ${Date.now() - waited} ms)`,
      );
      assert.ok(taken.token > Number(/locked (\d+)/.exec(said)?.[1]), 'a larger token');
      assert.ok(t0Awaiting <= 1, `at most the dead client's lock awaits adoption (${t0Awaiting})`);
      const after = await Promise.all(
        fleet.members
          .slice(0, 2)
          .map(async (m) => (await fleet.status(m)).fleet?.locksAwaitingAdoption),
      );
      assert.deepEqual(after, [0, 0], 'none awaits adoption once it was released');
      await o.unlockRow(taken);
      // SIGTERM of another member: its regions are handed over with their locks.
      const leaving = fleet.members[1] as ServeProcess;
      await other.close();
      const left = `127.0.0.1:${leaving.port}`;
      const onLeaving: string[] = [];
      for (const l of locks)
        if ((await serverOf(l.row.toString())) === left) onLeaving.push(l.row.toString());
      assert.ok(onLeaving.length >= 1);
      assert.equal(await leaving.stop(), 0);
      const joined = await fleet.start();
      await fleet.balanced(
        fleet.members[0] as ServeProcess,
        [fleet.members[0] as ServeProcess, joined],
        30_000,
      );
      const third = await fleet.client(joined);
      for (const [i, l] of locks.entries()) {
        const row = l.row.toString();
        await t.put(new Put(row, { rowLock: l }).add('f', 'locked', 'after-term'));
        assert.equal(l.signal.aborted, false, `the lock on ${row} is held on`);
        assert.equal(l.token, tokens[i]);
        assert.equal(await third.table('t').tryLockRow(row), null, `nobody else gets ${row}`);
      }
      for (const l of locks) await t.unlockRow(l);
      assert.equal(client.heldLocks, 0);
      // Released where they are now: another client takes every row at once.
      for (const l of locks) {
        const again = await third.table('t').tryLockRow(l.row);
        assert.ok(again !== null && again.token > l.token, `${l.row} is free again`);
        await again.close();
      }
    } finally {
      await fleet.close();
    }
  });

  it('adoptLock gives a moved lock only to its proven holder: a wrong session id, row or table, a server not serving it, a second adopter are refused', async () => {
    const fleet = new Fleet();
    try {
      await fleetWithTable(fleet, 3);
      const serverOf = async (r: string) => {
        const regions = (await fleet.status(fleet.members[0] as ServeProcess)).regions;
        const address = [...regions].reverse().find((x) => x.startKey <= r)?.server;
        return fleet.members.find((m) => `127.0.0.1:${m.port}` === address) as ServeProcess;
      };
      // A row served by another member than the one the test reads the fleet from.
      let row = '';
      for (const p of ROW_PREFIXES)
        if (row === '' && (await serverOf(p)) !== fleet.members[0]) row = `${p}-adopt`;
      const first = await serverOf(row);
      const { raw: holder, welcome } = await RawClient.session(first.port, {});
      const proof = welcome.session as string;
      const [lockId, token] = (await holder.call('lockRow', ['t', row, null, true])) as [
        string,
        number,
      ];
      assert.deepEqual(
        await holder.call('adoptLock', ['t', row, lockId, proof]),
        [lockId, token, 0],
        'adopting a lock its session holds answers its grant again',
      );
      // SIGTERM: the server closes its connections, then hands its regions over, locks and all.
      assert.equal(await first.stop(), 0);
      const live = fleet.members.filter((m) => m !== first);
      await fleet.balanced(fleet.members[0] as ServeProcess, live, 30_000);
      const now = await serverOf(row);
      const other = live.find((m) => m !== now) as ServeProcess;
      const { raw: adopter } = await RawClient.session(now.port, {});
      const { raw: third } = await RawClient.session(now.port, {});
      const { raw: elsewhere } = await RawClient.session(other.port, {});
      const refused = async (c: RawClient, args: unknown[], code: string) =>
        assert.rejects(c.call('adoptLock', args), { code }, JSON.stringify(args));
      await refused(
        adopter,
        ['t', row, lockId, randomBytes(16).toString('base64url')],
        'UNKNOWN_ROW_LOCK',
      );
      await refused(adopter, ['t', `${row}-other`, lockId, proof], 'UNKNOWN_ROW_LOCK');
      await refused(adopter, ['t', row, 'not a lock id', proof], 'INVALID_ARGUMENT');
      await refused(adopter, ['t', row, lockId, 'short'], 'INVALID_ARGUMENT');
      await refused(adopter, ['t', row, lockId, 42], 'INVALID_ARGUMENT');
      await refused(adopter, ['nope', row, lockId, proof], 'TABLE_NOT_FOUND');
      await refused(elsewhere, ['t', row, lockId, proof], 'NOT_SERVING_REGION');
      assert.equal(await third.call('tryLockRow', ['t', row, true]), null, 'the row is held');
      assert.deepEqual(await adopter.call('adoptLock', ['t', row, lockId, proof]), [
        lockId,
        token,
        0,
      ]);
      assert.deepEqual(await adopter.call('adoptLock', ['t', row, lockId, proof]), [
        lockId,
        token,
        0,
      ]);
      await refused(third, ['t', row, lockId, proof], 'UNKNOWN_ROW_LOCK');
      await assert.rejects(third.call('unlockRow', ['t', lockId]), { code: 'UNKNOWN_ROW_LOCK' });
      await adopter.call('unlockRow', ['t', lockId]);
      const [, next] = (await third.call('tryLockRow', ['t', row, true])) as [string, number];
      assert.ok(next > token, 'the row is free, its next grant a larger token');
      for (const c of [holder, adopter, third, elsewhere]) c.socket.destroy();
    } finally {
      await fleet.close();
    }
  });

  it('SIGSTOP of a server past its lease: its regions move; woken, it refuses its calls, and no acknowledged write is lost', async () => {
    const fleet = new Fleet();
    try {
      const { check, moves } = await pauseUnderLoad(fleet);
      await check();
      assert.ok(
        moves.some((m) => (m as { change: string }).change === 'lost'),
        `the paused server dropped its regions: ${JSON.stringify(moves)}`,
      );
    } finally {
      await fleet.close();
    }
  });

  it('SIGSTOP past its lease of the server of held locks: each lock is adopted where its region went (same handle, same token), nobody else gets its row, and woken, the server rejoins without them', async () => {
    const fleet = new Fleet();
    try {
      await fleetWithTable(fleet, 3);
      // A session lease well past the fleet's lease and the silence that drops the connection.
      const own = await connect(fleet.members[0]?.url as string, { sessionLeaseMs: 20_000 });
      fleet.loads.push({ stop: () => own.close() });
      const other = await fleet.client(fleet.members[1] as ServeProcess);
      const t = own.table('t');
      const paused = fleet.members[2] as ServeProcess;
      const at = `127.0.0.1:${paused.port}`;
      const regions = (await fleet.status(fleet.members[0] as ServeProcess)).regions;
      const its = ROW_PREFIXES.filter(
        (p) => [...regions].reverse().find((r) => r.startKey <= p)?.server === at,
      );
      assert.ok(its.length >= 3, `rows of the paused server: ${its.join(',')}`);
      const locks: Awaited<ReturnType<typeof t.lockRow>>[] = [];
      for (const p of its) locks.push(await t.lockRow(`${p}-stopped`));
      const tokens = locks.map((l) => l.token);
      const putUnder = async (what: string) => {
        for (const l of locks) {
          await eventually(
            async () => {
              try {
                await t.put(new Put(l.row, { rowLock: l }).add('f', 'q', what));
                return true;
              } catch (err) {
                if (l.signal.aborted) throw err;
                return false;
              }
            },
            40_000,
            `a put under the lock on ${l.row}`,
            100,
          );
        }
        for (const [i, l] of locks.entries()) {
          assert.equal(l.signal.aborted, false, `the lock on ${l.row} is held on`);
          assert.equal(l.token, tokens[i]);
          assert.equal(await other.table('t').tryLockRow(l.row), null, `nobody else gets ${l.row}`);
        }
      };
      paused.proc.kill('SIGSTOP');
      try {
        await fleet.balanced(fleet.members[0] as ServeProcess, fleet.members.slice(0, 2), 30_000);
        await putUnder('while-stopped');
      } finally {
        paused.proc.kill('SIGCONT');
      }
      // Woken, it closes its regions and joins again; the balance gives it a share back, and the
      // locks there move again.
      await fleet.balanced(fleet.members[0] as ServeProcess, fleet.members, 30_000);
      await putUnder('after-rejoin');
      for (const l of locks) await t.unlockRow(l);
      for (const l of locks) {
        const again = await other.table('t').tryLockRow(l.row);
        assert.ok(again !== null && again.token > l.token, `${l.row} is free again`);
        await again.close();
      }
    } finally {
      await fleet.close();
    }
  });

  it('negative control: members whose storage acknowledges the writes its fence refused lose acknowledged writes, and the check says so', async () => {
    process.env.LOCKSMITH_UNFENCED_SLOW_APPEND_MS = '300';
    const fleet = new Fleet(LEASE_MS, [fixture('unfenced-serve')]);
    try {
      const { check } = await pauseUnderLoad(fleet);
      await assert.rejects(check(), /acknowledged puts lost/);
    } finally {
      delete process.env.LOCKSMITH_UNFENCED_SLOW_APPEND_MS;
      await fleet.close();
    }
  });

  it('SIGTERM hands a server’s regions over before it exits, well within its lease, their row locks with them; a new server takes its share', async () => {
    const fleet = new Fleet(30_000);
    try {
      const client = await fleetWithTable(fleet, 3);
      const load = writers(fleet, client, 4, 'w');
      await sleep(800);
      const leaving = fleet.members[2] as ServeProcess;
      // A row lock on every region: those on the leaving server's regions move with them (the
      // client adopts them on their new servers), the others stay where they are.
      const t = client.table('t');
      const locks = await Promise.all(ROW_PREFIXES.map((p) => t.lockRow(`${p}-lock`)));
      const stoppedAt = Date.now();
      assert.equal(await leaving.stop(), 0);
      await fleet.balanced(fleet.members[0] as ServeProcess, fleet.members.slice(0, 2), 30_000);
      const tookMs = Date.now() - stoppedAt;
      assert.ok(tookMs < 15_000, `handed over in ${tookMs} ms, without waiting out the 30 s lease`);
      for (const l of locks) {
        await t.put(new Put(l.row, { rowLock: l }).add('f', 'locked', 'yes'));
        assert.equal(l.signal.aborted, false, `the lock on ${l.row} is held on`);
      }
      for (const l of locks) await t.unlockRow(l);
      const joined = await fleet.start();
      const live = [fleet.members[0], fleet.members[1], joined] as ServeProcess[];
      const per = await fleet.balanced(fleet.members[0] as ServeProcess, live, 30_000);
      assert.equal(per.get(`127.0.0.1:${joined.port}`), 4, 'the new server serves its share');
      await sleep(500);
      await load.stop();
      await load.check(client);
    } finally {
      await fleet.close();
    }
  });

  it('splits live regions, whichever server serves them, under writes and locks: the rows, their writes and their locks stay; the daughters are served and spread; a kill -9 after it loses nothing', async () => {
    const fleet = new Fleet();
    try {
      const client = await fleetWithTable(fleet, 3);
      const load = writers(fleet, client, 8, 'x');
      const t = client.table('t');
      // One region of each server first, then another of the first: the members' counts stay
      // within the even share at every step (5/4/4, 5/5/4, 5/5/5, 6/5/5), so nothing moves for
      // balance and a lock on a moved row must be held on through its split.
      const status = await fleet.status(fleet.members[0] as ServeProcess);
      const byServer = new Map<string, string[]>();
      for (const r of status.regions) {
        const letter = r.startKey === '' ? 'a' : r.startKey;
        byServer.set(r.server as string, [...(byServer.get(r.server as string) ?? []), letter]);
      }
      const firsts = [...byServer.values()];
      assert.equal(firsts.length, 3);
      const letters = [...firsts.map((l) => l[0] as string), firsts[0]?.[1] as string];
      const moved: string[] = [];
      for (const letter of letters) {
        const row = `${letter}-x5`;
        moved.push(row);
        const lock = await t.lockRow(row);
        const description = await client.splitTable('t', `${letter}-x4`);
        assert.ok(description.splits.some((k) => k.toString() === `${letter}-x4`));
        assert.equal(lock.signal.aborted, false, `the lock on ${row} is held on`);
        await t.put(new Put(row, { rowLock: lock }).add('f', 'locked', 'yes'));
        await t.unlockRow(lock);
      }
      await assert.rejects(client.splitTable('t', `${letters[0]}-x4`), {
        code: 'INVALID_ARGUMENT',
      });
      const splits = (await client.describeTable('t')).splits.map((k) => k.toString());
      assert.equal(splits.length, SPLITS.length + 4, splits.join(','));
      // Every member describes the splits at once (it reads the shared catalog; many describes
      // at once share their reads).
      for (const m of fleet.members) {
        const other = await fleet.client(m);
        const described = await Promise.all(
          Array.from({ length: 200 }, () => other.describeTable('t')),
        );
        assert.ok(described.every((d) => d.splits.length === SPLITS.length + 4));
      }
      // Every member learns the splits; the 16 regions are spread evenly (6, 5, 5).
      for (const m of fleet.members) {
        await eventually(
          async () => (await fleet.status(m)).regions.length === 16,
          10_000,
          'every member sees 16 regions',
          100,
        );
      }
      await fleet.balanced(fleet.members[1] as ServeProcess, fleet.members, 30_000);
      // The daughters' server dies: whoever takes them over finds their rows.
      await (fleet.members[2] as ServeProcess).kill9();
      const live = [fleet.members[0], fleet.members[1]] as ServeProcess[];
      await fleet.balanced(
        fleet.members[0] as ServeProcess,
        live,
        LEASE_MS + 2 * RENEW_MS + 20_000,
      );
      await sleep(500);
      await load.stop();
      assert.ok(load.acks > 100, `only ${load.acks} puts acknowledged`);
      await load.check(client);
      for (const row of moved) {
        const cells = (await t.get(new Get(row))).cells.map((c) => c.qualifier.toString());
        assert.ok(cells.includes('locked'), `${row}: the put under its lock is there`);
      }
    } finally {
      await fleet.close();
    }
  });

  it('kill -9, or SIGSTOP past its lease, of the splitting server at any moment of a split: the table is split or not, every row once with its value, and what an uncommitted split made is cleared', {
    timeout: 400_000,
  }, async (t) => {
    const rows = Array.from({ length: 10_000 }, (_, i) => `a${String(i).padStart(6, '0')}`);
    const cases = [
      ...[0, 50, 100, 150, 200, 300].map((delayMs) => ({ fault: 'kill -9', delayMs })),
      // Woken, the splitter goes on with its split where it stopped: its commit (or the
      // writes to the new region before it) must be refused, its regions being the
      // survivor's now.
      ...[30, 100, 200].map((delayMs) => ({ fault: 'SIGSTOP', delayMs })),
    ];
    for (const { fault, delayMs } of cases) {
      const fleet = new Fleet();
      try {
        const a = await fleet.start();
        const b = await fleet.start();
        const client = await fleet.client(a);
        await client.createTable('t', ['f'], { splits: ['m'] });
        await fleet.balanced(a, [a, b], 30_000);
        const table = client.table('t');
        for (let i = 0; i < rows.length; i += 1000) {
          await table.batch(rows.slice(i, i + 1000).map((r) => new Put(r).add('f', 'q', r)));
        }
        const first = (await fleet.status(a)).regions[0]?.server;
        const [splitter, survivor] = (first === `127.0.0.1:${a.port}` ? [a, b] : [b, a]) as [
          ServeProcess,
          ServeProcess,
        ];
        const split = client.splitTable('t', 'a005000').then(
          () => 'split',
          (err: { code?: string }) => err.code,
        );
        await sleep(delayMs);
        if (fault === 'kill -9') {
          await splitter.kill9();
        } else {
          splitter.proc.kill('SIGSTOP');
          await sleep(2 * LEASE_MS + 1000);
          splitter.proc.kill('SIGCONT');
        }
        const outcome = await split;
        const reader = await fleet.client(survivor);
        // Once the survivor serves every region the catalog describes (the splitter's lease
        // ran out: whatever it sent PostgreSQL is settled), and a daughter nobody describes is
        // gone from the fleet.
        let splits: string[] = [];
        let last = '';
        await eventually(
          async () => {
            splits = (await reader.describeTable('t')).splits.map((k) => k.toString());
            const fleetStatus = (await fleet.status(survivor)).fleet;
            last = `splits ${splits}; ${JSON.stringify(fleetStatus)}`;
            return fleetStatus?.regions === splits.length + 1 && fleetStatus.unserved === 0;
          },
          20_000,
          () => `the fleet to serve exactly the described regions (last seen: ${last})`,
          100,
        );
        assert.ok(
          splits.join() === 'm' || splits.join() === 'a005000,m',
          `${fault} ${delayMs} ms into the split (${outcome}): splits ${splits}`,
        );
        const seen: string[] = [];
        for await (const r of reader.table('t').scan(new Scan({ stopRow: 'm' }))) {
          assert.equal(r.getValue('f', 'q')?.toString(), r.row.toString());
          seen.push(r.row.toString());
        }
        assert.deepEqual(seen, rows, `${fault} ${delayMs} ms into the split (splits ${splits})`);
        t.diagnostic(
          `${fault} ${delayMs} ms into the split: ${splits.length === 2 ? 'split' : 'not split'} (the call: ${outcome})`,
        );
      } finally {
        await fleet.close();
      }
    }
  });

  it('refuses what a fleet cannot do, and bad --fleet command lines', async () => {
    const fleet = new Fleet();
    try {
      const client = await fleetWithTable(fleet, 1);
      await assert.rejects(client.createTable('t', ['f']), { code: 'TABLE_EXISTS' });
      // A fleet server carries one session per connection.
      await assert.rejects(client.openSession(), { code: 'UNSUPPORTED_OPERATION' });
      await client.dropTable('t');
      // The drop waits for its regions to close for a lease and two looks at most; on a loaded
      // machine they may close later, and the fleet refuses the create (NOT_SERVING_REGION,
      // nothing made) until they have: the client sends it again by itself.
      await client.createTable('t', ['f', 'g']);
      assert.deepEqual(await client.listTables(), ['t']);
    } finally {
      await fleet.close();
    }
    const dir = join(dirs.path, 'bad');
    mkdirSync(dir);
    for (const [args, message] of [
      [['--fleet'], /--fleet needs --storage/],
      [['--fleet', '--storage', POSTGRES_URL, '--ha', 'database'], /--fleet takes --ha etcd only/],
      [['--fleet', '--storage', POSTGRES_URL, '--ha', 'etcd'], /--ha etcd needs --etcd/],
      [
        ['--fleet', '--storage', POSTGRES_URL, '--ha', 'etcd', '--etcd', 'ftp://127.0.0.1:1'],
        /--etcd: "ftp:\/\/127\.0\.0\.1:1" must be http/,
      ],
      [
        [
          '--fleet',
          '--storage',
          POSTGRES_URL,
          '--ha',
          'etcd',
          '--etcd',
          'http://127.0.0.1:1',
        ].concat(['--lease', '1500ms']),
        /--lease "1500ms": must be a whole number of seconds with --ha etcd/,
      ],
      [
        [
          '--fleet',
          '--storage',
          POSTGRES_URL,
          '--ha',
          'etcd',
          '--etcd',
          'http://127.0.0.1:1',
        ].concat(['--db', 'x.db']),
        /--db does not apply to --fleet --ha etcd/,
      ],
    ] as const) {
      const r = await run([cliPath, 'serve', '--data', dir, '--port', '0', ...args], {
        timeoutMs: 20_000,
      });
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message);
    }
  });

  it('one group per storage prefix: a fleet refuses the tables of servers without --fleet, they refuse a fleet’s, and the documented statement hands them over', async () => {
    const prefix = `lsm_${randomBytes(4).toString('hex')}`;
    prefixes.push(prefix);
    const storage = ['--storage', POSTGRES_URL, '--storage-prefix', prefix];
    const dir = join(dirs.path, prefix);
    mkdirSync(dir);
    const serve = (...args: string[]) =>
      run([cliPath, 'serve', '--data', dir, '--port', '0', ...storage, ...args], {
        timeoutMs: 20_000,
      });
    // A standalone server's table, with a row.
    const standalone = await startServeProcess(dir, storage);
    {
      await using c = await connect(standalone.url);
      await c.createTable('t', ['f']);
      await c.table('t').put(new Put('r').add('f', 'q', 'kept'));
    }
    await standalone.kill9();
    const refused = await serve('--fleet');
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /made by servers without --fleet.*INSERT INTO .*_schema/s);
    assert.match(refused.stderr, /INVALID_ARGUMENT/);
    // Handed over as the message says: the fleet serves the table, the row there.
    const pgc = new pg.Client({ connectionString: POSTGRES_URL });
    await pgc.connect();
    try {
      await pgc.query(`INSERT INTO ${prefix}_schema (name, version) VALUES ('fleet', 1)`);
    } finally {
      await pgc.end();
    }
    const fleet = new Fleet();
    const member = await startServeProcess(join(dir, 'member'), [
      ...storage,
      '--fleet',
      '--lease',
      `${LEASE_MS}ms`,
      '--renew',
      `${RENEW_MS}ms`,
    ]);
    try {
      const c = await fleet.client(member);
      const cells = await eventually(
        async () => {
          try {
            return (await c.table('t').get(new Get('r'))).cells;
          } catch {
            return false;
          }
        },
        20_000,
        'the fleet to serve the table',
        100,
      );
      assert.equal(cells[0]?.value.toString(), 'kept');
      // Now the fleet's: servers without --fleet refuse it at their start.
      for (const args of [
        [],
        ['--ha', 'lease-database', '--db', POSTGRES_URL, '--lock-table', `${prefix}_lock`],
      ]) {
        const r = await serve(...args);
        assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
        assert.match(r.stderr, /belong to a fleet.*DELETE FROM .*_schema WHERE name = 'fleet'/s);
      }
    } finally {
      await fleet.close();
      await member.kill9();
    }
  });
});
