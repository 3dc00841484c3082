import { LINUX_64 } from './file-calls.js';
import { libc } from './libc.js';

const CLOCK_REALTIME = 0;

let read: (() => number) | undefined;

/**
 * The wall clock (`CLOCK_REALTIME`) in whole microseconds since the Unix epoch, the clock
 * `Date.now()` reads but with microsecond resolution: on 64-bit Linux through `clock_gettime`
 * (koffi), elsewhere `Date.now() * 1000` (millisecond steps). Fencing-token floors use it so
 * that two grants in different processes, which are always more than a microsecond apart,
 * never read the same value. Like `Date.now()` it goes back when the wall clock is set back.
 */
export function wallMicros(): number {
  if (read === undefined) read = (LINUX_64 ? tryClockGettime() : undefined) ?? millisTimes1000;
  return read();
}

const millisTimes1000 = () => Date.now() * 1000;

function tryClockGettime(): (() => number) | undefined {
  try {
    const fn = libc().lib.func('int clock_gettime(int clk, void *ts)') as (
      clk: number,
      ts: Buffer,
    ) => number;
    // struct timespec on 64-bit Linux: i64 tv_sec @0, i64 tv_nsec @8.
    const ts = Buffer.alloc(16);
    const micros = () => {
      if (fn(CLOCK_REALTIME, ts) !== 0) return millisTimes1000();
      const sec = ts.readInt32LE(4) * 2 ** 32 + ts.readUInt32LE(0);
      return sec * 1_000_000 + Math.floor(ts.readUInt32LE(8) / 1000);
    };
    micros();
    return micros;
  } catch {
    return undefined;
  }
}
