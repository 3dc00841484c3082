/**
 * What bench/etcd.bench.ts needs around its measurements: private etcd members and `locksmith
 * serve` processes on loopback ports in temporary directories, and etcd's concurrency Mutex
 * recipe on the etcd3 client. Nothing here measures by itself.
 *
 * Every process started here is recorded in {@link started} and killed by {@link killAll}, which
 * the bench also runs on exit and on SIGINT/SIGTERM.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Etcd3, IRangeRequest, Lease } from 'etcd3';
import { connect, type LocksmithClient } from '../src/client/locksmith-client.js';
import { Put } from '../src/rows/index.js';
import { prefixEnd } from '../src/store/etcd-locker.js';
import { freePort } from '../test/store/etcd-cluster.js';
import { repoRoot, sleep } from './support.js';

const CLI = join(repoRoot, 'dist/cli/main.js');
const started = new Set<ChildProcess>();
const dirs = new Set<string>();

/** SIGKILLs every process started here and removes every temporary directory (synchronous). */
export function killAll(): void {
  for (const child of started) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  started.clear();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  dirs.clear();
}

export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.add(dir);
  return dir;
}

export { freePort };

/** The server process's resident set (VmRSS of /proc/<pid>/status), bytes. */
export function rssOf(pid: number): number {
  const line = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (line === null) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(line[1]) * 1024;
}

/** `etcd --version`'s first line, or undefined where etcd is not installed. */
export function etcdVersion(): string | undefined {
  const out = spawnSync('etcd', ['--version'], { encoding: 'utf8' });
  if (out.error !== undefined || out.status !== 0) return undefined;
  return out.stdout.split('\n')[0]?.trim();
}

function track(child: ChildProcess, label: string): { output: () => string } {
  started.add(child);
  let output = '';
  for (const stream of [child.stdout, child.stderr]) {
    stream?.on('data', (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-8000);
    });
  }
  child.once('exit', () => started.delete(child));
  child.once('error', (err) => {
    output += `\n${label}: ${err.message}`;
  });
  return { output: () => output };
}

// The same private etcd members and clusters as the tests (orphan-proof processes, etcd's
// default timings unless told otherwise).
export { EtcdCluster, EtcdMember } from '../test/store/etcd-cluster.js';

/** etcd's WithFirstCreate / WithLastCreate: the key under `prefix` created first / last. */
function byCreate(prefix: Buffer, order: 'Ascend' | 'Descend'): IRangeRequest {
  return {
    key: prefix,
    range_end: prefixEnd(prefix),
    sort_target: 'Create',
    sort_order: order,
    limit: 1,
  };
}

/** A mutex held by an {@link EtcdSession}: its key and the key's create revision. */
export interface EtcdHeld {
  key: Buffer;
  rev: number;
}

/**
 * The Go client's `concurrency.Session` and `concurrency.Mutex`, on the etcd3 client: one
 * lease per session (TTL 60 s, kept alive by the client) shared by every lock the session
 * takes, so a lock costs one txn to take and one delete to give back, as in Go. etcd3's own
 * `client.lock()` grants a lease per lock (two more round trips per cycle) and is not what a Go
 * service would run, hence this.
 *
 * As in Go, one session holds at most one mutex per name (the key is `<name>/<lease id hex>`).
 * Waiters queue by create revision: each watches the key created just before its own and
 * re-checks when it is deleted, so a release wakes one waiter.
 */
export class EtcdSession {
  readonly client: Etcd3;
  readonly #lease: Lease;
  readonly leaseId: string;
  readonly #leaseHex: string;

  private constructor(client: Etcd3, lease: Lease, leaseId: string) {
    this.client = client;
    this.#lease = lease;
    this.leaseId = leaseId;
    this.#leaseHex = BigInt(leaseId).toString(16);
  }

  static async open(client: Etcd3, ttlSeconds = 60): Promise<EtcdSession> {
    const lease = client.lease(ttlSeconds);
    lease.on('lost', () => undefined);
    return new EtcdSession(client, lease, await lease.grant());
  }

  /** `Mutex.Lock`: resolves once this session holds `name`. */
  async lock(name: string): Promise<EtcdHeld> {
    const prefix = Buffer.from(`${name}/`);
    const key = Buffer.from(`${name}/${this.#leaseHex}`);
    const res = await this.client.kv.txn({
      compare: [{ key, target: 'Create', result: 'Equal', create_revision: 0 }],
      success: [
        { request_put: { key, value: Buffer.alloc(0), lease: this.leaseId } },
        { request_range: byCreate(prefix, 'Ascend') },
      ],
      failure: [{ request_range: { key } }, { request_range: byCreate(prefix, 'Ascend') }],
    });
    const rev = res.succeeded
      ? Number(res.header.revision)
      : Number(res.responses[0]?.response_range.kvs[0]?.create_revision);
    const owner = res.responses[1]?.response_range.kvs ?? [];
    if (owner.length > 0 && Number(owner[0]?.create_revision) !== rev) {
      await this.#waitDeletes(prefix, rev - 1);
    }
    return { key, rev };
  }

  /** `Mutex.Unlock`. */
  async unlock(held: EtcdHeld): Promise<void> {
    await this.client.kv.deleteRange({ key: held.key });
  }

