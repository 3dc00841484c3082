import { InvalidArgumentError } from '../core/errors.js';
import { describeValue } from '../core/options.js';

/** A column family of a region's table: its name and how many versions of a cell it keeps. */
export interface ColumnFamily {
  readonly name: string;
  /** Versions kept per column; HBase before 0.96 defaulted to 3. */
  readonly maxVersions: number;
}

export type ColumnFamilySpec = string | { name: string; maxVersions?: number };

export const DEFAULT_MAX_VERSIONS = 3;
const FAMILY_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}$/;

/** Validates a family list: non-empty, HBase's printable family names, no duplicates. */
export function columnFamilies(specs: readonly ColumnFamilySpec[]): Map<string, ColumnFamily> {
  if (!Array.isArray(specs) || specs.length === 0) {
    throw new InvalidArgumentError('A region needs at least one column family');
  }
  const families = new Map<string, ColumnFamily>();
  for (const spec of specs) {
    const name = typeof spec === 'string' ? spec : spec?.name;
    const maxVersions = typeof spec === 'string' ? undefined : spec?.maxVersions;
    if (typeof name !== 'string' || !FAMILY_NAME.test(name)) {
      throw new InvalidArgumentError(
        `Invalid column family name ${describeValue(name)}: 1-255 characters of [A-Za-z0-9_.-], not starting with '.' or '-'`,
      );
    }
    if (families.has(name)) {
      throw new InvalidArgumentError(`Column family ${name} is declared twice`);
    }
    const versions = maxVersions ?? DEFAULT_MAX_VERSIONS;
    if (!Number.isSafeInteger(versions) || versions < 1) {
      throw new InvalidArgumentError(
        `maxVersions of column family ${name} must be a positive integer, got ${describeValue(maxVersions)}`,
      );
    }
    families.set(name, { name, maxVersions: versions });
  }
  return families;
}
