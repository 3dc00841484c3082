/**
 * What bench/server.bench.ts needs around its measurements: the server child process, a bare
 * protocol session (for opening thousands of sessions cheaply), the rate runner of the
 * connections × pipelining grid, and the machine header. Nothing here measures by itself.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { type AddressInfo, connect as connectTcp, createServer, type Socket } from 'node:net';
import { cpus, release as kernelRelease, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { decode, encode } from '../src/wire/codec.js';
import { FrameReader, frame } from '../src/wire/frame.js';
import { LineChild, repoRoot, say, sleep } from './support.js';

export const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);
export const WARMUP_MS = Number(process.env.BENCH_WARMUP_MS ?? 500);

/** A server child (bench/server-child.ts): `locksmith` with its options, or the `echo` floor. */
export class ServerChild {
  readonly #child: LineChild;
  readonly port: number;

  private constructor(child: LineChild, port: number) {
    this.#child = child;
    this.port = port;
  }

  static async start(
    mode: 'locksmith' | 'echo',
    options: Record<string, unknown> = {},
  ): Promise<ServerChild> {
    const script = join(repoRoot, 'dist-test/bench/server-child.js');
    // BENCH_SERVER_PROF=<dir>: each server child writes a CPU profile there (--cpu-prof).
    const prof = process.env.BENCH_SERVER_PROF;
    const flags = prof === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${prof}`];
    const child = new LineChild(
      process.execPath,
      ['--expose-gc', ...flags, script, mode, JSON.stringify(options)],
      `${mode} server`,
    );
    const port = Number(await child.expect('listening', 30_000));
    return new ServerChild(child, port);
  }

  get url(): string {
    return `locksmith://127.0.0.1:${this.port}`;
  }

