import { InvalidArgumentError } from '../core/errors.js';
import { booleanOption, readOptions, withDefault } from '../core/option-spec.js';
import { describeValue } from '../core/options.js';
import { type ColumnFamily, type ColumnFamilySpec, columnFamilies } from './column-family.js';

/** A table as `createTable` takes it and `describeTable` returns it. */
export interface TableDescriptor {
  name: string;
  families: ColumnFamily[];
  /** HBase 0.90's batch timestamps (see RegionOptions.timestampOnArrival). Default false. */
  timestampOnArrival: boolean;
}

/** A table as the network describes it: `describeTable`'s and `createTable`'s answer. */
export interface TableDescription {
  name: string;
  families: { name: string; maxVersions: number }[];
  timestampOnArrival: boolean;
}

const CREATE_TABLE_SPEC = { timestampOnArrival: withDefault(booleanOption(), false) } as const;

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
  const { timestampOnArrival } = readOptions(
    given,
    'createTable options',
    CREATE_TABLE_SPEC,
    'createTable option ',
  );
  return { name: checkedName, families: [...specs.values()], timestampOnArrival };
}

/** The description of a descriptor (its families' names and versions, no internals). */
export function describeTable(d: TableDescriptor): TableDescription {
  return {
    name: d.name,
    families: d.families.map((f) => ({ name: f.name, maxVersions: f.maxVersions })),
    timestampOnArrival: d.timestampOnArrival,
  };
}
