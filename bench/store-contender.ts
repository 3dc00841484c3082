/**
 * The contender processes of the store benchmarks: bench/store-child.ts (a Supervisor over one
 * locker) spawned from a private snapshot of the compiled tree, their output lines, and the
 * bookkeeping that lets a run kill every one still alive.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { ChildConfig } from './store-child.js';
import { repoRoot } from './support.js';

/**
 * The children run from a private copy of the compiled tree (git-ignored `bench/.build/`), so
 * that a rebuild of `dist-test/` during the run (another `npm test`) cannot break them.
 */
const snapshot = join(repoRoot, 'bench/.build/store-snapshot');
const childScript = join(snapshot, 'bench/store-child.js');

/** Copies the compiled tree into the snapshot the children run from. */
export function takeSnapshot(): void {
  rmSync(snapshot, { recursive: true, force: true });
  for (const dir of ['src', 'bench']) {
    cpSync(join(repoRoot, 'dist-test', dir), join(snapshot, dir), { recursive: true });
  }
}

/** Removes the snapshot (at the end of a run). */
export function removeSnapshot(): void {
  rmSync(snapshot, { recursive: true, force: true });
}

const live = new Set<Contender>();

export interface Event {
  index: number;
  ns: bigint;
  rest: string;
}

/** A store-child.js process; its lines are kept, and `waitFor` finds the next one of a kind. */
export class Contender {
  readonly proc: ChildProcess;
  readonly lines: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  #stderr = '';
  #gone: Error | undefined;
  #notify: (() => void)[] = [];

  constructor(config: ChildConfig) {
    this.proc = spawn(process.execPath, [childScript, JSON.stringify(config)], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    live.add(this);
    this.proc.stderr?.on('data', (d: Buffer) => {
      this.#stderr += d.toString();
    });
    createInterface({ input: this.proc.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      this.lines.push(line);
      for (const n of this.#notify.splice(0)) n();
    });
    this.exited = new Promise((resolve) => {
      this.proc.once('exit', (code, signal) => {
        live.delete(this);
        this.#gone = new Error(
          `child exited (code ${code}, signal ${signal}); lines: ${this.lines.join(' | ')}; stderr: ${this.#stderr.trim()}`,
        );
        for (const n of this.#notify.splice(0)) n();
        resolve({ code, signal });
      });
    });
  }

  /** The first line from `from` on that starts with `word`. */
  find(word: string, from = 0): Event | undefined {
    for (let i = from; i < this.lines.length; i++) {
      const line = this.lines[i] as string;
      if (line.startsWith(`${word} `)) {
        const [, ns, ...rest] = line.split(' ');
        return { index: i, ns: BigInt(ns ?? '0'), rest: rest.join(' ') };
      }
    }
    return undefined;
  }

  /** Waits for a line starting with `word`; rejects on timeout, an `error` line, or exit. */
  async waitFor(word: string, timeoutMs: number, from = 0): Promise<Event> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const found = this.find(word, from);
      if (found !== undefined) return found;
      const error = this.find('error', from);
      if (error !== undefined) throw new Error(`child failed: ${error.rest}`);
      if (this.#gone !== undefined) throw this.#gone;
      const left = deadline - performance.now();
      if (left <= 0) {
        throw new Error(
          `no "${word}" within ${timeoutMs} ms; lines: ${this.lines.join(' | ')}; stderr: ${this.#stderr.trim()}`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, left);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.#notify.push(done);
      });
    }
  }

  kill(signal: NodeJS.Signals): void {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill(signal);
  }
}

/** Kills every child still alive and waits for them. */
export async function killAll(): Promise<void> {
  const all = [...live];
  for (const c of all) c.kill('SIGKILL');
  await Promise.all(all.map((c) => c.exited));
}