  /** The child's RSS and heap in use after two full collections. */
  async memory(): Promise<{ rss: number; heapUsed: number }> {
    this.#child.send('mem');
    const [rss, heapUsed] = (await this.#child.expect('mem', 60_000)).split(' ').map(Number);
    return { rss: rss as number, heapUsed: heapUsed as number };
  }

  /** The CPU time (user + system, µs) the child has used so far. */
  async cpuMicros(): Promise<number> {
    this.#child.send('cpu');
    return Number(await this.#child.expect('cpu', 60_000));
  }

  async sessions(): Promise<number> {
    this.#child.send('sessions');
    return Number(await this.#child.expect('sessions', 60_000));
  }

  close(): Promise<void> {
    return this.#child.close(30_000);
  }
}

/**
 * A bare protocol session: one socket, HELLO/WELCOME, then calls answered in any order. Much
 * lighter than the real client, so one process can hold thousands of them.
 */
export class RawSession {
  readonly #socket: Socket;
  readonly #reader = new FrameReader();
  readonly #pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void }
  >();
  #nextId = 1;

  private constructor(socket: Socket) {
    this.#socket = socket;
  }

  static open(port: number, hello: Record<string, unknown>): Promise<RawSession> {
    return new Promise((resolve, reject) => {
      const socket = connectTcp({ host: '127.0.0.1', port });
      const session = new RawSession(socket);
      socket.once('error', reject);
      socket.on('data', (chunk: Buffer) => {
        for (const payload of session.#reader.push(chunk)) {
          const m = decode(payload) as unknown[];
          if (m[0] === 0) resolve(session);
          else if (m[0] === 1 || m[0] === 2) {
            const id = m[1] as number;
            if (id === 0) reject(new Error(`handshake refused: ${String(m[3])}`));
            const p = session.#pending.get(id);
            session.#pending.delete(id);
            if (m[0] === 1) p?.resolve(m[2]);
            else p?.reject(new Error(`${String(m[2])}: ${String(m[3])}`));
          }
        }
      });
      socket.write(frame(encode([0, 1, hello])));
    });
  }

  call(method: string, args: unknown[]): Promise<unknown> {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#socket.write(frame(encode([1, id, method, args])));
    });
  }

  destroy(): void {
    this.#socket.destroy();
  }
}

/** One cell of the grid: client connections × calls in flight per connection. */
export interface Cell {
  conns: number;
  depth: number;
}

export const cellName = (cell: Cell) => `${cell.conns}×${cell.depth}`;

/**
 * A system under test, opened with `conns` connections: `step(conn, worker)` does one unit of
 * work (a lock cycle, a put, ...) on connection `conn` for worker `worker` (its own key).
 */
export interface Subject {
  step(conn: number, worker: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * Steps per second: `depth` workers per connection loop over `step` without pause; the count
 * is taken over {@link SECONDS} after {@link WARMUP_MS} of the same load. `window` is told
 * when that count starts and ends (to sample CPU time over it).
 */
export async function measureRate(
  cell: Cell,
  open: (conns: number) => Promise<Subject>,
  window?: { start(): Promise<void>; end(): Promise<void> },
): Promise<number> {
  const subject = await open(cell.conns);
  let count = 0;
  let stop = false;
  let failure: unknown;
  const workers: Promise<void>[] = [];
  for (let c = 0; c < cell.conns; c++) {
    for (let d = 0; d < cell.depth; d++) {
      const worker = c * cell.depth + d;
      workers.push(
        (async () => {
          while (!stop) {
            await subject.step(c, worker);
            count++;
          }
        })().catch((err: unknown) => {
          failure ??= err;
          stop = true;
        }),
      );
    }
  }
  await sleep(WARMUP_MS);
  await window?.start();
  const c0 = count;
  const t0 = performance.now();
  await sleep(SECONDS * 1000);
  const c1 = count;
  const t1 = performance.now();
  await window?.end();
  stop = true;
  await Promise.all(workers);
  await subject.close();
  if (failure !== undefined) throw failure;
  return (c1 - c0) / ((t1 - t0) / 1000);
}

/** Opens `n` things, `batch` at a time (thousands of sockets at once would overrun the backlog). */
export async function openMany<T>(n: number, batch: number, open: (i: number) => Promise<T>) {
  const out: T[] = [];
  for (let i = 0; i < n; i += batch) {
    out.push(
      ...(await Promise.all(Array.from({ length: Math.min(batch, n - i) }, (_, k) => open(i + k)))),
    );
  }
  return out;
}

/** Reads /proc/stat's aggregate line: [steal, total] jiffies (Linux only). */
async function cpuTimes(): Promise<[number, number] | undefined> {
  try {
    const { readFileSync } = await import('node:fs');
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    return [f[7] ?? 0, f.reduce((a, b) => a + b, 0)];
  } catch {
    return undefined;
  }
}

/** The header every report opens with; returns a function that reports the run's load. */
export async function machineHeader(versions: readonly string[]): Promise<() => Promise<string>> {
  say('# locksmith server benchmarks');
  say();
  say(`- node ${process.version}, ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown cpu'}),`);
  say(`  ${(totalmem() / 2 ** 30).toFixed(0)} GiB, kernel ${kernelRelease()}`);
  for (const v of versions) say(`- ${v}`);
  const load = loadavg()[0] ?? 0;
  say(`- 1-minute load average at the start: ${load.toFixed(2)}`);
  say(`- ${SECONDS} s per cell after ${WARMUP_MS} ms of warm-up`);
  const before = await cpuTimes();
  return async () => {
    const after = await cpuTimes();
    const steal =
      before !== undefined && after !== undefined && after[1] > before[1]
        ? `${((100 * (after[0] - before[0])) / (after[1] - before[1])).toFixed(2)} %`
        : 'n/a';
    return `load average ${load.toFixed(2)} → ${(loadavg()[0] ?? 0).toFixed(2)}, steal ${steal} of all CPU time`;
  };
}

/**
 * A private Redis that persists every write before answering it (`appendonly yes`,
 * `appendfsync always`) in a temporary directory: the durable baseline for a put that waits
 * for its fsync. `undefined` where `redis-server` is not installed.
 */
export class DurableRedis {
  readonly #child: ChildProcess;
  readonly #dir: string;
  readonly port: number;

  private constructor(child: ChildProcess, dir: string, port: number) {
    this.#child = child;
    this.#dir = dir;
    this.port = port;
  }

  static async start(): Promise<DurableRedis | undefined> {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'locksmith-bench-redis-'));
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', ''];
    args.push('--appendonly', 'yes', '--appendfsync', 'always', '--daemonize', 'no');
    const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    child.stdout?.on('data', (d: Buffer) => {
      log += d.toString();
    });
    const ready = await new Promise<boolean>((resolve) => {
      child.once('error', () => resolve(false));
      child.once('exit', () => resolve(false));
      const poll = setInterval(() => {
        if (log.includes('Ready to accept connections')) {
          clearInterval(poll);
          resolve(true);
        }
      }, 20);
      child.once('exit', () => clearInterval(poll));
      child.once('error', () => clearInterval(poll));
    });
    if (!ready) {
      rmSync(dir, { recursive: true, force: true });
      return undefined;
    }
    return new DurableRedis(child, dir, port);
  }

  async close(): Promise<void> {
    const exited = new Promise((resolve) => this.#child.once('exit', resolve));
    this.#child.kill('SIGTERM');
    await exited;
    rmSync(this.#dir, { recursive: true, force: true });
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
