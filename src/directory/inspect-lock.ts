import {
  accessSync,
  closeSync,
  constants,
  lstatSync,
  mkdtempSync,
  openSync,
  realpathSync,
  rmdirSync,
  type Stats,
  statSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { InvalidArgumentError, isErrno, LockIOError } from '../core/errors.js';
import { validateLockName } from '../core/lock-name.js';
import { checkOptionsObject, describeValue } from '../core/options.js';
import { fileLocks } from '../os/file-lock.js';
import { type LockHolder, lockHolders } from '../os/lock-holders.js';
import { WRITE_LOCK_NAME } from './acquire-lock.js';
import { FENCE_SUFFIX, readFenceCounter } from './fence-token-file.js';
import type { LockFactory } from './lock-factory.js';
import { lockPath } from './lock-file.js';
import { NativeFSLockFactory } from './native-fs-lock-factory.js';
import { SimpleFSLockFactory } from './simple-fs-lock-factory.js';

export type { LockHolder };

export interface InspectLockOptions {
  /** The lock's name in the directory (default `write.lock`). */
  name?: string;
  /** `NativeFSLockFactory.INSTANCE` (the default) or `SimpleFSLockFactory.INSTANCE`. */
  lockFactory?: LockFactory;
}

/** Why a lock can be neither held nor taken: what an obtain would fail on, not "held". */
export type CannotLockReason =
  /** The path, or one of its parents, exists and is not a directory. */
  | 'not-a-directory'
  /** The directory cannot be looked at (no search permission, a symlink loop, …). */
  | 'directory-inaccessible'
  /** A file must be created in the directory (or the directory itself created) and cannot. */
  | 'directory-unwritable'
  /** Locks never follow a symbolic link at the lock's name. */
  | 'lock-file-symlink'
  | 'lock-file-directory'
  /** A FIFO, socket or device at the lock's name. */
  | 'lock-file-not-regular'
  /** The native lock file exists but cannot be opened for reading and writing. */
  | 'lock-file-unwritable'
  /** The fencing-token file `<name>.fence` is a symlink: a grant would refuse it. */
  | 'fence-file-symlink'
  | 'fence-file-directory'
  | 'fence-file-not-regular'
  | 'fence-file-unwritable';

interface InspectionBase {
  /** The lock file's path (in the directory's real path once the directory exists). */
  path: string;
  /**
   * The counter stored in the fencing-token file beside the lock: no token issued so far is
   * above it. `undefined` when there is no readable counter.
   */
  fenceCounter: number | undefined;
}

export interface LockFree extends InspectionBase {
  state: 'free';
  /** `no-directory`: an obtain would create the directory; `no-lock-file`: the file. */
  detail: 'no-directory' | 'no-lock-file' | 'unlocked';
}

export interface LockHeld extends InspectionBase {
  state: 'held';
  /**
   * Native: who holds the kernel lock, as far as the OS tells (`[]` when it names nobody,
   * `undefined` where it offers no such information). Simple: always `undefined`.
   */
  holders: LockHolder[] | undefined;
  /**
   * SimpleFS only: the lock file exists, which is all a SimpleFS lock is, so its holder may
   * have died and left it behind (stale). Native locks are freed by the kernel: never stale.
   */
  mayBeStale: boolean;
  /** SimpleFS only: when the lock file was created. */
  since?: Date;
}

export interface LockCannotBeTaken extends InspectionBase {
  state: 'cannot-lock';
  reason: CannotLockReason;
  /** One line naming the path and what is wrong with it. */
  message: string;
  /** The OS error code behind the reason, when there is one (`EACCES`, `EROFS`, …). */
  errno?: string;
}

export type LockInspection = LockFree | LockHeld | LockCannotBeTaken;

/**
 * Tells, without taking it and without creating or modifying anything, what an obtain of the
 * lock `<dir>/<name>` would meet now: `free`, `held` (by whom, where the OS says), or
 * `cannot-lock` with the reason an obtain would fail on other than "held" (the directory is a
 * file, the lock file is a symlink or a directory, the fencing-token file is a symlink, …).
 * The checks follow the factory's own order: the directory, the lock file, "held", and only
 * for a lock that could be granted, the fencing-token file it would write.
 *
 * Synchronous: it makes a few `lstat`/`access` calls and, for a held native lock, reads
 * `/proc` to name the holder. The answer is a snapshot; the state may change right after.
 * Arguments are checked first: an `InvalidArgumentError` for an empty path, a bad lock name
 * or a factory other than the two file-system ones. Unexpected I/O errors are a
 * {@link LockIOError} naming the path.
 */
export function inspectLock(dir: string, options?: InspectLockOptions): LockInspection {
  if (typeof dir !== 'string' || dir.length === 0 || dir.includes('\0')) {
    throw new InvalidArgumentError(
      `Invalid directory path ${describeValue(dir)}: expected a non-empty string without NUL`,
    );
  }
  const opts = checkOptionsObject(options, 'inspectLock options');
  const name = opts.name === undefined ? WRITE_LOCK_NAME : validateLockName(opts.name);
  const factory = opts.lockFactory ?? NativeFSLockFactory.INSTANCE;
  if (factory !== NativeFSLockFactory.INSTANCE && factory !== SimpleFSLockFactory.INSTANCE) {
    throw new InvalidArgumentError(
      `inspectLock option lockFactory must be NativeFSLockFactory.INSTANCE or SimpleFSLockFactory.INSTANCE, got ${describeValue(factory)}`,
    );
  }
  const native = factory === NativeFSLockFactory.INSTANCE;

  const absolute = resolve(dir);
  const dirStat = statOrError(absolute, stat);
  if (dirStat instanceof Error) {
    const path = lockPath(absolute, name);
    if (dirStat.code === 'ENOENT') {
      // The directory given may be a symlink to one (as FSDirectory.open allows), not to nothing.
      if (statOrError(absolute, lstat) instanceof Error) return missingDirectory(absolute, path);
      return cannot(
        path,
        undefined,
        'not-a-directory',
        `${absolute} is a symbolic link to nothing`,
      );
    }
    const [reason, what] =
      dirStat.code === 'ENOTDIR'
        ? (['not-a-directory', 'is not a directory (one of its parents is a file)'] as const)
        : (['directory-inaccessible', 'cannot be accessed'] as const);
    return cannot(path, undefined, reason, `${absolute} ${what}: ${dirStat.code}`, dirStat);
  }
  if (!dirStat.isDirectory()) {
    const path = lockPath(absolute, name);
    return cannot(path, undefined, 'not-a-directory', `${absolute} is a file, not a directory`);
  }
  let real: string;
  try {
    real = realpathSync(absolute);
  } catch (err) {
    throw new LockIOError(`Cannot resolve directory ${absolute}`, { cause: err });
  }
  const path = lockPath(real, name);
  const fenceCounter = readFenceCounter(path);

  const lockStat = statOrError(path, lstat);
  if (lockStat instanceof Error) {
    if (lockStat.code !== 'ENOENT') {
      throw new LockIOError(`Cannot inspect lock file ${path}`, { cause: lockStat });
    }
    // An obtain creates the lock file (and the fence file) in the directory.
    const unwritable = accessError(real, constants.W_OK | constants.X_OK);
    if (unwritable !== undefined) {
      const message = `cannot create ${name} in ${real}: ${unwritable.code}`;
      return cannot(path, fenceCounter, 'directory-unwritable', message, unwritable);
    }
    return fenceProblem(real, path, fenceCounter) ?? free(path, 'no-lock-file', fenceCounter);
  }
  const kind = kindProblem(lockStat);
  if (kind !== undefined) {
    return cannot(path, fenceCounter, `lock-file-${kind}`, `${path} ${KIND_TEXT[kind]}`);
  }
  if (!native) {
    // A SimpleFS lock is the file's existence: held, or left behind by a holder that died.
    return {
      state: 'held',
      path,
      fenceCounter,
      holders: undefined,
      mayBeStale: true,
      since: lockStat.birthtime,
    };
  }
  const unwritable = accessError(path, constants.R_OK | constants.W_OK);
  if (unwritable !== undefined) {
    const message = `lock file ${path} cannot be opened for writing: ${unwritable.code}`;
    return cannot(path, fenceCounter, 'lock-file-unwritable', message, unwritable);
  }
  if (isLockedElsewhere(path)) {
    let holders: LockHolder[] | undefined;
    try {
      holders = lockHolders(path);
    } catch {
      holders = undefined; // Gone or replaced meanwhile: still held a moment ago.
    }
    return { state: 'held', path, fenceCounter, holders, mayBeStale: false };
  }
  return fenceProblem(real, path, fenceCounter) ?? free(path, 'unlocked', fenceCounter);
}

/** An obtain would create the directory (`mkdir -p`): can it? */
function missingDirectory(absolute: string, path: string): LockInspection {
  let ancestor = dirname(absolute);
  for (;;) {
    const st = statOrError(ancestor, stat);
    if (!(st instanceof Error)) {
      if (!st.isDirectory()) {
        const message = `${absolute} cannot be created: ${ancestor} is a file, not a directory`;
        return cannot(path, undefined, 'not-a-directory', message);
      }
      const unwritable =
        accessError(ancestor, constants.W_OK | constants.X_OK) ?? mkdirError(ancestor);
      if (unwritable !== undefined) {
        const message = `${absolute} cannot be created in ${ancestor}: ${unwritable.code}`;
        return cannot(path, undefined, 'directory-unwritable', message, unwritable);
      }
      return free(path, 'no-directory', undefined);
    }
    if (st.code === 'ENOTDIR') {
      return cannot(
        path,
        undefined,
        'not-a-directory',
        `${absolute} is not a directory (one of its parents is a file)`,
        st,
      );
    }
    if (st.code !== 'ENOENT' || dirname(ancestor) === ancestor) {
      const message = `${ancestor} cannot be accessed: ${st.code}`;
      return cannot(path, undefined, 'directory-inaccessible', message, st);
    }
    ancestor = dirname(ancestor);
  }
}

/**
 * Whether a directory can be made in `parent`. `access` cannot tell a file system that refuses
 * new directories to anyone, root included (`/proc`: ENOENT, `/sys`: EPERM); only mkdir
 * tells. So a directory with a unique name is made and removed at once: nothing stays, and
 * the inspected directory itself is never created.
 */
function mkdirError(parent: string): NodeJS.ErrnoException | undefined {
  try {
    rmdirSync(mkdtempSync(join(parent, '.locksmith-inspect-probe-')));
    return undefined;
  } catch (err) {
    if (isErrno(err)) return err;
    throw err;
  }
}

/**
 * What would make the grant's fencing-token write fail: the fence file must be a regular
 * file (opened with O_NOFOLLOW) we can read and write, or creatable in the directory.
 */
function fenceProblem(
  dir: string,
  path: string,
  fenceCounter: number | undefined,
): LockCannotBeTaken | undefined {
  const fencePath = path + FENCE_SUFFIX;
  const st = statOrError(fencePath, lstat);
  if (st instanceof Error && st.code !== 'ENOENT') {
    throw new LockIOError(`Cannot inspect the fencing-token file ${fencePath}`, { cause: st });
  }
  const kind = st instanceof Error ? undefined : kindProblem(st);
  if (kind !== undefined) {
    const message = `the fencing-token file ${fencePath} ${KIND_TEXT[kind]}`;
    return cannot(path, fenceCounter, `fence-file-${kind}`, message);
  }
  // Missing: it is created in the directory; present: it is opened for reading and writing.
  const unwritable =
    st instanceof Error
      ? accessError(dir, constants.W_OK | constants.X_OK)
      : accessError(fencePath, constants.R_OK | constants.W_OK);
  if (unwritable === undefined) return undefined;
  const message = `the fencing-token file ${fencePath} cannot be ${st instanceof Error ? 'created' : 'opened for writing'}: ${unwritable.code}`;
  return cannot(path, fenceCounter, 'fence-file-unwritable', message, unwritable);
}

/** What kind of entry a grant cannot open as its lock or fence file, if this is one. */
function kindProblem(st: Stats): 'symlink' | 'directory' | 'not-regular' | undefined {
  if (st.isSymbolicLink()) return 'symlink';
  if (st.isDirectory()) return 'directory';
  return st.isFile() ? undefined : 'not-regular';
}

const KIND_TEXT = {
  symlink: 'is a symbolic link, which locks never follow; remove it',
  directory: 'is a directory, not a file; remove it',
  'not-regular': 'is not a regular file (a FIFO, socket or device); remove it',
} as const;

/** A read-only probe; O_NONBLOCK so that a FIFO swapped in meanwhile cannot block the open. */
const PROBE_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

function isLockedElsewhere(path: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, PROBE_FLAGS);
  } catch (err) {
    throw new LockIOError(`Cannot open lock file ${path} to inspect it`, { cause: err });
  }
  try {
    return fileLocks().isLockedElsewhere(fd, path);
  } finally {
    closeSync(fd);
  }
}

const stat = (path: string): Stats => statSync(path);
const lstat = (path: string): Stats => lstatSync(path);

/** `how(path)`, or the OS error it failed with. */
function statOrError(path: string, how: (path: string) => Stats): Stats | NodeJS.ErrnoException {
  try {
    return how(path);
  } catch (err) {
    if (isErrno(err)) return err;
    throw err;
  }
}

function accessError(path: string, mode: number): NodeJS.ErrnoException | undefined {
  try {
    accessSync(path, mode);
    return undefined;
  } catch (err) {
    if (isErrno(err)) return err;
    throw err;
  }
}

function free(
  path: string,
  detail: LockFree['detail'],
  fenceCounter: number | undefined,
): LockFree {
  return { state: 'free', path, fenceCounter, detail };
}

function cannot(
  path: string,
  fenceCounter: number | undefined,
  reason: CannotLockReason,
  message: string,
  err?: NodeJS.ErrnoException,
): LockCannotBeTaken {
  const result: LockCannotBeTaken = { state: 'cannot-lock', path, fenceCounter, reason, message };
  if (err?.code !== undefined) result.errno = err.code;
  return result;
}
