// Servers in this process on the directory storage or on PostgreSQL (each test's own table
// prefix in the test database), each on a data directory of its own kept across restarts: for
// the tests of regions and splits, which run every case on both storages.
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type LocksmithClient } from '../../src/client/locksmith-client.js';
import { postgresRegionStorage } from '../../src/rows/postgres-region-storage.js';
import { LocksmithServer, type ServerOptions } from '../../src/server/server.js';
import { dropStoragePrefixes, POSTGRES_URL } from '../fixtures/db-servers.js';
import { tempDir } from '../helpers.js';

export type Storage = 'files' | 'postgres';

/** A server of {@link StorageServers.serverOn}. */
export interface StorageServer extends AsyncDisposable {
  readonly dataDir: string;
  /** Its PostgreSQL table prefix (`--storage-prefix`), used only on PostgreSQL. */
  readonly prefix: string;
  readonly server: LocksmithServer;
  /** A client of it, closed with it (and before a restart). */
  client(): Promise<LocksmithClient>;
  /** Closes it and its clients, and starts it again on the same data. */
  restart(): Promise<void>;
}

/**
 * One test file's servers: `dir(name)` gives fresh directories under one temporary directory,
 * and `dispose()` (in the file's `after`) removes them and drops the PostgreSQL tables made.
 */
export class StorageServers {
  readonly #dirs: { path: string; [Symbol.dispose](): void };
  #count = 0;
  readonly #prefixes: string[] = [];

  constructor(prefix: string) {
    this.#dirs = tempDir(prefix);
  }

  /** A fresh path `<temp>/<name>-<n>` (not created). */
  dir(name: string): string {
    return join(this.#dirs.path, `${name}-${this.#count++}`);
  }

  async serverOn(storage: Storage): Promise<StorageServer> {
    const dataDir = this.dir('server');
    mkdirSync(dataDir);
    const prefix = `lsm_${randomBytes(4).toString('hex')}`;
    if (storage === 'postgres') this.#prefixes.push(prefix);
    const options: Partial<ServerOptions> & { dataDir: string } = {
      dataDir,
      port: 0,
      durability: 'fsync',
      ...(storage === 'postgres'
        ? {
            openStorage: postgresRegionStorage({
              database: POSTGRES_URL,
              root: dataDir,
              tablePrefix: prefix,
            }),
          }
        : {}),
    };
    let server = await LocksmithServer.listen(options);
    const clients: LocksmithClient[] = [];
    return {
      dataDir,
      prefix,
      get server() {
        return server;
      },
      async client(): Promise<LocksmithClient> {
        const c = await connect(`locksmith://127.0.0.1:${server.port}`);
        clients.push(c);
        return c;
      },
      async restart(): Promise<void> {
        await Promise.allSettled(clients.splice(0).map((c) => c.close()));
        await server.close();
        server = await LocksmithServer.listen(options);
      },
      async [Symbol.asyncDispose](): Promise<void> {
        await Promise.allSettled(clients.splice(0).map((c) => c.close()));
        await server.close();
      },
    };
  }

  async dispose(): Promise<void> {
    this.#dirs[Symbol.dispose]();
    await dropStoragePrefixes(this.#prefixes);
  }
}
