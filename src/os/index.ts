export { type FileLockApi, fileLocks } from './file-lock.js';
export { fileWakeSource } from './file-watcher.js';
export { type LockHolder, lockHolders } from './lock-holders.js';
export {
  type ParentDeathSpawnOptions,
  parentDeathSupported,
  spawnWithParentDeath,
} from './parent-death.js';
