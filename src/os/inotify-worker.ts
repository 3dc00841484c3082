/**
 * The thread that waits for inotify events so the event loop never does. It blocks in
 * `poll(2)` on the inotify descriptor and a control pipe, which is a dedicated thread's wait,
 * not a libuv thread-pool job, and costs no CPU while nothing happens. Each batch of events
 * becomes one message of watch descriptors. The poll timeout bounds how long a `stop` can
 * take even if the control byte is lost.
 */
import { createRequire } from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';
import type * as Koffi from 'koffi';

interface InotifyWorkerData {
  libcName: string;
  inotifyFd: number;
  controlFd: number;
  control: SharedArrayBuffer;
}

const POLLIN = 1;
const EAGAIN = 11;
const EINTR = 4;
const IN_IGNORED = 0x8000;

const { libcName, inotifyFd, controlFd, control } = workerData as InotifyWorkerData;
const stop = new Int32Array(control);
const koffi = createRequire(import.meta.url)('koffi') as typeof Koffi;
const lib = koffi.load(libcName);
const poll = lib.func('int poll(void *fds, unsigned long nfds, int timeout)') as (
  fds: Buffer,
  n: number,
  t: number,
) => number;
const read = lib.func('long read(int fd, void *buf, unsigned long count)') as (
  fd: number,
  buf: Buffer,
  n: number,
) => number;

const fds = Buffer.alloc(16);
const events = Buffer.alloc(64 * 1024);
const scratch = Buffer.alloc(64);

while (Atomics.load(stop, 0) === 0) {
  fds.writeInt32LE(inotifyFd, 0);
  fds.writeInt16LE(POLLIN, 4);
  fds.writeInt16LE(0, 6);
  fds.writeInt32LE(controlFd, 8);
  fds.writeInt16LE(POLLIN, 12);
  fds.writeInt16LE(0, 14);
  const ready = poll(fds, 2, 1000);
  if (ready < 0) {
    if (koffi.errno() === EINTR) continue;
    break;
  }
  if (fds.readInt16LE(14) !== 0) {
    while (read(controlFd, scratch, scratch.length) > 0) {}
  }
  if (fds.readInt16LE(6) === 0) continue;
  const wds: number[] = [];
  const gone: number[] = [];
  for (;;) {
    const n = read(inotifyFd, events, events.length);
    if (n <= 0) {
      const errno = koffi.errno();
      if (n < 0 && errno !== EAGAIN && errno !== EINTR) Atomics.store(stop, 0, 1);
      break;
    }
    // struct inotify_event { int wd; uint32 mask; uint32 cookie; uint32 len; char name[len]; }
    for (let off = 0; off + 16 <= n; ) {
      const wd = events.readInt32LE(off);
      const mask = events.readUInt32LE(off + 4);
      const len = events.readUInt32LE(off + 12);
      if (!wds.includes(wd)) wds.push(wd);
      if ((mask & IN_IGNORED) !== 0) gone.push(wd);
      off += 16 + len;
    }
  }
  if (wds.length > 0) parentPort?.postMessage({ wds, gone });
}
