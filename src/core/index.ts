export { type Clock, FakeClock, systemClock } from './clock.js';
export { checkDuration, MAX_DURATION_MS, parseDuration } from './duration.js';
export {
  AbortedError,
  AlreadyClosedError,
  ConnectionLostError,
  DeadlockError,
  ERROR_CODES,
  errorFromCode,
  FencedError,
  InternalError,
  InvalidArgumentError,
  isErrno,
  isErrorCode,
  LimitExceededError,
  LockIOError,
  type LockLossCode,
  LockLostError,
  LockObtainFailedError,
  LockReleaseFailedError,
  LocksmithError,
  type LocksmithErrorCode,
  LockTimeoutError,
  LockViolationError,
  NotMasterError,
  NotServingRegionError,
  ProtocolError,
  TableError,
  UnauthenticatedError,
  UnknownRowLockError,
  UnsupportedOperationError,
} from './errors.js';
export { FencingGate, nextFencingToken, StaleTokenError } from './fencing.js';
export { type LockHandle, LockHandleBase, type LockSignal } from './lock-handle.js';
export { validateLockName } from './lock-name.js';
export {
  booleanOption,
  describeOptions,
  durationOption,
  type OptionRule,
  type OptionSpec,
  type OptionValues,
  readOptions,
  type SpecOf,
  withAliases,
  withDefault,
} from './option-spec.js';
export {
  checkBoolean,
  checkCallback,
  checkClock,
  checkOptionsObject,
  checkSignal,
  checkToken,
} from './options.js';
export {
  abortableSleep,
  type WaitForOptions,
  type WaitOptions,
  type WakeSource,
  waitFor,
} from './wait.js';
export { withHandle } from './with-lock.js';
