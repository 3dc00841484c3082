import type { WakeSource } from '../core/wait.js';

/**
 * Release notifications within this process, keyed by lock identity (a real path, or a
 * factory-scoped name): `notify(key)` calls every listener registered for that key at that
 * moment, synchronously; a listener added by `source(key)` stays until its stop function runs.
 * The in-process counterpart of the kernel's file events (`file-watcher.ts`): a holder in
 * this process wakes this process's waiters without any system call.
 */
export class InProcessReleases {
  readonly #listeners = new Map<string, Set<() => void>>();

  notify(key: string): void {
    const set = this.#listeners.get(key);
    if (set === undefined) return;
    for (const listener of [...set]) listener();
  }

  source(key: string): WakeSource {
    return (wake) => {
      let set = this.#listeners.get(key);
      if (set === undefined) {
        set = new Set();
        this.#listeners.set(key, set);
      }
      set.add(wake);
      return () => {
        const current = this.#listeners.get(key);
        if (current === undefined) return;
        current.delete(wake);
        if (current.size === 0) this.#listeners.delete(key);
      };
    };
  }
}

/** A wake source that fires when any of `sources` does. */
export function anyWake(...sources: (WakeSource | undefined)[]): WakeSource {
  return (wake) => {
    const stops = sources.map((s) => s?.(wake));
    return () => {
      for (const stop of stops) stop?.();
    };
  };
}
