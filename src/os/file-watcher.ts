import { Worker } from 'node:worker_threads';
import type { WakeSource } from '../core/wait.js';
import type { WatcherData, WatcherMessage } from './file-watcher-worker.js';
import { libc } from './libc.js';

const IN_ATTRIB = 0x4;
const IN_CLOSE_WRITE = 0x8;
const IN_DELETE_SELF = 0x400;
const IN_MOVE_SELF = 0x800;
const IN_CLOEXEC = 0o2000000;
const IN_DONT_FOLLOW = 0x2000000;
const IN_MASK_ADD = 0x20000000;

/**
 * Events that can mean "the lock on this file may be free now": a descriptor opened for
 * writing was closed (a holder released, or died: the kernel closes its descriptors), the file
 * was deleted or moved away (a SimpleFS release), or its metadata changed. Closes of read-only
 * descriptors are deliberately not watched: waiters probe with read-only descriptors, so their
 * probes never wake each other.
 */
const MASK = IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ATTRIB;

/**
 * Events that can mean "this path may no longer name the file it named": the file's link
 * count changed (IN_ATTRIB: deleted, or another file renamed over it while we keep its inode
 * open), it was deleted for good or moved away. For a directory, only the directory itself
 * being deleted or moved: events of the files inside (an index writing its segments) would
 * only be noise.
 */
const REPLACED_MASK = {
  file: IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_DONT_FOLLOW,
  directory: IN_DELETE_SELF | IN_MOVE_SELF,
} as const;

/** How long the watcher thread lingers with no watches before it is stopped. */
const IDLE_STOP_MS = 2000;

/**
 * The watcher thread (file-watcher-worker.ts): a blocking `read(2)` of the inotify descriptor,
 * without koffi; each batch of events becomes one message of watch descriptors. To stop it the
 * main thread sets the flag and removes a sentinel watch, whose IN_IGNORED event ends the read.
 */
const WORKER_URL = new URL('./file-watcher-worker.js', import.meta.url);

/**
 * Wake hints for a file, from the kernel. On Linux this is inotify, read by one background
 * thread per process (started on first use, stopped when idle). Elsewhere it returns a source
 * that never fires and callers fall back to polling. Hints can be spurious and, on network
 * file systems, missing: they shorten waits but never replace re-checking the lock itself.
 */
export function fileWakeSource(path: string): WakeSource {
  return (wake) => {
    const hub = process.platform === 'linux' ? inotifyHub() : undefined;
    return hub?.watch(path, wake, MASK) ?? noop;
  };
}

/**
 * Calls `listener` when `path` (a `file` or a `directory`) may have been deleted, moved or
 * replaced: a hint, from the same inotify thread as {@link fileWakeSource}. Returns the
 * unsubscribe, and `live: false` when no kernel events are available (not Linux, watch limit
 * reached, path already gone): the caller must poll. Once the kernel drops the watch (the
 * inode is gone) no further hints arrive; the caller re-checks on the one it got.
 */
export function watchReplacement(
  path: string,
  what: 'file' | 'directory',
  listener: () => void,
): { stop: () => void; live: boolean } {
  let stop: (() => void) | undefined;
  try {
    const hub = process.platform === 'linux' ? inotifyHub() : undefined;
    stop = hub?.watch(path, listener, REPLACED_MASK[what]);
  } catch {
    // No thread could be started (resource limits): hints are off, the caller polls.
  }
  return stop === undefined ? { stop: noop, live: false } : { stop, live: true };
}

const noop = () => {};

let hub: InotifyHub | undefined | null;

function inotifyHub(): InotifyHub | undefined {
  if (hub === undefined) {
    try {
      hub = new InotifyHub();
    } catch {
      hub = null;
    }
  }
  return hub ?? undefined;
}

type AddWatch = (fd: number, path: string, mask: number) => number;
type RmWatch = (fd: number, wd: number) => number;

