import { closeSync, constants, openSync } from 'node:fs';
import { UnsupportedOperationError } from '../core/errors.js';
import type { FileLockApi, FileLockMode } from './file-lock.js';
import { libc, systemError } from './libc.js';

const F_OFD_GETLK = 36;
const F_OFD_SETLK = 37;
const F_RDLCK = 0;
const F_WRLCK = 1;
const F_UNLCK = 2;
const EAGAIN = 11;
const EACCES = 13;
const EINTR = 4;

/**
 * `struct flock` on 64-bit Linux (x86_64, aarch64, riscv64, …): l_type i16 @0, l_whence i16 @2,
 * l_start i64 @8, l_len i64 @16, l_pid i32 @24; 32 bytes. l_start = l_len = 0 is the whole
 * file, which is what Java's `FileChannel.tryLock()` takes, so the two conflict.
 */
const FLOCK_SIZE = 32;

export function linuxOfdLock(): FileLockApi {
  if (
    process.arch !== 'x64' &&
    process.arch !== 'arm64' &&
    process.arch !== 'riscv64' &&
    process.arch !== 'loong64' &&
    process.arch !== 'ppc64' &&
    process.arch !== 's390x'
  ) {
    throw new UnsupportedOperationError(
      `OFD locks are only wired for 64-bit Linux, not ${process.arch}`,
    );
  }
  const c = libc();
  // fcntl is variadic; declaring the pointer argument directly is ABI-compatible on the 64-bit
  // Linux targets above (the variadic argument travels in the same register) and much faster
  // than koffi's variadic call path. The struct is a reused Buffer, not a marshalled object.
  const fcntl = c.lib.func('int fcntl(int fd, int cmd, void *arg)') as (
    fd: number,
    cmd: number,
    arg: Buffer,
  ) => number;
  const buf = Buffer.alloc(FLOCK_SIZE);

  const setlk = (fd: number, type: number, path: string, syscall: string): boolean => {
    buf.fill(0);
    buf.writeInt16LE(type, 0);
    for (;;) {
      if (fcntl(fd, F_OFD_SETLK, buf) === 0) return true;
      const errno = c.errno();
      if (errno === EINTR) continue;
      if (errno === EAGAIN || errno === EACCES) return false;
      throw systemError(syscall, errno, path);
    }
  };

  /**
   * Whether another description holds a lock that a lock of `type` would conflict with. GETLK
   * does not check the descriptor's access mode, so a read-only `fd` can probe with F_WRLCK
   * (finds any lock) as well as with F_RDLCK (finds only write locks).
   */
  const probe = (fd: number, path: string, type: number): boolean => {
    buf.fill(0);
    buf.writeInt16LE(type, 0);
    if (fcntl(fd, F_OFD_GETLK, buf) !== 0) throw systemError('fcntl(F_OFD_GETLK)', c.errno(), path);
    return buf.readInt16LE(0) !== F_UNLCK;
  };
  const typeOf = (mode: FileLockMode | undefined): number =>
    mode === 'shared' ? F_RDLCK : F_WRLCK;

  return {
    mechanism: 'ofd',
    tryLock: (fd, path, mode) => setlk(fd, typeOf(mode), path, 'fcntl(F_OFD_SETLK)'),
    unlock: (fd, path) => {
      setlk(fd, F_UNLCK, path, 'fcntl(F_OFD_SETLK, F_UNLCK)');
    },
    isLockedElsewhere: (fd, path, mode) => probe(fd, path, typeOf(mode)),
    isLocked: (fd) => {
      // /proc/self/fd/N reopens the very inode behind fd, deleted or not, as a new description.
      const path = `/proc/self/fd/${fd}`;
      const other = openSync(path, constants.O_RDONLY);
      try {
        return probe(other, path, F_WRLCK);
      } finally {
        closeSync(other);
      }
    },
  };
}
