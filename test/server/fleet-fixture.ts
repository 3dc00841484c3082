// A fleet of real `locksmith serve --fleet` processes on the PostgreSQL storage (each fleet
// its own table prefix in the test database), and writers whose every acknowledged put is
// checked afterwards: shared by the fleet's tests with leases in PostgreSQL and in etcd.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after } from 'node:test';
import { connect, type LocksmithClient } from '../../src/client/locksmith-client.js';
import { Get, Put } from '../../src/rows/index.js';
import type { ServerStatus } from '../../src/server/server-status.js';
import { dropStoragePrefixes, POSTGRES_URL } from '../fixtures/db-servers.js';
import { type ServeProcess, startServeProcess } from '../fixtures/serve-process.js';
import { cliPath, eventually, sleep, tempDir } from '../helpers.js';

export const LEASE_MS = 2000;
export const RENEW_MS = 500;
/** Split keys of a table of 12 regions: '', b, c, ..., l. */
export const SPLITS = 'bcdefghijkl'.split('');
/** One row key per region (a..l), and one more in the last region. */
export const ROW_PREFIXES = 'abcdefghijklm'.split('');

/** The fleets' data directories, and their storage prefixes (dropped after the file's tests). */
export const dirs = tempDir('locksmith-fleet-');
export const prefixes: string[] = [];
after(async () => {
  dirs[Symbol.dispose]();
  await dropStoragePrefixes(prefixes);
});

/** A fleet's servers on one prefix; `start()` adds a member. */
export class Fleet {
  readonly prefix = `lsm_${randomBytes(4).toString('hex')}`;
  readonly members: ServeProcess[] = [];
  readonly #clients: LocksmithClient[] = [];
  /** Writers to stop before the servers go, whatever the test's outcome. */
  readonly loads: { stop(): Promise<void> }[] = [];
  #n = 0;

  constructor(
    readonly leaseMs = LEASE_MS,
    /** The server program: the CLI, or `unfenced-serve` for the negative control. */
    readonly program: string[] = [cliPath],
    /** More `serve` arguments (the etcd flags of a fleet whose leases are in etcd). */
    readonly extra: string[] = [],
  ) {
    prefixes.push(this.prefix);
  }

  async start(): Promise<ServeProcess> {
    const dataDir = join(dirs.path, `${this.prefix}-${this.#n++}`);
    mkdirSync(dataDir);
    const proc = await startServeProcess(
      dataDir,
      [
        '--storage',
        POSTGRES_URL,
        '--storage-prefix',
        this.prefix,
        '--fleet',
        '--lease',
        `${this.leaseMs}ms`,
        '--renew',
        `${RENEW_MS}ms`,
        '--http-port',
        '0',
        ...this.extra,
      ],
      20_000,
      this.program,
    );
    this.members.push(proc);
    return proc;
  }

  async client(member: ServeProcess): Promise<LocksmithClient> {
    const c = await connect(member.url, { sessionLeaseMs: 10_000 });
    this.#clients.push(c);
    return c;
  }

  /** The status of a member (through a short-lived client). */
  async status(member: ServeProcess): Promise<ServerStatus> {
    const c = await connect(member.url);
    try {
      return await c.status();
    } finally {
      await c.close();
    }
  }

  /**
   * Resolves once `live` members (by address) serve every region of table `t`, each its even
   * share, as `member` sees it; with the regions per member.
   */
  async balanced(
    member: ServeProcess,
    live: ServeProcess[],
    timeoutMs: number,
  ): Promise<Map<string, number>> {
    const addresses = new Set(live.map((m) => `127.0.0.1:${m.port}`));
    let last = '';
    return eventually(
      async () => {
        const s = await this.status(member);
        const per = new Map<string, number>();
        for (const r of s.regions) {
          if (r.server === null || !addresses.has(r.server)) {
            last = JSON.stringify(s.regions.map((x) => [x.startKey, x.server]));
            return false;
          }
          per.set(r.server, (per.get(r.server) ?? 0) + 1);
        }
        const counts = [...per.values()];
        last = JSON.stringify([...per]);
        const even = Math.floor(s.regions.length / live.length);
        return per.size === live.length && counts.every((n) => n === even || n === even + 1)
          ? per
          : false;
      },
      timeoutMs,
      () => `an even spread over ${live.length} members (last seen: ${last})`,
      100,
    );
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.loads.splice(0).map((l) => l.stop()));
    await Promise.allSettled(this.#clients.splice(0).map((c) => c.close()));
    await Promise.allSettled(this.members.map((m) => m.kill9()));
  }
}

