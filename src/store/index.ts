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
  DEFAULT_LOCK_ACQUIRE_SLEEP_INTERVAL,
  type Locker,
  type LockerOptions,
  type LockerStartOptions,
} from './locker.js';
export { consoleLogger, type StoreLogger, silentLogger } from './logger.js';
export type { Service, ServiceContext } from './service.js';
export {
  DEFAULT_SHARED_FILE_KEEP_ALIVE_PERIOD,
  LOCK_FILE_NAME,
  SharedFileLocker,
  type SharedFileLockerOptions,
} from './shared-file-locker.js';
export {
  Supervisor,
  type SupervisorEvent,
  type SupervisorEvents,
  type SupervisorOptions,
  type SupervisorState,
} from './supervisor.js';
