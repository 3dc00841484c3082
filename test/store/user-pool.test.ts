// A pool handed in by the user outlives the lockers that use it: a locker must leave it as it
// found it, whatever number of start/stop cycles (demotions and restarts of a supervisor) it
// goes through.
import assert from 'node:assert/strict';
import type { EventEmitter } from 'node:events';
import { after, describe, it } from 'node:test';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { DatabaseLocker, LeaseDatabaseLocker } from '../../src/store/index.js';
import { dropTable, MYSQL_URL, POSTGRES_URL, uniqueTable } from '../fixtures/db-servers.js';

const CYCLES = 20;

/** Every listener on every event of the emitters, by event name. */
function listeners(...emitters: EventEmitter[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const e of emitters) {
    for (const name of e.eventNames()) {
      const key = String(name);
      counts[key] = (counts[key] ?? 0) + e.listenerCount(name);
    }
  }
  return counts;
}

describe('lockers on a pool the user hands in', () => {
  const tables: ['postgres' | 'mysql', string][] = [];
  after(async () => {
    for (const [kind, t] of tables) await dropTable(kind, t);
  });

  for (const kind of ['postgres', 'mysql'] as const) {
    for (const Locker of [DatabaseLocker, LeaseDatabaseLocker]) {
      it(`${Locker.name} on ${kind}: ${CYCLES} start/stop cycles leave no listener on the pool`, async () => {
        const table = uniqueTable();
        tables.push([kind, table]);
        const pgPool =
          kind === 'postgres' ? new pg.Pool({ connectionString: POSTGRES_URL, max: 3 }) : undefined;
        const myPool = kind === 'mysql' ? mysql.createPool({ uri: MYSQL_URL }) : undefined;
        // mysql2/promise wraps a callback pool, where the events are.
        const emitters: EventEmitter[] =
          pgPool !== undefined
            ? [pgPool]
            : [
                myPool as unknown as EventEmitter,
                (myPool as unknown as { pool: EventEmitter }).pool,
              ];
        let warned = 0;
        const onWarning = (w: Error) => {
          if (w.name === 'MaxListenersExceededWarning') warned++;
        };
        process.on('warning', onWarning);
        try {
          const locker = new Locker({
            database: pgPool !== undefined ? { postgres: pgPool } : { mysql: myPool as mysql.Pool },
            lockTableName: table,
            // ActiveMQ's name: the acquire interval of one, the lease of the other.
            ...({ lockAcquireSleepInterval: 1_000 } as object),
          });
          await locker.start();
          await locker.stop();
          const baseline = listeners(...emitters);
          for (let i = 0; i < CYCLES; i++) {
            await locker.start();
            assert.ok(await locker.keepAlive());
            await locker.stop();
            assert.deepEqual(listeners(...emitters), baseline, `after cycle ${i + 1}`);
          }
          await new Promise<void>((r) => setImmediate(r));
          assert.equal(warned, 0, 'MaxListenersExceededWarning');
          // The pool is still the user's and still works.
          if (pgPool !== undefined)
            assert.equal((await pgPool.query('SELECT 1 AS x')).rows[0].x, 1);
          else await myPool?.query('SELECT 1');
        } finally {
          process.off('warning', onWarning);
          await pgPool?.end();
          await myPool?.end();
        }
      });
    }
  }
});
