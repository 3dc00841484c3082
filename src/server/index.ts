// The error classes the server's functions throw, re-exported so callers can catch by class
// with one import (the same classes as `locksmith`'s).
export {
  AbortedError,
  AlreadyClosedError,
  InvalidArgumentError,
  LockIOError,
  LockLostError,
  LockObtainFailedError,
  LocksmithError,
  TableError,
} from '../core/errors.js';
export type { TableDescriptor } from '../rows/table-descriptor.js';
export type { HttpStatus, ServerMetrics } from './http-status.js';
export { LocksmithServer, type ServerOptions } from './server.js';
export type {
  HeldLockStatus,
  LaneStatus,
  ServerStatus,
  SessionStatus,
  TableStatus,
} from './server-status.js';
