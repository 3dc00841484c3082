/**
 * Small helpers shared by the benchmarks: statistics, a line protocol with child processes,
 * and table printing. Nothing here measures anything by itself.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** The repository root: this file runs from dist-test/bench/. */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * Whether the module at `url` (its `import.meta.url`) is the script node was started with, not
 * one imported by a runner: a scenario file runs itself only then.
 */
export function isMain(url: string): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(fileURLToPath(url)) === realpathSync(script);
  } catch {
    return false;
  }
}

/** Writes one line of the report to stdout. */
export function say(text = ''): void {
  process.stdout.write(`${text}\n`);
}

/** Nanoseconds on CLOCK_MONOTONIC, which every process on one Linux machine shares. */
export function nowNs(): bigint {
  return process.hrtime.bigint();
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/** Nearest-rank percentile (`p` in 0..100) of a non-empty sample. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) throw new Error('percentile of an empty sample');
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1] as number;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * A child process spoken to by lines: `send` writes one line to its stdin, `next` resolves with
 * the next stdout line (rejecting on timeout or when the child exits first). Lines that arrive
 * before anyone asks are queued, so no reply is lost.
 */
export class LineChild {
  readonly child: ChildProcess;
  readonly #queue: string[] = [];
  readonly #waiters: { resolve: (line: string) => void; reject: (err: Error) => void }[] = [];
  #exited: Error | undefined;
  #stderr = '';

  constructor(command: string, args: readonly string[], label: string) {
    this.child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stderr?.on('data', (d: Buffer) => {
      this.#stderr += d.toString();
    });
    const lines = createInterface({ input: this.child.stdout as NodeJS.ReadableStream });
    lines.on('line', (line) => {
      const waiter = this.#waiters.shift();
      if (waiter === undefined) this.#queue.push(line);
      else waiter.resolve(line);
    });
    this.child.once('exit', (code, signal) => {
      this.#exited = new Error(
        `${label} exited (code ${code}, signal ${signal}); stderr: ${this.#stderr.trim()}`,
      );
      for (const w of this.#waiters.splice(0)) w.reject(this.#exited);
    });
  }

  send(line: string): void {
    this.child.stdin?.write(`${line}\n`);
  }

  next(timeoutMs = 15_000): Promise<string> {
    const queued = this.#queue.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    if (this.#exited !== undefined) return Promise.reject(this.#exited);
    return new Promise((resolvePromise, reject) => {
      const timer = setTimeout(() => {
        const i = this.#waiters.indexOf(entry);
        if (i >= 0) this.#waiters.splice(i, 1);
        reject(new Error(`no reply within ${timeoutMs} ms; stderr: ${this.#stderr.trim()}`));
      }, timeoutMs);
      const entry = {
        resolve: (line: string) => {
          clearTimeout(timer);
          resolvePromise(line);
        },
        reject: (err: Error) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      this.#waiters.push(entry);
    });
  }

  /** The next line, which must start with `word`; returns the rest of it. */
  async expect(word: string, timeoutMs?: number): Promise<string> {
    const line = await this.next(timeoutMs);
    if (line !== word && !line.startsWith(`${word} `)) {
      throw new Error(`expected "${word}", got ${JSON.stringify(line)}`);
    }
    return line.slice(word.length + 1);
  }

  /** Resolves with the CLOCK_MONOTONIC time at which the parent saw the child exit. */
  exitTime(): Promise<bigint> {
    return new Promise((r) => this.child.once('exit', () => r(nowNs())));
  }

  /** Resolves once the child has exited (kills it after `timeoutMs`). */
  async close(timeoutMs = 5_000): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((r) => this.child.once('exit', () => r()));
    this.child.stdin?.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    await exited;
    clearTimeout(timer);
  }
}

/**
 * Kills `holder` with SIGKILL while `waiter` waits for the lock it holds; resolves with the µs
 * from the kill to the waiter holding the lock (its `got <ns>` line, then `freed`) and to this
 * process seeing the holder exit.
 */
export async function timeKill(
  holder: LineChild,
  waiter: LineChild,
): Promise<{ free: number; reaped: number }> {
  const exit = holder.exitTime();
  const killed = nowNs();
  holder.child.kill('SIGKILL');
  const got = BigInt(await waiter.expect('got'));
  await waiter.expect('freed');
  const reaped = await exit;
  return { free: Number(got - killed) / 1000, reaped: Number(reaped - killed) / 1000 };
}

/** Renders a Markdown table (the same text goes to the console and into docs/benchmarks.md). */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(' | ')} |`;
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

/** Prints `heading`, a blank line and a Markdown table: how every report section opens. */
export function sayTable(
  heading: string,
  header: readonly string[],
  rows: readonly (readonly string[])[],
): void {
  say(heading);
  say();
  say(table(header, rows));
}

/** Formats with a precision that suits the magnitude (3 significant digits, at least). */
export function fmt(value: number, digits = 3): string {
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  const text = value.toPrecision(digits);
  // toPrecision switches to exponent notation once rounding reaches 10^digits (99.96 → 1.0e+2).
  if (abs >= 10 ** digits || text.includes('e')) return Math.round(value).toLocaleString('en-US');
  return text;
}

export function ratio(value: number): string {
  return `${fmt(value)}×`;
}

export function verdict(met: boolean): string {
  return met ? 'met' : 'MISSED';
}
