import type { Clock } from '../core/clock.js';
import { InvalidArgumentError } from '../core/errors.js';
import {
  booleanOption,
  callbackOption,
  clockOption,
  customOption,
  oneOfOption,
  positiveDurationOption,
  readOptions,
  type SpecOf,
  withDefault,
} from '../core/option-spec.js';
import { describeValue } from '../core/options.js';
import { checkWaitMs } from './call-options.js';
import { type ColumnFamily, type ColumnFamilySpec, columnFamilies } from './column-family.js';
import type { OpenRegionStorage } from './region-storage.js';
import { DEFAULT_LEASE_PERIOD_MS, DEFAULT_ROW_LOCK_WAIT_MS } from './row-lock-manager.js';
import { RowStorage } from './row-storage.js';

export interface RegionOptions {
  /** The table's column families (names, or `{ name, maxVersions }`; 3 versions by default). */
  families: readonly ColumnFamilySpec[];
  /**
   * Where the data lives, guarded by `write.lock` (a second opener fails). Omit for a region
   * that keeps nothing when the process ends.
   */
  dir?: string | undefined;
  /** `fsync` (default): a write is acknowledged once on disk. `none`: once written to the OS. */
  durability?: 'fsync' | 'none' | undefined;
  /** Lease of an explicit row lock, renewed by every use (HBase: 60000). */
  leasePeriodMs?: number | undefined;
  /** How long a locker waits for a row before `LOCK_TIMEOUT` (HBase 0.94: 30000). */
  rowLockWaitMs?: number | undefined;
  /**
   * HBase 0.90's batch path: the time of a mutation is read when it arrives, before it waits
   * for the row lock (so a put that waited can land behind newer ones). Default false: the
   * time is read once the lock is held, and never behind the row's previous one.
   */
  timestampOnArrival?: boolean | undefined;
  /** Checkpoint (snapshot + major compaction) once this many log bytes pile up (64 MiB). */
  checkpointBytes?: number | undefined;
  clock?: Clock | undefined;
  /**
   * The epoch of the writer (a master's fencing token, a safe integer >= 1), passed to the
   * storage (`RowStorageOptions.epoch`): the open takes `dir` over from a deposed master and
   * refuses a newer one's (`FENCED`), and once a newer master has opened `dir`, writes fail
   * with `FencedError` (`FENCED`). Absent: standalone. Needs `dir`.
   */
  epoch?: number | undefined;
  /**
   * How the storage at `dir` is opened: `RowStorage.open` (log segments and snapshots in the
   * directory) unless another implementation of `RegionStorage` is plugged in here. Needs `dir`.
   */
  openStorage?: OpenRegionStorage | undefined;
}

/** {@link RegionOptions} once checked, with every default filled in. */
export interface CheckedRegionOptions {
  families: Map<string, ColumnFamily>;
  dir: string | undefined;
  durability: 'fsync' | 'none';
  leasePeriodMs: number;
  rowLockWaitMs: number;
  timestampOnArrival: boolean;
  checkpointBytes: number;
  clock: Clock;
  epoch: number | undefined;
  openStorage: OpenRegionStorage;
}

/** Region.open's options, declared once (see `core/option-spec.ts`). */
const REGION_SPEC = {
  families: customOption('column families: names or { name, maxVersions }', (value) =>
    columnFamilies(value as readonly ColumnFamilySpec[]),
  ),
  dir: customOption('a non-empty path', (value, label) => {
    if (typeof value !== 'string' || value.length === 0 || value.includes('\0')) {
      throw new InvalidArgumentError(
        `${label} must be a non-empty path, got ${describeValue(value)}`,
      );
    }
    return value;
  }),
  durability: withDefault(oneOfOption(['fsync', 'none'] as const), 'fsync'),
  leasePeriodMs: withDefault(positiveDurationOption(), DEFAULT_LEASE_PERIOD_MS),
  rowLockWaitMs: withDefault(
    customOption('milliseconds >= 0, or Infinity', (value, label) => checkWaitMs(value, label)),
    DEFAULT_ROW_LOCK_WAIT_MS,
  ),
  timestampOnArrival: withDefault(booleanOption(), false),
  checkpointBytes: withDefault(
    customOption('a positive integer', (value, label) => {
      if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
        throw new InvalidArgumentError(
          `${label} must be a positive integer, got ${describeValue(value)}`,
        );
      }
      return value;
    }),
    64 * 1024 * 1024,
  ),
  clock: clockOption(),
  epoch: customOption('a safe integer >= 1', (value, label) => {
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
      throw new InvalidArgumentError(
        `${label} must be a safe integer >= 1, got ${describeValue(value)}`,
      );
    }
    return value;
  }),
  openStorage: withDefault(callbackOption<OpenRegionStorage>(), (dir, options, accept) =>
    RowStorage.open(dir, options, accept),
  ),
} as const satisfies SpecOf<RegionOptions>;

/**
 * Checks every option of `Region.open` before anything is opened or created, so a refused
 * open touches nothing. Refuses with `INVALID_ARGUMENT`: a non-object, an unknown option name
 * (a misspelt `leasePeriodMS` would otherwise silently keep the default), and every value out
 * of its domain: `leasePeriodMs` a duration > 0 (core's bounds, so no timer overflows),
 * `rowLockWaitMs` >= 0 or `Infinity`, `checkpointBytes` a positive integer, `clock` with
 * `monotonic`, `wall` and `sleep`, `timestampOnArrival` a boolean, `epoch` a safe integer >= 1
 * (and, like `openStorage`, only with `dir`).
 */
export function checkRegionOptions(options: RegionOptions): CheckedRegionOptions {
  if (options === undefined) {
    throw new InvalidArgumentError('Region.open needs an options object with `families`');
  }
  const o = readOptions(options, 'Region.open', REGION_SPEC, 'Region.open option ');
  if (o.families === undefined) {
    throw new InvalidArgumentError('Region.open needs an options object with `families`');
  }
  if (o.epoch !== undefined && o.dir === undefined) {
    throw new InvalidArgumentError('Region.open option epoch needs dir (storage to fence)');
  }
  if (options.openStorage !== undefined && o.dir === undefined) {
    throw new InvalidArgumentError('Region.open option openStorage needs dir');
  }
  return { ...o, families: o.families };
}
