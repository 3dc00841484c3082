// The errors a Region's (and a RemoteTable's) calls fail with.
export {
  AbortedError,
  AlreadyClosedError,
  ConnectionLostError,
  DeadlockError,
  FencedError,
  InternalError,
  InvalidArgumentError,
  LimitExceededError,
  LockIOError,
  LockLostError,
  LockObtainFailedError,
  LocksmithError,
  LockTimeoutError,
  NotMasterError,
  ProtocolError,
  TableError,
  UnauthenticatedError,
  UnknownRowLockError,
  UnsupportedOperationError,
} from '../core/errors.js';
export { StaleTokenError } from '../core/fencing.js';
export { toStringBinary } from './bytes.js';
export type { Cell, CellType } from './cell.js';
export { formatCell } from './cell.js';
export { type ColumnFamily, type ColumnFamilySpec, DEFAULT_MAX_VERSIONS } from './column-family.js';
export {
  Delete,
  type DeleteEntry,
  Increment,
  Mutation,
  type MutationOptions,
  Put,
  RowMutations,
} from './mutation.js';
export {
  MAX_POSTGRES_RECORD_BYTES,
  PostgresRegionStorage,
  type PostgresRegionStorageOptions,
  postgresRegionStorage,
} from './postgres-region-storage.js';
export { SCHEMA_VERSION as POSTGRES_STORAGE_SCHEMA_VERSION } from './postgres-storage-schema.js';
export { Get, Query, Scan } from './query.js';
export {
  type CallOptions,
  type LockRowOptions,
  Region,
  type RegionEvents,
  type RegionOptions,
  type TryLockOptions,
} from './region.js';
export type {
  OpenRegionStorage,
  Recovered,
  RegionStorage,
  StorageOpenOptions,
} from './region-storage.js';
export { Result } from './result.js';
export {
  type BytesInput,
  MAX_CELLS_PER_CALL,
  MAX_QUALIFIER_BYTES,
  MAX_ROW_BYTES,
  MAX_VALUE_BYTES,
} from './row-input.js';
export { RowLock } from './row-lock.js';
export type {
  DeadlockRecord,
  RowLockActivity,
  RowLockOwner,
  RowLockWaitInfo,
} from './row-lock-manager.js';
export { RowStorage, type RowStorageOptions } from './row-storage.js';
export type {
  BatchStatus,
  RowLockRef,
  Table,
  TableCallOptions,
  TableLockOptions,
  TableRowLock,
  TableTryLockOptions,
} from './table.js';
export type { WaitStep } from './wait-for-graph.js';
