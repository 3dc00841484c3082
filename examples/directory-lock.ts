// The README's example: `npx tsx examples/directory-lock.ts` from the clone, after `npm install`
// (which builds `dist/`: `locksmith/directory` resolves to it through package.json "exports").
import { writeFile } from 'node:fs/promises';
import { acquireLock, FSDirectory } from 'locksmith-locks/directory';

const dir = await FSDirectory.open('./index'); // NativeFSLockFactory by default
const lock = await dir.obtainLock('write.lock'); // throws LockObtainFailedError if held
try {
  lock.ensureValid(); // throws if the lock is no longer ours
  await writeFile(`${dir.path}/data.txt`, `written under fencing token ${lock.token}\n`, {
    signal: lock.signal, // aborts if the lock is lost
  });
} finally {
  await lock.close(); // or `await using lock = ...` (TS 5.2+)
}

// Waiting: wakes the moment the holder releases or dies; timeout and AbortSignal.
const waited = await acquireLock(dir, { timeoutMs: 30_000, signal: AbortSignal.timeout(60_000) });
console.log(`waited and got ${waited.resource} with token ${waited.token}`);
await waited.close();
