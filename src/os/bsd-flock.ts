import type { FileLockApi } from './file-lock.js';
import { libc, systemError } from './libc.js';

const LOCK_EX = 2;
const LOCK_NB = 4;
const LOCK_UN = 8;
const LOCK_SH = 1;
const EWOULDBLOCK = 35; // macOS and FreeBSD
const EINTR = 4;

/**
 * `flock(2)` for macOS and the BSDs: per open file description like Linux OFD locks, but it
 * does not conflict with POSIX `fcntl` locks (so not with Java's). Exclusive is `LOCK_EX`,
 * shared `LOCK_SH`. Not exercised by CI, which runs on Linux.
 */
export function bsdFlock(): FileLockApi {
  const c = libc();
  const flock = c.lib.func('int flock(int fd, int op)') as (fd: number, op: number) => number;
  const call = (fd: number, op: number, path: string): boolean => {
    for (;;) {
      if (flock(fd, op) === 0) return true;
      const errno = c.errno();
      if (errno === EINTR) continue;
      if (errno === EWOULDBLOCK) return false;
      throw systemError('flock', errno, path);
    }
  };
  return {
    mechanism: 'flock',
    tryLock: (fd, path, mode) => call(fd, (mode === 'shared' ? LOCK_SH : LOCK_EX) | LOCK_NB, path),
    unlock: (fd, path) => {
      call(fd, LOCK_UN, path);
    },
    isLockedElsewhere: (fd, path, mode) => {
      // flock has no query: take a lock of that mode and give it back.
      if (!call(fd, (mode === 'shared' ? LOCK_SH : LOCK_EX) | LOCK_NB, path)) return true;
      call(fd, LOCK_UN, path);
      return false;
    },
    // flock cannot ask about a descriptor's own lock without changing it.
    isLocked: () => undefined,
  };
}
