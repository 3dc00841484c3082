// The error classes this subpath's functions throw, re-exported so callers can catch by class
// without a second import from 'locksmith-locks' (they are the same objects as core's).
export {
  AbortedError,
  AlreadyClosedError,
  InvalidArgumentError,
  LockIOError,
  LockLostError,
  LockObtainFailedError,
  LockReleaseFailedError,
  LocksmithError,
  LockTimeoutError,
  LockViolationError,
  ProtocolError,
  UnsupportedOperationError,
} from '../core/errors.js';
export { type AcquireLockOptions, acquireLock, WRITE_LOCK_NAME } from './acquire-lock.js';
export { ByteBuffersDirectory } from './byte-buffers-directory.js';
export { ByteChannel, EndOfStreamError } from './byte-channel.js';
export { Directory, type ObtainOptions } from './directory.js';
export { FACTORY_NAMES, lockFactoryByName } from './factory-by-name.js';
export { FENCE_SUFFIX } from './fence-token-file.js';
export { FilterDirectory } from './filter-directory.js';
export { FSDirectory } from './fs-directory.js';
export { FSLockFactory } from './fs-lock-factory.js';
export {
  type CannotLockReason,
  type InspectLockOptions,
  inspectLock,
  type LockCannotBeTaken,
  type LockFree,
  type LockHeld,
  type LockHolder,
  type LockInspection,
} from './inspect-lock.js';
export type { Lock } from './lock.js';
export { LockFactory } from './lock-factory.js';
export {
  type LockStressTestOptions,
  type LockStressTestResult,
  runLockStressTest,
  STRESS_LOCK_NAME,
} from './lock-stress-test.js';
export { LockValidatingDirectoryWrapper } from './lock-validating-directory-wrapper.js';
export {
  type LockVerifyResult,
  LockVerifyServer,
  type LockVerifyServerOptions,
  START_GUN_SIGNAL,
} from './lock-verify-server.js';
export { NativeFSLockFactory, nativeLockDescriptor } from './native-fs-lock-factory.js';
export { NoLockFactory } from './no-lock-factory.js';
export { SimpleFSLockFactory } from './simple-fs-lock-factory.js';
export { SingleInstanceLockFactory } from './single-instance-lock-factory.js';
export { SleepingLockWrapper } from './sleeping-lock-wrapper.js';
export { VerifyingLockFactory } from './verifying-lock-factory.js';
export { withLock } from './with-lock.js';
