import { LockObtainFailedError } from '../core/errors.js';
import { inspectLock } from '../directory/inspect-lock.js';

/**
 * The error of a standalone server whose data directory's `write.lock` another process holds:
 * who holds it (pid and command line, as far as the OS tells), whether that is another
 * `locksmith serve`, and what to do. `cause` is the obtain's own failure.
 */
export function dataDirInUse(dataDir: string, cause: LockObtainFailedError): LockObtainFailedError {
  let who = 'another process';
  try {
    const seen = inspectLock(dataDir, { name: 'write.lock' });
    const holders = seen.state === 'held' ? (seen.holders ?? []) : [];
    const named = holders.flatMap((h) => (h.pid === undefined ? [] : [h]));
    if (named.length > 0) {
      who = named
        .map((h) =>
          h.command !== undefined &&
          /\bserve\b/.test(h.command) &&
          /locksmith|main\.js/.test(h.command)
            ? `another locksmith serve (pid ${h.pid}: ${h.command})`
            : `pid ${h.pid}${h.command === undefined ? '' : ` (${h.command})`}`,
        )
        .join(', ');
    } else if (cause.message.includes('this virtual machine')) {
      who = 'another server in this process';
    }
  } catch {
    // The failure is still worth reporting without the holder.
  }
  return new LockObtainFailedError(
    `Data directory ${dataDir} is in use: its write.lock is held by ${who}. One server per data directory: stop that one, pass another --data, or run both with --ha (master/slave)`,
    { cause },
  );
}
