/**
 * The places a {@link Table} lives, for suites that run once per place (as
 * test/directory/base-lock-factory.test.ts runs one suite per lock factory): an in-process
 * `Region`, and a `RemoteTable` on an in-process locksmith server reached over TCP.
 *
 * Each opened table also names the `Region` that holds its rows (the table itself, or the
 * server's), so a test can use in-process hooks (`rowsInternals`, `readPoint`, `flush`) on
 * either; closing the table closes everything opened for it (client, server, directory).
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ColumnFamilySpec, Region, type Table } from '../../src/rows/index.js';
import type { RegionRange } from '../../src/server/table-regions.js';
import { client, startServer } from '../server/server-fixture.js';

/** What a table under test is opened with: the options both places understand. */
export interface TableOptions {
  families?: ColumnFamilySpec[];
  leasePeriodMs?: number;
  rowLockWaitMs?: number;
  timestampOnArrival?: boolean;
  /** With a value, the rows are kept in a (temporary) directory with this durability. */
  durability?: 'fsync' | 'none';
}

/** A table under test; `close()` (or `await using`) tears down everything behind it. */
export type TableUnderTest = Table & {
  /** The region holding the rows: the table itself in process, the server's one remotely. */
  readonly backing: Region;
};

export interface TableVariant {
  readonly name: string;
  readonly remote: boolean;
  open(options?: TableOptions): Promise<TableUnderTest>;
}

const DEFAULT_FAMILIES: ColumnFamilySpec[] = ['f'];

async function openRegion(options: TableOptions = {}): Promise<TableUnderTest> {
  const { families = DEFAULT_FAMILIES, durability, ...rest } = options;
  const dir = durability === undefined ? undefined : mkdtempSync(join(tmpdir(), 'locksmith-'));
  const region = await Region.open({
    families,
    ...rest,
    ...(dir === undefined ? {} : { dir, durability }),
  });
  const close = region.close.bind(region);
  region.close = async () => {
    await close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  };
  return Object.assign(region, { backing: region });
}

async function openRemote(options: TableOptions = {}): Promise<TableUnderTest> {
  const { families = DEFAULT_FAMILIES, timestampOnArrival, ...serverOptions } = options;
  const server = await startServer(serverOptions);
  try {
    const c = await client(server);
    await c.createTable(
      't',
      families,
      timestampOnArrival === undefined ? {} : { timestampOnArrival },
    );
    const table = c.table('t');
    let closing: Promise<void> | undefined;
    // A remote table's own close() forgets nothing: here it ends the session and the server.
    const close = () => {
      closing ??= c.close().finally(() => server[Symbol.asyncDispose]());
      return closing;
    };
    return Object.assign(table, {
      backing: (server.catalog.regions('t').ranges()[0] as RegionRange).region as Region,
      close,
      [Symbol.asyncDispose]: close,
    });
  } catch (err) {
    await server[Symbol.asyncDispose]();
    throw err;
  }
}

export const tableVariants: readonly TableVariant[] = [
  { name: 'Region', remote: false, open: openRegion },
  { name: 'RemoteTable', remote: true, open: openRemote },
];
