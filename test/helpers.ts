import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root: this file runs as dist-test/test/helpers.js. */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const cliPath = join(repoRoot, 'dist/cli/main.js');
export const fixture = (name: string) => join(repoRoot, 'dist-test/test/fixtures', `${name}.js`);

/** mulberry32: a small seeded generator, so a failing random run can be replayed. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * Polls `probe` on real time, every `everyMs`, until it returns something other than
 * `undefined` or `false`, and resolves with that (a boolean probe resolves `true`). Rejects
 * after `timeoutMs`, naming `what`; a function is called only then, so it can show the state
 * at the failure. A probe that throws (or rejects) ends the wait at once with its error.
 */
export async function eventually<T>(
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 5_000,
  what: string | (() => string) = 'a condition',
  everyMs = 2,
): Promise<Exclude<T, undefined | false>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value as Exclude<T, undefined | false>;
    if (Date.now() > deadline) {
      const description = typeof what === 'function' ? what() : what;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${description}`);
    }
    await sleep(everyMs);
  }
}

/** A fresh temporary directory, removed by the returned cleanup. */
export function tempDir(prefix = 'locksmith-test-'): { path: string; [Symbol.dispose](): void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, [Symbol.dispose]: () => rmSync(path, { recursive: true, force: true }) };
}

/** Resolves with the first stdout line matching `pattern`, rejecting if the child exits first. */
export function waitForLine(
  child: ChildProcess,
  pattern: RegExp,
  timeoutMs = 10_000,
): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    let buffer = '';
    const timer = setTimeout(
      () => finish(new Error(`timed out waiting for ${pattern} (got ${JSON.stringify(buffer)})`)),
      timeoutMs,
    );
    const onData = (chunk: Buffer) => {
      buffer += chunk.toString();
      const line = buffer.split('\n').find((l) => pattern.test(l));
      if (line !== undefined) finish(undefined, line);
    };
    const onExit = (code: number | null) =>
      finish(
        new Error(`child exited (${code}) before ${pattern}; output ${JSON.stringify(buffer)}`),
      );
    const finish = (err?: Error, line?: string) => {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.off('exit', onExit);
      if (err) reject(err);
      else resolvePromise(line as string);
    };
    child.stdout?.on('data', onData);
    child.once('exit', onExit);
  });
}

const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

/**
 * A test that fails before it stops its children must not hang the run: the child no longer
 * keeps this process alive, and is killed when this process exits.
 */
export function orphanProof(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once('exit', () => children.delete(child));
  child.unref();
  for (const stream of [child.stdin, child.stdout, child.stderr]) {
    (stream as unknown as { unref?: () => void } | null)?.unref?.();
  }
  return child;
}

export function exitOf(
  child: ChildProcess,
): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  // The child may be unref'd (orphanProof): keep this process alive while we wait for it.
  const keepAlive = setInterval(() => {}, 1000);
  return new Promise((r) =>
    child.once('exit', (code, signal) => {
      clearInterval(keepAlive);
      r({ code, signal });
    }),
  );
}

/**
 * A child process holding a lock through `fixtures/hold-lock.js`. It prints `held <token>`
 * once it holds; writing `release\n` to its stdin makes it close the lock and exit 0.
 */
export async function holdLockInChild(
  dir: string,
  factory = 'native',
  name = 'write.lock',
): Promise<{ child: ChildProcess; token: number }> {
  const child = spawn(process.execPath, [fixture('hold-lock'), dir, factory, name], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const line = await waitForLine(child, /^held \d+/);
  return { child, token: Number(line.split(' ')[1]) };
}

/**
 * `locksmith lock <dir> -- sh -c 'echo started; exec sleep <seconds>'`, once its command runs
 * (and so holds the lock; it inherits the lock and stays `sleep`, same pid). Orphan-proof.
 */
export async function lockedSleep(dir: string, seconds: number): Promise<ChildProcess> {
  const child = orphanProof(
    spawn(
      process.execPath,
      [cliPath, 'lock', dir, '--', 'sh', '-c', `echo started; exec sleep ${seconds}`],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    ),
  );
  await waitForLine(child, /^started/);
  return child;
}

export async function run(
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
) {
  const child = spawn(process.execPath, args, {
    cwd: options.cwd,
    env: options.env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = collectOutput(child);
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
  const { code, signal } = await exitOf(child);
  clearTimeout(timer);
  return { code, signal, stdout: output.stdout(), stderr: output.stderr() };
}

/** Gathers a child's stdout and stderr (where piped) as text, readable at any moment. */
export function collectOutput(child: ChildProcess): { stdout(): string; stderr(): string } {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  return { stdout: () => stdout, stderr: () => stderr };
}
