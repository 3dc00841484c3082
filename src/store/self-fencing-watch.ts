import type { Clock } from '../core/clock.js';

/** The part of a lease locker's mastership that {@link watchSelfFencing} reads. */
export interface SelfFencedHold {
  /** Until when the mastership is certain, on `clock.monotonic()`; moved by confirmations. */
  readonly deadline: number;
  /** Set once the loss was reported: the watch ends. */
  readonly lost: boolean;
  /** Aborted when the mastership ends by a stop: the watch ends. */
  readonly stop: AbortController;
}

/**
 * One loop per mastership of a lease locker: it reports `expired` once the self-fencing
 * deadline passes without a confirmation, and `stalled` when the event loop stalled longer than
 * `maxEventLoopLagMs` between two of its ticks (a stall that long may have hidden a lease that
 * ran out: counted as a missed renewal). Ticks are a quarter of the smaller of the margin and
 * the lag bound (5–250 ms), so either is noticed within a fraction of its budget. Ends at the
 * first report, a loss or a stop.
 */
export async function watchSelfFencing(
  clock: Clock,
  hold: SelfFencedHold,
  bounds: { selfFencingMarginMs: number; maxEventLoopLagMs: number },
  report: { expired(): void; stalled(lagMs: number): void },
): Promise<void> {
  const tick = Math.max(
    5,
    Math.min(250, bounds.selfFencingMarginMs / 4, bounds.maxEventLoopLagMs / 4),
  );
  for (;;) {
    const before = clock.monotonic();
    const ms = Math.max(0, Math.min(tick, hold.deadline - before));
    try {
      await clock.sleep(ms, hold.stop.signal);
    } catch {
      return;
    }
    if (hold.lost || hold.stop.signal.aborted) return;
    const now = clock.monotonic();
    const lag = now - before - ms;
    if (now >= hold.deadline) {
      report.expired();
      return;
    }
    if (lag > bounds.maxEventLoopLagMs) {
      report.stalled(lag);
      return;
    }
  }
}
