// The error classes this subpath's functions throw, re-exported so callers can catch by class
// without a second import from 'locksmith-locks' (they are the same objects as core's).
export {
  AbortedError,
  AlreadyClosedError,
  InvalidArgumentError,
  LockIOError,
  LockLostError,
  LockObtainFailedError,
  LocksmithError,
  UnsupportedOperationError,
} from '../core/errors.js';
export {
  AbstractLocker,
  type AbstractLockerOptions,
  ACQUIRE_ABORTED_MESSAGE,
  type AcquireContext,
} from './abstract-locker.js';
export {
  type CommandExit,
  CommandService,
  type CommandServiceOptions,
  DEFAULT_GRACE_MS,
  exitStatus,
} from './command-service.js';
export {
  type CreateLockerOptions,
  createLocker,
  DATABASE_QUERY_TIMEOUT_MS,
  type DatabaseLockerSpec,
  type EtcdLockerSpec,
  type LeaseDatabaseLockerSpec,
  LOCKER_KINDS,
  type LockerKind,
  type SharedFileLockerSpec,
} from './create-locker.js';
export {
  DatabaseLocker,
  type DatabaseLockerOptions,
  DEFAULT_DATABASE_KEEP_ALIVE_PERIOD,
  DEFAULT_DATABASE_QUERY_TIMEOUT,
} from './database-locker.js';
export {
  DEFAULT_ETCD_LEASE_MS,
  EtcdLocker,
  type EtcdLockerOptions,
  type EtcdTlsOptions,
} from './etcd-locker.js';
export {
  type IOErrorContext,
  type IOErrorPolicy,
  type IOErrorVerdict,
  ignoreIOErrors,
  leaseLockerIOErrorPolicy,
  stopOnUnknownOwnership,
} from './io-error-policy.js';
export {
  defaultLeaseHolderId,
  LeaseDatabaseLocker,
  type LeaseDatabaseLockerOptions,
} from './lease-database-locker.js';
export {
  checkLeaseRules,
  type LeaseTimings,
  type LeaseTimingsWording,
  MAX_RENEW_FRACTION,
  MIN_LEASE_MS,
} from './lease-rules.js';
export { defaultLeaseStatements, type LeaseStatements } from './lease-statements.js';
export {
  DEFAULT_ACQUIRE_INTERVAL_MS,
  type Locker,
  type LockerOptions,
  type LockerStartOptions,
} from './locker.js';
export { consoleLogger, type StoreLogger, silentLogger } from './logger.js';
export {
  Mastership,
  type MastershipOptions,
  type WithMastershipOptions,
  withMastership,
} from './mastership.js';
export type { Service, ServiceContext } from './service.js';
export {
  DEFAULT_SHARED_FILE_KEEP_ALIVE_PERIOD,
  LOCK_FILE_NAME,
  SharedFileLocker,
  type SharedFileLockerOptions,
} from './shared-file-locker.js';
export {
  type DatabaseUrl,
  type DialectKind,
  parseDatabaseUrl,
  redactUrl,
} from './sql/database-url.js';
export type { Dialect, SqlConnection, SqlResult } from './sql/dialect.js';
export { checkIdentifier } from './sql/identifier.js';
export { DEFAULT_LOCK_TABLE_NAME } from './sql/lock-table.js';
export type { DatabaseSource } from './sql/open-dialect.js';
export {
  Supervisor,
  type SupervisorEvent,
  type SupervisorEvents,
  type SupervisorOptions,
  type SupervisorState,
} from './supervisor.js';
export {
  type WatchdogDeadlines,
  type WatchdogPolicyOptions,
  watchdogPolicy,
} from './watchdog-policy.js';
