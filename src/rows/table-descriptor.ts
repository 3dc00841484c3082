import { InvalidArgumentError } from '../core/errors.js';
import { booleanOption, customOption, readOptions, withDefault } from '../core/option-spec.js';
import { describeValue } from '../core/options.js';
import { type ColumnFamily, type ColumnFamilySpec, columnFamilies } from './column-family.js';
import { type BytesInput, checkRow } from './row-input.js';

/** A table as `createTable` takes it and `describeTable` returns it. */
export interface TableDescriptor {
  name: string;
  families: ColumnFamily[];
  /** HBase 0.90's batch timestamps (see RegionOptions.timestampOnArrival). Default false. */
  timestampOnArrival: boolean;
  /**
   * Where the table's rows are split into regions: the first row of every region but the
   * first, ascending, as latin1 keys (a character a byte). Empty: one region.
   */
  splits: string[];
}

/** A table as the network describes it: `describeTable`'s and `createTable`'s answer. */
export interface TableDescription {
  name: string;
  families: { name: string; maxVersions: number }[];
  timestampOnArrival: boolean;
  /** The first row of every region but the first, ascending (empty: one region). */
  splits: Buffer[];
}

/** At most this many split keys at creation: 1,001 regions per table. */
export const MAX_SPLITS = 1000;

const CREATE_TABLE_SPEC = {
  timestampOnArrival: withDefault(booleanOption(), false),
  splits: withDefault(customOption('split keys', checkSplits), [] as string[]),
} as const;

/**
 * `splits` as a table keeps them: up to {@link MAX_SPLITS} row keys (each as a row is checked),
 * sorted in byte order; a key given twice is refused, as HBase refuses it.
 */
export function checkSplits(value: unknown, label = 'splits'): string[] {
  if (!Array.isArray(value)) {
    throw new InvalidArgumentError(
      `Invalid ${label} ${describeValue(value)}: expected an array of row keys`,
    );
  }
  if (value.length > MAX_SPLITS) {
    throw new InvalidArgumentError(
      `${value.length} split keys; the maximum is ${MAX_SPLITS} (${MAX_SPLITS + 1} regions)`,
    );
  }
  const keys = value.map((key: unknown, i) => checkRow(key as BytesInput, `split key ${i + 1}`));
  keys.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  for (let i = 1; i < keys.length; i++) {
    if (keys[i] === keys[i - 1]) {
      throw new InvalidArgumentError(
        `Split key ${describeValue(Buffer.from(keys[i] as string, 'latin1').toString())} is given twice`,
      );
    }
  }
  return keys;
}

const TABLE_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
/** A table name: 1-128 of `[A-Za-z0-9_.-]`, not starting with `.` or `-` (a path component). */
export function checkTableName(name: unknown): string {
  if (typeof name !== 'string' || !TABLE_NAME.test(name)) {
    throw new InvalidArgumentError(
      `Invalid table name ${describeValue(name)}: 1-128 characters of [A-Za-z0-9_.-], not starting with '.' or '-'`,
    );
  }
  return name;
}

/** Checks `createTable`'s arguments into a descriptor (nothing is created yet). */
export function checkTableDescriptor(
  name: unknown,
  families: unknown,
  options: unknown,
): TableDescriptor {
  const checkedName = checkTableName(name);
  const specs = columnFamilies(families as ColumnFamilySpec[]);
  // A nil from the wire is an absent option.
  const given =
    typeof options === 'object' && options !== null && !Array.isArray(options)
      ? Object.fromEntries(Object.entries(options).filter(([, v]) => v !== null))
      : (options ?? undefined);
  const { timestampOnArrival, splits } = readOptions(
    given,
    'createTable options',
    CREATE_TABLE_SPEC,
    'createTable option ',
  );
  return { name: checkedName, families: [...specs.values()], timestampOnArrival, splits };
}

/**
 * A descriptor as a catalog store reads it back from `JSON.stringify(descriptor)`: checked
 * again, its split keys (latin1 in the JSON) turned back into bytes first. A descriptor
 * written before tables had regions has no `splits`: one region.
 */
export function descriptorFromJson(text: string): TableDescriptor {
  const raw = JSON.parse(text) as Record<string, unknown>;
  const splits = raw.splits ?? [];
  return checkTableDescriptor(raw.name, raw.families, {
    timestampOnArrival: raw.timestampOnArrival,
    splits: Array.isArray(splits)
      ? splits.map((k) => (typeof k === 'string' ? Buffer.from(k, 'latin1') : k))
      : splits,
  });
}

/** The description of a descriptor (its families' names and versions, no internals). */
export function describeTable(d: TableDescriptor): TableDescription {
  return {
    name: d.name,
    families: d.families.map((f) => ({ name: f.name, maxVersions: f.maxVersions })),
    timestampOnArrival: d.timestampOnArrival,
    splits: d.splits.map((k) => Buffer.from(k, 'latin1')),
  };
}
