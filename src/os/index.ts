export { type FileLockApi, fileLocks } from './file-lock.js';
export { fileWakeSource } from './file-watcher.js';
export { type LockHolder, lockHolders } from './lock-holders.js';
