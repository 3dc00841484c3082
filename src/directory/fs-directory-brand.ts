/**
 * Which objects are file-system directories. `FSDirectory` marks each instance as it is made;
 * `FSLockFactory` asks here rather than `instanceof FSDirectory`, so that the lock factories
 * need not load the directory class whose default factory they are (a load-order cycle).
 */
const fsDirectories = new WeakSet<object>();

export function markFSDirectory(directory: object): void {
  fsDirectories.add(directory);
}

export function isFSDirectory(value: unknown): boolean {
  return typeof value === 'object' && value !== null && fsDirectories.has(value);
}
