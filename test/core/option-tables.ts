import { describeOptions, type OptionSpec } from '../../src/core/option-spec.js';
import { DATABASE_LOCKER_SPEC } from '../../src/store/database-locker.js';
import { ETCD_LOCKER_SPEC } from '../../src/store/etcd-locker.js';
import { LEASE_DATABASE_LOCKER_SPEC } from '../../src/store/lease-database-locker.js';
import { WITH_MASTERSHIP_SPEC } from '../../src/store/mastership.js';
import { SHARED_FILE_LOCKER_SPEC } from '../../src/store/shared-file-locker.js';
import { SUPERVISOR_SPEC } from '../../src/store/supervisor.js';

/** The option tables docs/store.md carries, each rendered from its entry point's spec. */
export const STORE_OPTION_TABLES: Record<string, OptionSpec> = {
  SharedFileLocker: SHARED_FILE_LOCKER_SPEC,
  DatabaseLocker: DATABASE_LOCKER_SPEC,
  LeaseDatabaseLocker: LEASE_DATABASE_LOCKER_SPEC,
  EtcdLocker: ETCD_LOCKER_SPEC,
  Supervisor: SUPERVISOR_SPEC,
  withMastership: WITH_MASTERSHIP_SPEC,
};

/** A markdown table of `spec`'s options: name (and aliases), what it takes, its default. */
export function optionTable(spec: OptionSpec): string {
  const rows = describeOptions(spec).map((o) => {
    const name = [o.name, ...o.aliases].map((n) => `\`${n}\``).join(' / ');
    return `| ${name} | ${o.domain} | ${o.default} |`;
  });
  return ['| option (alias) | takes | default |', '|---|---|---|', ...rows].join('\n');
}
