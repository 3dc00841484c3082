// Shared by the verify-protocol and Lucene interop tests: spawning the CLI and Java processes
// and reading what they print. Not a test file itself.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { cliPath, collectOutput, eventually } from '../helpers.js';

export interface Proc {
  child: ChildProcess;
  readonly stdout: string;
  readonly stderr: string;
  /** Resolves with the exit code (a signal counts as -1). */
  exit: Promise<number>;
}

/** Spawns `command`, collecting its output; it is killed after `timeoutMs`. */
export function spawnProc(command: string, args: string[], timeoutMs = 50_000): Proc {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const output = collectOutput(child);
  let spawnError = '';
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const exit = new Promise<number>((resolvePromise) => {
    child.on('error', (err) => {
      spawnError = String(err);
      clearTimeout(timer);
      resolvePromise(-1);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolvePromise(code ?? -1);
    });
  });
  return {
    child,
    get stdout() {
      return output.stdout();
    },
    get stderr() {
      return output.stderr() + spawnError;
    },
    exit,
  };
}

export function cli(...args: string[]): Proc {
  return spawnProc(process.execPath, [cliPath, ...args]);
}

/** Waits for `Listening on <host>:<port>...` (ours, or Lucene's `/<host>:<port>`) and returns the port. */
export async function listeningPort(server: Proc, timeoutMs = 15_000): Promise<number> {
  let exited = false;
  void server.exit.then(() => {
    exited = true;
  });
  return eventually(
    () => {
      const match = /Listening on \S*:(\d+)\.\.\./.exec(server.stdout);
      if (match?.[1] !== undefined) return Number(match[1]);
      if (exited)
        throw new Error(`server exited before listening: ${server.stdout} ${server.stderr}`);
      return undefined;
    },
    timeoutMs,
    () => `the server to listen: ${server.stdout} ${server.stderr}`,
  );
}

/** The output of a finished process, for assertion messages. */
export function describeProc(name: string, proc: Proc): string {
  return `${name}:\n--- stdout\n${proc.stdout}--- stderr\n${proc.stderr}`;
}

/**
 * Lucene's core jar: `$LUCENE_CORE_JAR`, `/usr/share/java/lucene-core.jar`, or the versioned
 * jar Debian's liblucene8-java installs; `undefined` when none exists.
 */
export function luceneCoreJar(): string | undefined {
  const fromEnv = process.env.LUCENE_CORE_JAR;
  if (fromEnv !== undefined && fromEnv !== '') return existsSync(fromEnv) ? fromEnv : undefined;
  const plain = '/usr/share/java/lucene-core.jar';
  if (existsSync(plain)) return plain;
  try {
    const versioned = readdirSync('/usr/share/java')
      .filter((f) => /^lucene-core-\d[\d.]*\.jar$/.test(f))
      .sort()
      .pop();
    return versioned === undefined ? undefined : join('/usr/share/java', versioned);
  } catch {
    return undefined;
  }
}

/** Why the Java interop tests cannot run here, or `undefined` when they can. */
export function javaUnavailable(): string | undefined {
  const probe = spawnSync('java', ['-version'], { stdio: 'ignore', timeout: 20_000 });
  if (probe.error !== undefined || probe.status !== 0) {
    return 'java is not installed (needed to run Lucene LockVerifyServer/LockStressTest)';
  }
  if (luceneCoreJar() === undefined) {
    return 'Lucene core jar not found (set LUCENE_CORE_JAR or install liblucene8-java)';
  }
  return undefined;
}
