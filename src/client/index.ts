// The network client of a locksmith server: a RemoteTable is the same `Table` as an
// in-process Region, so the values it takes and gives (Put, Get, Result, ...) come with it.

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
  StaleTokenError,
  TableError,
  UnauthenticatedError,
  UnknownRowLockError,
  UnsupportedOperationError,
} from '../core/errors.js';
export { toStringBinary } from '../rows/bytes.js';
export type { Cell, CellType } from '../rows/cell.js';
export { formatCell } from '../rows/cell.js';
export {
  Delete,
  Increment,
  Mutation,
  Put,
  RowMutations,
} from '../rows/mutation.js';
export { Get, Scan } from '../rows/query.js';
export { Result } from '../rows/result.js';
export type { BytesInput } from '../rows/row-input.js';
export type { BatchStatus, Table, TableCallOptions, TableRowLock } from '../rows/table.js';
export {
  type AdminCallOptions,
  type ConnectOptions,
  type CreateTableOptions,
  connect,
  type FailoverEvent,
  LocksmithClient,
  type LocksmithClientEvents,
  type OpenSessionOptions,
  parseServerUrl,
  type TableDescription,
} from './locksmith-client.js';
export { LocksmithSession, type LocksmithSessionEvents } from './locksmith-session.js';
export { RemoteRowLock } from './remote-row-lock.js';
export { RemoteTable } from './remote-table.js';
