import { constants } from 'node:os';

/** The exit status of a command stopped by `sig`: 128 + its number (130 for SIGINT), as shells report it. */
export function signalStatus(sig: NodeJS.Signals): number {
  return 128 + (constants.signals[sig] ?? 0);
}

/**
 * A wait ended by a signal (Ctrl-C, `kill`) is no failure of the lock: one line saying so, and
 * the signal's exit status (130 for Ctrl-C), as flock(1) users and shells expect.
 */
export function interrupted(command: string, sig: NodeJS.Signals, what: string): number {
  process.stderr.write(`locksmith ${command}: interrupted (${sig}) while waiting for ${what}\n`);
  return signalStatus(sig);
}
