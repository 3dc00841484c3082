/**
 * The inotify watcher thread of file-watcher.ts: a blocking `read(2)` of the inotify
 * descriptor, which is this dedicated thread's wait — not a libuv thread-pool job, and no CPU
 * while nothing happens. Each batch of events becomes one message of watch descriptors. It
 * imports only Node's own modules (no koffi), so that starting it costs as little as a worker
 * can. To stop it the main thread sets the flag and removes a sentinel watch, whose IN_IGNORED
 * event ends the read.
 *
 * Started as `new Worker(new URL('./file-watcher-worker.js', import.meta.url))`; imported
 * anywhere else (the main thread, another worker) it does nothing.
 */
import { readSync } from 'node:fs';
import { type MessagePort, parentPort, workerData } from 'node:worker_threads';

/** What file-watcher.ts passes: the inotify descriptor and a 4-byte stop flag. */
export interface WatcherData {
  fd: number;
  control: SharedArrayBuffer;
}

/** One batch: the watches that had events, and those the kernel dropped (IN_IGNORED). */
export interface WatcherMessage {
  wds: number[];
  gone: number[];
}

const IN_IGNORED = 0x8000;

function isWatcherData(data: unknown): data is WatcherData {
  const d = data as Partial<WatcherData> | null | undefined;
  return typeof d?.fd === 'number' && d.control instanceof SharedArrayBuffer;
}

function run(port: MessagePort, { fd, control }: WatcherData): void {
  const stop = new Int32Array(control);
  const events = Buffer.alloc(64 * 1024);
  while (Atomics.load(stop, 0) === 0) {
    let n: number;
    try {
      n = readSync(fd, events, 0, events.length, null);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EINTR' || code === 'EAGAIN') continue;
      throw err;
    }
    const wds: number[] = [];
    const gone: number[] = [];
    // struct inotify_event { int wd; uint32 mask; uint32 cookie; uint32 len; char name[len]; }
    for (let off = 0; off + 16 <= n; off += 16 + events.readUInt32LE(off + 12)) {
      const wd = events.readInt32LE(off);
      if (!wds.includes(wd)) wds.push(wd);
      if ((events.readUInt32LE(off + 4) & IN_IGNORED) !== 0) gone.push(wd);
    }
    if (Atomics.load(stop, 0) === 0) port.postMessage({ wds, gone } satisfies WatcherMessage);
  }
}

if (parentPort !== null && isWatcherData(workerData)) run(parentPort, workerData);
