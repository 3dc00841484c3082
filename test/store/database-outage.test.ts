import assert from 'node:assert/strict';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import {
  DatabaseLocker,
  LeaseDatabaseLocker,
  type Locker,
  Supervisor,
} from '../../src/store/index.js';
import { dropTable, MYSQL_URL, POSTGRES_URL, uniqueTable } from '../fixtures/db-servers.js';
import { eventually, sleep } from '../helpers.js';

/**
 * A TCP proxy in front of a real database: `cut()` drops every connection and refuses new ones
 * (the database is gone, as in a restart or a partition), `restore()` lets them through again.
 */
class Outage {
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();
  port = 0;

  constructor(readonly target: number) {}

  async restore(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(this.target, '127.0.0.1');
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.on('close', () => this.#sockets.delete(s));
        s.on('error', () => {});
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((r) => server.listen(this.port, '127.0.0.1', r));
    this.port = (server.address() as { port: number }).port;
    this.#server = server;
  }

  async cut(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  }
}

function via(url: string, port: number): string {
  const u = new URL(url);
  u.port = String(port);
  return u.toString();
}

describe('database outage: the master stops before the lock can pass, and serves again when the database returns', () => {
  for (const [name, target, url, kind] of [
    ['lease locker on PostgreSQL (conformance S30)', 5432, POSTGRES_URL, 'postgres'],
    ['database locker on MariaDB', 3306, MYSQL_URL, 'mysql'],
  ] as const) {
    it(name, async (t) => {
      const proxy = new Outage(target);
      await proxy.restore();
      const table = uniqueTable();
      const database = via(url, proxy.port);
      const lease = 1_000;
      const locker: Locker =
        kind === 'postgres'
          ? new LeaseDatabaseLocker({
              database,
              lockTableName: table,
              leaseMs: lease,
            })
          : new DatabaseLocker({
              database,
              lockTableName: table,
              acquireIntervalMs: 200,
              queryTimeoutMs: 300,
              takeoverPauseMs: 0,
            });
      const events: string[] = [];
      const tokens: number[] = [];
      const supervisor = new Supervisor({
        locker,
        keepAlivePeriodMs: 200,
        service: {
          start: ({ token }) => {
            tokens.push(token);
            events.push('start');
          },
          stop: () => {
            events.push('stop');
          },
        },
      });
      supervisor.on('demoted', () => events.push('demoted'));
      try {
        await supervisor.start();
        const t0 = performance.now();
        await proxy.cut();
        await eventually(() => events.includes('demoted'), 5_000);
        const demoted = performance.now() - t0;
        assert.deepEqual(events, ['start', 'stop', 'demoted']);
        if (kind === 'postgres') {
          // Stopped well before the lease (renewed at most 200 ms before the cut) could expire.
          assert.ok(demoted < lease - 200, `demoted after ${demoted} ms`);
        }
        await sleep(300);
        const t1 = performance.now();
        await proxy.restore();
        await eventually(() => events.filter((e) => e === 'start').length === 2, 10_000);
        t.diagnostic(
          `outage: demoted ${demoted.toFixed(0)} ms after the cut; master again ${(performance.now() - t1).toFixed(0)} ms after the database returned`,
        );
        assert.ok((tokens[1] as number) > (tokens[0] as number));
      } finally {
        await supervisor.stop();
        await proxy.cut();
        await dropTable(kind, table);
      }
    });
  }
});
