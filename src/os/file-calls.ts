import { closeSync, fstatSync, lstatSync, openSync, readSync, type Stats } from 'node:fs';
import { endianness } from 'node:os';
import { libc, systemError } from './libc.js';

/** The fields of a file's status that the lock code's validity checks read. */
export interface FileStatus {
  dev: number;
  ino: number;
  nlink: number;
  size: number;
  /** A regular file (`S_ISREG`). */
  isFile: boolean;
  /** A symbolic link (`S_ISLNK`); only {@link FileCalls.lstat} can report one. */
  isSymbolicLink: boolean;
  /**
   * The status-change time (ctime), whole seconds and nanoseconds. Compared for equality only:
   * through Node's `fs` (the fallback) the nanoseconds are derived from `ctimeMs`, so the two
   * paths' numbers are not interchangeable, but each is stable for an unchanged file.
   */
  ctimeSec: number;
  ctimeNsec: number;
  /** Exactly Node's `Stats.birthtimeMs` for the same file (libuv's `statx` btime, else 0). */
  birthtimeMs: number;
}

/**
 * The synchronous file calls on the lock's hot path (obtain + release): open, pread, fstat,
 * close. On 64-bit Linux they go straight to libc through koffi, which skips the ~0.35 µs of
 * argument validation `fs.*Sync` adds per call; elsewhere they are Node's `fs`. Both behave
 * like `fs`: the descriptor is an ordinary one (`O_CLOEXEC`, usable by `fs` and by child
 * processes), failures throw Node-style errors whose `code` is the errno name (`ENOENT`, …),
 * and the status numbers equal what `fs.fstatSync` reports, so identities taken through either
 * compare equal.
 */
export interface FileCalls {
  /** `open(2)` with `flags` (plus `O_CLOEXEC`, as libuv adds) and `mode` if it creates. */
  open(path: string, flags: number, mode: number): number;
  /** `pread(2)` of up to `length` bytes at `position` into the start of `buf`. */
  pread(fd: number, buf: Buffer, length: number, position: number): number;
  fstat(fd: number): FileStatus;
  /** `lstat(2)` of `path`: a symbolic link is reported as one, never followed. */
  lstat(path: string): FileStatus;
  /** `close(2)`; EINTR counts as closed (Linux frees the descriptor anyway), as in libuv. */
  close(fd: number): void;
}

let selected: FileCalls | undefined;

/** The file calls of this platform, chosen (and koffi loaded) on first use. */
export function fileCalls(): FileCalls {
  if (selected !== undefined) return selected;
  selected = LINUX_64 ? (tryLinuxCalls() ?? nodeCalls) : nodeCalls;
  return selected;
}

function statusOf(st: Stats): FileStatus {
  const ctimeSec = Math.floor(st.ctimeMs / 1000);
  return {
    dev: st.dev,
    ino: st.ino,
    nlink: st.nlink,
    size: st.size,
    isFile: st.isFile(),
    isSymbolicLink: st.isSymbolicLink(),
    ctimeSec,
    ctimeNsec: Math.round((st.ctimeMs - ctimeSec * 1000) * 1e6),
    birthtimeMs: st.birthtimeMs,
  };
}

/** Node's `fs`: the fallback, and the path for macOS/BSD. */
const nodeCalls: FileCalls = {
  open: (path, flags, mode) => openSync(path, flags, mode),
  pread: (fd, buf, length, position) => readSync(fd, buf, 0, length, position),
  fstat: (fd) => statusOf(fstatSync(fd)),
  lstat: (path) => statusOf(lstatSync(path)),
  close: (fd) => closeSync(fd),
};

/** The struct layouts and flag values below are the generic little-endian 64-bit Linux ABI. */
export const LINUX_64 =
  process.platform === 'linux' &&
  endianness() === 'LE' &&
  (process.arch === 'x64' ||
    process.arch === 'arm64' ||
    process.arch === 'riscv64' ||
    process.arch === 'loong64' ||
    process.arch === 'ppc64' ||
    process.arch === 's390x');

const O_CLOEXEC = 0o2000000;
const AT_EMPTY_PATH = 0x1000;
const AT_SYMLINK_NOFOLLOW = 0x100;
const AT_FDCWD = -100;
/** `STATX_BASIC_STATS | STATX_BTIME`: the mask libuv asks for, so the numbers are Node's. */
const STATX_MASK = 0xfff;
const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;
const EINTR = 4;
/** libuv gives up on statx for good after these and falls back to fstat (see `uv__fs_statx`). */
const STATX_UNUSABLE = new Set([
  1 /* EPERM */, 22 /* EINVAL */, 38 /* ENOSYS */, 95 /* EOPNOTSUPP */,
]);