  /** A put that succeeds only while `held` is still this session's (Go's `Mutex.IsOwner`). */
  async putIfOwner(held: EtcdHeld, key: string, value: string): Promise<boolean> {
    const res = await this.client.kv.txn({
      compare: [{ key: held.key, target: 'Create', result: 'Equal', create_revision: held.rev }],
      success: [{ request_put: { key: Buffer.from(key), value: Buffer.from(value) } }],
    });
    return res.succeeded;
  }

  /** Go's `waitDeletes`: until no key under `prefix` has a create revision ≤ `maxRev`. */
  async #waitDeletes(prefix: Buffer, maxRev: number): Promise<void> {
    for (;;) {
      const res = await this.client.kv.range({
        ...byCreate(prefix, 'Descend'),
        max_create_revision: maxRev,
      });
      const last = res.kvs[0];
      if (last === undefined) return;
      await this.#waitDelete(last.key, res.header.revision);
    }
  }

  async #waitDelete(key: Buffer, rev: string): Promise<void> {
    const watcher = await this.client.watch().key(key).startRevision(rev).create();
    try {
      await new Promise<void>((resolve, reject) => {
        watcher.once('delete', () => resolve());
        watcher.once('error', reject);
      });
    } finally {
      await watcher.cancel();
    }
  }

  async close(): Promise<void> {
    await this.#lease.revoke().catch(() => undefined);
  }
}

/** One `locksmith serve` process (dist/cli/main.js) on a data directory of its own. */
export class LocksmithServe {
  readonly proc: ChildProcess;
  readonly #log: { output: () => string };
  readonly port: number;

  constructor(dataDir: string, port: number, extra: readonly string[] = []) {
    this.port = port;
    this.proc = spawn(
      process.execPath,
      [CLI, 'serve', '--data', dataDir, '--port', String(port), ...extra],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.#log = track(this.proc, 'locksmith serve');
  }

  /** Starts a standalone server with its defaults (durability fsync, durable sessions). */
  static async start(extra: readonly string[] = []): Promise<LocksmithServe> {
    const server = new LocksmithServe(tempDir('locksmith-bench-serve-'), await freePort(), extra);
    await server.waitFor(/listening on locksmith:/, 30_000);
    return server;
  }

  get url(): string {
    return `locksmith://127.0.0.1:${this.port}`;
  }

  get alive(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  get output(): string {
    return this.#log.output();
  }

  async waitFor(pattern: RegExp, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pattern.test(this.output)) {
      if (!this.alive) throw new Error(`locksmith serve exited:\n${this.output}`);
      if (Date.now() > deadline)
        throw new Error(`no ${pattern} within ${timeoutMs} ms:\n${this.output}`);
      await sleep(20);
    }
  }

  async kill(signal: 'SIGKILL' | 'SIGTERM' = 'SIGTERM'): Promise<void> {
    if (!this.alive) return;
    const exited = new Promise<void>((r) => this.proc.once('exit', () => r()));
    this.proc.kill(signal);
    await exited;
  }
}

/** ms from a master's kill -9: to the first put that succeeds, and to the slave saying master. */
export interface ServeFailover {
  put: number;
  promoted: number;
}

/**
 * One failover sample of `locksmith serve`: master and slave on a fresh data directory with
 * `ha` (the locker's flags), a client on both, the master killed `killAfterMs` after the
 * client's first put. With `rowLock`, the client holds a row lock taken before the kill and
 * every put goes under it (the lock must survive the failover).
 */
export async function serveFailover(
  ha: readonly string[],
  options: { rowLock: boolean; killAfterMs: () => number },
): Promise<ServeFailover> {
  const work = tempDir('locksmith-bench-failover-');
  const start = async () => {
    const port = await freePort();
    return new LocksmithServe(`${work}/data`, port, [...ha, '--advertise', `127.0.0.1:${port}`]);
  };
  const a = await start();
  let b: LocksmithServe | undefined;
  let client: LocksmithClient | undefined;
  try {
    await a.waitFor(/master \(token/, 60_000);
    b = await start();
    await b.waitFor(/slave/, 60_000);
    client = await connect([a.url, b.url], { sessionLeaseMs: 10_000 });
    await client.createTable('t', ['f']);
    const table = client.table('t');
    const lock = options.rowLock ? await table.lockRow('k') : undefined;
    const put = (value: string) =>
      table.put(new Put('k', lock === undefined ? {} : { rowLock: lock }).add('f', 'q', value));
    await put('before');
    await sleep(options.killAfterMs());
    const killed = performance.now();
    await a.kill('SIGKILL');
    const promoted = (async (slave: LocksmithServe) => {
      while (!/master \(token/.test(slave.output)) {
        if (!slave.alive || performance.now() - killed > 60_000) return Number.NaN;
        await sleep(5);
      }
      return performance.now() - killed;
    })(b);
    for (;;) {
      if (performance.now() - killed > 60_000) throw new Error(`no failover:\n${b.output}`);
      try {
        await put('after');
        return { put: performance.now() - killed, promoted: await promoted };
      } catch {
        await sleep(10);
      }
    }
  } finally {
    await client?.close().catch(() => undefined);
    await a.kill('SIGKILL');
    await b?.kill('SIGKILL');
  }
}