class InotifyHub {
  readonly #addWatch: AddWatch;
  readonly #rmWatch: RmWatch;
  readonly #fd: number;
  readonly #listeners = new Map<number, Set<() => void>>();
  /** Set when the watcher thread failed: hints stay off and waiters rely on polling. */
  #broken = false;
  #worker: { thread: Worker; stop: Int32Array; sentinel: number } | undefined;
  #idleTimer: NodeJS.Timeout | undefined;

  constructor() {
    const c = libc();
    const init = c.lib.func('int inotify_init1(int flags)') as (flags: number) => number;
    this.#addWatch = c.lib.func(
      'int inotify_add_watch(int fd, const char *path, uint32_t mask)',
    ) as AddWatch;
    this.#rmWatch = c.lib.func('int inotify_rm_watch(int fd, int wd)') as RmWatch;
    // Blocking on purpose: only the watcher thread reads it, and it is meant to block there.
    this.#fd = init(IN_CLOEXEC);
    if (this.#fd < 0) throw new Error(`inotify_init1 failed: errno ${c.errno()}`);
    // A worker blocked in read() would hold up process exit forever: wake it first.
    process.once('exit', () => this.#stopWorker());
  }

  /**
   * Watches `path` for `mask`; `undefined` when it cannot. Masks add up (IN_MASK_ADD): the
   * kernel keeps one watch per inode, so a waiter's and a holder's watches of one lock file
   * share it, and each listener may get the other's events (hints are re-checked anyway).
   */
  watch(path: string, listener: () => void, mask: number): (() => void) | undefined {
    if (this.#broken) return undefined;
    const wd = this.#addWatch(this.#fd, path, mask | IN_MASK_ADD);
    if (wd < 0) return undefined;
    let set = this.#listeners.get(wd);
    if (set === undefined) {
      set = new Set();
      this.#listeners.set(wd, set);
    }
    set.add(listener);
    try {
      this.#ensureWorker();
    } catch {
      // No thread (resource limits): events stay unread and callers rely on polling.
      this.#broken = true;
    }
    let active = true;
    return () => {
      if (!active) return;
      active = false;
      const current = this.#listeners.get(wd);
      if (current === undefined || !current.delete(listener) || current.size > 0) return;
      this.#listeners.delete(wd);
      this.#rmWatch(this.#fd, wd);
      if (this.#listeners.size === 0) this.#scheduleIdleStop();
    };
  }

  #dispatch(message: WatcherMessage): void {
    for (const wd of message.wds) {
      const set = this.#listeners.get(wd);
      if (set === undefined) continue;
      for (const listener of [...set]) listener();
    }
    // The kernel dropped these watches (file deleted); their listeners fall back to polling.
    for (const wd of message.gone) this.#listeners.delete(wd);
  }

  #ensureWorker(): void {
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    if (this.#worker !== undefined) return;
    // The root directory never goes away; removing this watch is how the thread is woken.
    const sentinel = this.#addWatch(this.#fd, '/', IN_DELETE_SELF);
    if (sentinel < 0) {
      this.#broken = true;
      return;
    }
    const control = new SharedArrayBuffer(4);
    const thread = new Worker(WORKER_URL, {
      workerData: { fd: this.#fd, control } satisfies WatcherData,
      stdout: false,
      stderr: false,
    });
    thread.on('message', (m: WatcherMessage) => this.#dispatch(m));
    thread.on('error', () => {
      this.#broken = true;
      if (this.#worker?.thread === thread) this.#worker = undefined;
    });
    thread.on('exit', () => {
      if (this.#worker?.thread === thread) this.#worker = undefined;
    });
    // After the listeners: attaching a 'message' listener refs the worker again.
    thread.unref();
    this.#worker = { thread, stop: new Int32Array(control), sentinel };
  }

  #scheduleIdleStop(): void {
    clearTimeout(this.#idleTimer);
    this.#idleTimer = setTimeout(() => {
      if (this.#listeners.size === 0) this.#stopWorker();
    }, IDLE_STOP_MS);
    this.#idleTimer.unref();
  }

  #stopWorker(): void {
    const worker = this.#worker;
    if (worker === undefined) return;
    this.#worker = undefined;
    Atomics.store(worker.stop, 0, 1);
    this.#rmWatch(this.#fd, worker.sentinel);
  }
}
