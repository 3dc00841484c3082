import { closeSync, writeSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import type { WakeSource } from '../core/wait.js';
import { libc } from './libc.js';

const IN_ATTRIB = 0x4;
const IN_CLOSE_WRITE = 0x8;
const IN_DELETE_SELF = 0x400;
const IN_MOVE_SELF = 0x800;
const IN_NONBLOCK = 0o4000;
const IN_CLOEXEC = 0o2000000;
const O_NONBLOCK = 0o4000;
const O_CLOEXEC = 0o2000000;

/**
 * Events that can mean "the lock on this file may be free now": a descriptor opened for
 * writing was closed (a holder released, or died: the kernel closes its descriptors), the file
 * was deleted or moved away (a SimpleFS release), or its metadata changed. Closes of read-only
 * descriptors are deliberately not watched: waiters probe with read-only descriptors, so their
 * probes never wake each other.
 */
const MASK = IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ATTRIB;

/** How long the watcher thread lingers with no watches before it is stopped. */
const IDLE_STOP_MS = 2000;

/**
 * Wake hints for a file, from the kernel. On Linux this is inotify, read by one background
 * thread per process (started on first use, stopped when idle). Elsewhere it returns a source
 * that never fires and callers fall back to polling. Hints can be spurious and, on network
 * file systems, missing: they shorten waits but never replace re-checking the lock itself.
 */
export function fileWakeSource(path: string): WakeSource {
  return (wake) => {
    const hub = process.platform === 'linux' ? inotifyHub() : undefined;
    return hub?.watch(path, wake) ?? noop;
  };
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
  readonly #controlRead: number;
  readonly #controlWrite: number;
  readonly #listeners = new Map<number, Set<() => void>>();
  readonly #libcName: string;
  /** Set when the watcher thread failed: hints stay off and waiters rely on polling. */
  #broken = false;
  #worker: { thread: Worker; stop: Int32Array } | undefined;
  #idleTimer: NodeJS.Timeout | undefined;

  constructor() {
    const c = libc();
    this.#libcName = c.name;
    const init = c.lib.func('int inotify_init1(int flags)') as (flags: number) => number;
    this.#addWatch = c.lib.func(
      'int inotify_add_watch(int fd, const char *path, uint32_t mask)',
    ) as AddWatch;
    this.#rmWatch = c.lib.func('int inotify_rm_watch(int fd, int wd)') as RmWatch;
    const pipe2 = c.lib.func('int pipe2(void *fds, int flags)') as (
      fds: Buffer,
      flags: number,
    ) => number;
    this.#fd = init(IN_NONBLOCK | IN_CLOEXEC);
    if (this.#fd < 0) throw new Error(`inotify_init1 failed: errno ${c.errno()}`);
    const pair = Buffer.alloc(8);
    if (pipe2(pair, O_NONBLOCK | O_CLOEXEC) !== 0) {
      closeSync(this.#fd);
      throw new Error(`pipe2 failed: errno ${c.errno()}`);
    }
    this.#controlRead = pair.readInt32LE(0);
    this.#controlWrite = pair.readInt32LE(4);
    // A worker blocked in poll() would hold up process exit until its poll timeout: tell it.
    process.once('exit', () => this.#stopWorker());
  }

  watch(path: string, listener: () => void): () => void {
    if (this.#broken) return noop;
    const wd = this.#addWatch(this.#fd, path, MASK);
    if (wd < 0) return noop;
    let set = this.#listeners.get(wd);
    if (set === undefined) {
      set = new Set();
      this.#listeners.set(wd, set);
    }
    set.add(listener);
    this.#ensureWorker();
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

  #dispatch(message: { wds: number[]; gone: number[] }): void {
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
    const control = new SharedArrayBuffer(4);
    const thread = new Worker(new URL('./inotify-worker.js', import.meta.url), {
      workerData: {
        libcName: this.#libcName,
        inotifyFd: this.#fd,
        controlFd: this.#controlRead,
        control,
      },
      stdout: false,
      stderr: false,
    });
    thread.on('message', (m: { wds: number[]; gone: number[] }) => this.#dispatch(m));
    thread.on('error', () => {
      this.#broken = true;
      if (this.#worker?.thread === thread) this.#worker = undefined;
    });
    thread.on('exit', () => {
      if (this.#worker?.thread === thread) this.#worker = undefined;
    });
    // After the listeners: attaching a 'message' listener refs the worker again.
    thread.unref();
    this.#worker = { thread, stop: new Int32Array(control) };
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
    try {
      writeSync(this.#controlWrite, Buffer.from([1]));
    } catch {
      // The pipe is full or closed: the worker's poll timeout still ends it.
    }
  }
}