/**
 * Writers over every region through one client, each on rows of its own (`group` tells the
 * writers of two clients apart). Every put writes a column of its own (`q<n>`), so every
 * acknowledged put must be found afterwards, whatever was written after it: a lost one cannot
 * hide behind a later write of its row. A put that failed (CONNECTION_LOST while its server
 * died) may or may not be there.
 */
export function writers(
  fleet: Fleet,
  client: LocksmithClient,
  n: number,
  group: string,
  prefixes: readonly string[] = ROW_PREFIXES,
) {
  const acked = new Map<string, Map<string, string>>();
  const failures = new Map<string, number>();
  let acks = 0;
  let running = true;
  let seq = 0;
  const t = client.table('t');
  const loops = Array.from({ length: n }, async (_, w) => {
    for (let i = 0; running; i++) {
      const row = `${prefixes[(i + w) % prefixes.length]}-${group}${w}`;
      const n = seq++;
      try {
        await t.put(new Put(row).add('f', `q${n}`, `${group}${n}`));
        const columns = acked.get(row) ?? new Map<string, string>();
        columns.set(`q${n}`, `${group}${n}`);
        acked.set(row, columns);
        acks++;
      } catch (err) {
        const code = (err as { code?: string }).code ?? String(err);
        failures.set(code, (failures.get(code) ?? 0) + 1);
        await sleep(20);
      }
    }
  });
  const load = {
    failures,
    get acks() {
      return acks;
    },
    async stop(): Promise<void> {
      running = false;
      await Promise.all(loops);
    },
    /** Every acknowledged put is there, read through `reader`. */
    async check(reader: LocksmithClient): Promise<void> {
      const table = reader.table('t');
      for (const [row, columns] of acked) {
        const found = new Map(
          (await table.get(new Get(row))).cells.map((c) => [
            c.qualifier.toString(),
            c.value.toString(),
          ]),
        );
        const lost = [...columns].filter(([q, v]) => found.get(q) !== v);
        assert.equal(
          lost.length,
          0,
          `row ${row}: acknowledged puts lost: ${lost.map(([q, v]) => `${q}=${v}`).join(', ')}`,
        );
      }
    },
  };
  fleet.loads.push(load);
  return load;
}

export async function fleetWithTable(fleet: Fleet, members: number): Promise<LocksmithClient> {
  for (let i = 0; i < members; i++) await fleet.start();
  const client = await fleet.client(fleet.members[0] as ServeProcess);
  await client.createTable('t', ['f'], { splits: SPLITS });
  await fleet.balanced(fleet.members[0] as ServeProcess, fleet.members, 20_000);
  return client;
}

/**
 * Pauses the third member past its lease under load from a client of it and one of the
 * first, wakes it, and checks every row through the second member.
 */
export async function pauseUnderLoad(
  fleet: Fleet,
): Promise<{ check(): Promise<void>; moves: unknown[] }> {
  const client = await fleetWithTable(fleet, 3);
  const paused = fleet.members[2] as ServeProcess;
  // A client of the paused server itself: its calls reach it first.
  const own = await fleet.client(paused);
  const load = writers(fleet, client, 3, 'c');
  const ownLoad = writers(fleet, own, 2, 'o');
  // And writers on the paused server's rows only: some of its writes are under way when it
  // stops, whatever the moment.
  const at = `127.0.0.1:${paused.port}`;
  const regions = (await fleet.status(paused)).regions;
  const its = ROW_PREFIXES.filter(
    (p) => [...regions].reverse().find((r) => r.startKey <= p)?.server === at,
  );
  assert.ok(its.length > 0, `the paused server serves rows: ${JSON.stringify(regions)}`);
  const itsLoad = writers(fleet, client, 3, 'p', its);
  await sleep(800);
  paused.proc.kill('SIGSTOP');
  try {
    await fleet.balanced(fleet.members[0] as ServeProcess, fleet.members.slice(0, 2), 30_000);
    await sleep(500);
  } finally {
    paused.proc.kill('SIGCONT');
  }
  // Woken, it serves none of its old regions: it rejoins and takes its share again.
  await fleet.balanced(fleet.members[0] as ServeProcess, fleet.members, 30_000);
  await sleep(500);
  await load.stop();
  await ownLoad.stop();
  await itsLoad.stop();
  const reader = await fleet.client(fleet.members[1] as ServeProcess);
  return {
    check: async () => {
      await load.check(reader);
      await ownLoad.check(reader);
      await itsLoad.check(reader);
    },
    moves: (await fleet.status(paused)).fleet?.moves ?? [],
  };
}