/**
 * `struct statx` offsets: stx_nlink u32 @16, stx_mode u16 @28, stx_ino u64 @32, stx_size u64
 * @40, stx_btime {i64 sec @80, u32 nsec @88}, stx_ctime {i64 sec @96, u32 nsec @104},
 * stx_dev_major u32 @136, stx_dev_minor u32 @140; 256 bytes.
 */
const STATX_SIZE = 256;

function tryLinuxCalls(): FileCalls | undefined {
  let c: ReturnType<typeof libc>;
  let open: (path: string, flags: number, mode: number) => number;
  let close: (fd: number) => number;
  let pread: (fd: number, buf: Buffer, n: number, off: number) => number;
  let statx: (dirfd: number, path: string, flags: number, mask: number, buf: Buffer) => number;
  try {
    c = libc();
    // open is variadic; like fcntl in linux-ofd-lock.ts, the mode is declared as a fixed third
    // argument, which travels in the same register on these 64-bit targets and avoids koffi's
    // slow variadic path.
    open = c.lib.func('int open(const char *path, int flags, uint32_t mode)') as typeof open;
    close = c.lib.func('int close(int fd)') as typeof close;
    pread = c.lib.func('intptr_t pread(int fd, void *buf, size_t n, int64_t off)') as typeof pread;
    // glibc ≥ 2.28 / musl ≥ 1.2.5; without it every call stays on Node's fs.
    statx = c.lib.func(
      'int statx(int dirfd, const char *path, int flags, uint32_t mask, void *buf)',
    ) as typeof statx;
  } catch {
    return undefined;
  }
  const sx = Buffer.alloc(STATX_SIZE);
  let useStatx = true;

  return {
    open: (path, flags, mode) => {
      // A NUL would silently cut the C string short; Node's open rejects such a path itself.
      if (path.includes('\0')) return openSync(path, flags, mode);
      for (;;) {
        const fd = open(path, flags | O_CLOEXEC, mode);
        if (fd >= 0) return fd;
        const errno = c.errno();
        if (errno !== EINTR) throw systemError('open', errno, path);
      }
    },
    pread: (fd, buf, length, position) => {
      if (length > buf.length) throw new RangeError(`pread length ${length} > ${buf.length}`);
      for (;;) {
        const n = pread(fd, buf, length, position);
        if (n >= 0) return n;
        const errno = c.errno();
        if (errno !== EINTR) throw systemError('read', errno);
      }
    },
    fstat: (fd) => {
      if (!useStatx) return nodeCalls.fstat(fd);
      if (statx(fd, '', AT_EMPTY_PATH, STATX_MASK, sx) !== 0) {
        const errno = c.errno();
        if (!STATX_UNUSABLE.has(errno)) throw systemError('fstat', errno);
        // Where libuv would fall back to fstat (btime = ctime), let Node do the same.
        useStatx = false;
        return nodeCalls.fstat(fd);
      }
      return decodeStatx(sx);
    },
    lstat: (path) => {
      if (!useStatx || path.includes('\0')) return nodeCalls.lstat(path);
      for (;;) {
        if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_MASK, sx) === 0)
          return decodeStatx(sx);
        const errno = c.errno();
        if (errno === EINTR) continue;
        if (!STATX_UNUSABLE.has(errno)) throw systemError('lstat', errno, path);
        useStatx = false;
        return nodeCalls.lstat(path);
      }
    },
    close: (fd) => {
      if (close(fd) === 0) return;
      const errno = c.errno();
      if (errno !== EINTR) throw systemError('close', errno);
    },
  };
}

function decodeStatx(sx: Buffer): FileStatus {
  const major = sx.readUInt32LE(136);
  const minor = sx.readUInt32LE(140);
  const mode = sx.readUInt16LE(28) & S_IFMT;
  return {
    // glibc's makedev, as libuv builds st_dev, in exact double arithmetic.
    dev:
      (major & 0xfff) * 0x100 +
      Math.floor(major / 0x1000) * 2 ** 44 +
      (minor & 0xff) +
      Math.floor(minor / 0x100) * 0x100000,
    ino: sx.readUInt32LE(32) + sx.readUInt32LE(36) * 2 ** 32,
    nlink: sx.readUInt32LE(16),
    size: sx.readUInt32LE(40) + sx.readUInt32LE(44) * 2 ** 32,
    isFile: mode === S_IFREG,
    isSymbolicLink: mode === S_IFLNK,
    ctimeSec: sx.readInt32LE(100) * 2 ** 32 + sx.readUInt32LE(96),
    ctimeNsec: sx.readUInt32LE(104),
    // Node's msFromTimeSpec: sec * 1e3 + nsec / 1e6.
    birthtimeMs:
      (sx.readInt32LE(84) * 2 ** 32 + sx.readUInt32LE(80)) * 1e3 + sx.readUInt32LE(88) / 1e6,
  };
}
