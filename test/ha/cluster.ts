// Not a test: a cluster of `locksmith serve` processes for the failover proofs.
// Each member has its own fixed port and HTTP port (kept across restarts, so the clients'
// address list stays right); all share one data directory. Members are found by their
// `GET /status` (`ha.role`; a server without `ha` in its status is standalone), so the
// harness needs nothing of the servers' output, which it keeps for failure messages.
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { cliPath, exitOf, orphanProof, repoRoot, sleep } from '../helpers.js';

export type MemberState = 'running' | 'paused' | 'killed' | 'stopped';

export interface Member {
  readonly index: number;
  readonly port: number;
  readonly httpPort: number;
  /** `127.0.0.1:<port>`, as servers advertise it. */
  readonly address: string;
  /** `locksmith://127.0.0.1:<port>`. */
  readonly url: string;
  state: MemberState;
  proc: ChildProcess | undefined;
  /** Every line it wrote (stdout and stderr), across restarts. */
  readonly output: string[];
  starts: number;
}

export interface ClusterOptions {
  /** How many servers (default 3). */
  size?: number;
  /** The data directory they share; with `separateData`, the parent of their own. */
  dataDir: string;
  /**
   * Each member on a data directory of its own, `<dataDir>/member-<index>`: servers whose
   * tables are in a database (`--storage`), sharing no directory.
   */
  separateData?: boolean;
  /** Arguments of every member after its `--data --host --port --http-port`: `--ha …`. */
  args?: readonly string[];
  /** More arguments for one member (its holder id, …). */
  memberArgs?: (member: Member) => readonly string[];
  /** Extra environment of the servers. */
  env?: Readonly<Record<string, string>>;
  /**
   * The program run as `node <program> serve …` (default the CLI); the broken-fencing runs
   * give `unfenced-serve` of the fixtures.
   */
  program?: string;
  /** How long a start may take to answer its status (default 30 s). */
  startTimeoutMs?: number;
}

/** What `GET /status` says of the member's role; undefined when it does not answer. */
export interface MemberStatus {
  role: 'standalone' | 'master' | 'slave' | string;
  token: number | undefined;
  status: Record<string, unknown>;
}

/** `count` distinct free TCP ports on 127.0.0.1 (all held open until every one is chosen). */
export async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) {
      const server = createServer();
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      ports.push((server.address() as { port: number }).port);
    }
    return ports;
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
  }
}

export class Cluster implements AsyncDisposable {
  readonly members: Member[];
  readonly #options: ClusterOptions;

  private constructor(members: Member[], options: ClusterOptions) {
    this.members = members;
    this.#options = options;
  }

  /** Starts every member and resolves once each answers its status. */
  static async start(options: ClusterOptions): Promise<Cluster> {
    const size = options.size ?? 3;
    const ports = await freePorts(2 * size);
    const members = Array.from({ length: size }, (_, index): Member => {
      const port = ports[2 * index] as number;
      return {
        index,
        port,
        httpPort: ports[2 * index + 1] as number,
        address: `127.0.0.1:${port}`,
        url: `locksmith://127.0.0.1:${port}`,
        state: 'stopped',
        proc: undefined,
        output: [],
        starts: 0,
      };
    });
    const cluster = new Cluster(members, options);
    try {
      // One after the other: the first one started is the first master.
      for (const member of members) await cluster.restart(member.index);
    } catch (err) {
      await cluster.stop();
      throw err;
    }
    return cluster;
  }

  /** Every member's address, as the clients take them: `locksmith://h:p,h:p,h:p`. */
  get addresses(): string {
    return `locksmith://${this.members.map((m) => m.address).join(',')}`;
  }

  #member(index: number): Member {
    const member = this.members[index];
    if (member === undefined) throw new Error(`no member ${index}`);
    return member;
  }

  /** Starts a stopped or killed member again, on its ports; resolves once it answers. */
  async restart(index: number): Promise<Member> {
    const member = this.#member(index);
    if (member.state === 'running' || member.state === 'paused') {
      throw new Error(`member ${index} is ${member.state}`);
    }
    const args = [
      this.#options.program ?? cliPath,
      'serve',
      '--data',
      this.#options.separateData === true
        ? join(this.#options.dataDir, `member-${index}`)
        : this.#options.dataDir,
      '--host',
      '127.0.0.1',
      '--port',
      String(member.port),
      '--http-port',
      String(member.httpPort),
      ...(this.#options.args ?? []),
      ...(this.#options.memberArgs?.(member) ?? []),
    ];
    const proc = orphanProof(
      spawn(process.execPath, args, {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, ...this.#options.env },
      }),
    );
    member.proc = proc;
    member.state = 'running';
    member.starts++;
    const start = member.starts;
    for (const stream of [proc.stdout, proc.stderr]) {
      let buffer = '';
      stream?.on('data', (chunk: Buffer) => {
        buffer += chunk.toString();
        const parts = buffer.split('\n');
        buffer = parts.pop() ?? '';
        member.output.push(...parts.map((line) => `[${index}#${start}] ${line}`));
      });
    }
    proc.once('exit', (code, signal) => {
      member.output.push(`[${index}#${start}] exited: ${signal ?? code}`);
      if (member.proc === proc) {
        member.proc = undefined;
        if (member.state === 'running') member.state = 'stopped';
      }
    });
    const deadline = Date.now() + (this.#options.startTimeoutMs ?? 30_000);
    while ((await this.status(index)) === undefined) {
      if (member.proc !== proc) {
        throw new Error(`member ${index} exited on start:\n${member.output.join('\n')}`);
      }
      if (Date.now() > deadline) {
        throw new Error(`member ${index} did not answer its status:\n${member.output.join('\n')}`);
      }
      await sleep(50);
    }
    return member;
  }

  /** The member's `GET /status`; undefined when it does not answer within `timeoutMs`. */
  async status(index: number, timeoutMs = 1_000): Promise<MemberStatus | undefined> {
    const member = this.#member(index);
    if (member.state !== 'running') return undefined;
    try {
      const res = await fetch(`http://127.0.0.1:${member.httpPort}/status`, {
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (!res.ok) return undefined;
      const status = (await res.json()) as Record<string, unknown>;
      const ha = status.ha as { role?: unknown; token?: unknown } | undefined;
      return {
        role: typeof ha?.role === 'string' ? ha.role : 'standalone',
        token: typeof ha?.token === 'number' ? ha.token : undefined,
        status,
      };
    } catch {
      return undefined;
    }
  }

  /**
   * The member serving now: the one that says master (the largest token if a resumed one has
   * not noticed yet) or standalone. Waits up to `timeoutMs` for one.
   */
  async master(timeoutMs = 30_000): Promise<Member & { token: number | undefined }> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const statuses = await Promise.all(this.members.map((m) => this.status(m.index)));
      let best: { member: Member; token: number | undefined } | undefined;
      for (const [i, s] of statuses.entries()) {
        if (s === undefined || (s.role !== 'master' && s.role !== 'standalone')) continue;
        if (best === undefined || (s.token ?? 0) > (best.token ?? 0))
          best = { member: this.#member(i), token: s.token };
      }
      if (best !== undefined) return Object.assign(best.member, { token: best.token });
      if (Date.now() > deadline) {
        throw new Error(
          `no master within ${timeoutMs} ms; members: ${this.members.map((m) => m.state).join(', ')}\n${this.output()}`,
        );
      }
      await sleep(100);
    }
  }

  /** `kill -9`; resolves once the process is gone. */
  async kill9(index: number): Promise<void> {
    const member = this.#member(index);
    const proc = member.proc;
    if (proc === undefined) return;
    member.state = 'killed';
    const exited = exitOf(proc);
    proc.kill('SIGKILL');
    await exited;
  }

  /** SIGSTOP: the process stops dead, holding whatever it held. */
  pause(index: number): void {
    const member = this.#member(index);
    if (member.state !== 'running' || member.proc === undefined) {
      throw new Error(`member ${index} is ${member.state}`);
    }
    member.proc.kill('SIGSTOP');
    member.state = 'paused';
  }

  /** SIGCONT of a paused member. */
  resume(index: number): void {
    const member = this.#member(index);
    if (member.state !== 'paused' || member.proc === undefined) {
      throw new Error(`member ${index} is ${member.state}`);
    }
    member.proc.kill('SIGCONT');
    member.state = 'running';
  }

  /** SIGTERM (a member's orderly leaving); resolves once the process is gone. */
  async terminate(index: number): Promise<void> {
    const member = this.#member(index);
    const proc = member.proc;
    if (proc === undefined) return;
    member.state = 'stopped';
    const exited = exitOf(proc);
    proc.kill('SIGTERM');
    await exited;
  }

  /** Stops every member: SIGCONT a paused one, SIGTERM, then SIGKILL after `graceMs`. */
  async stop(graceMs = 5_000): Promise<void> {
    await Promise.all(
      this.members.map(async (member) => {
        const proc = member.proc;
        if (proc === undefined) return;
        if (member.state === 'paused') proc.kill('SIGCONT');
        member.state = 'stopped';
        const exited = exitOf(proc);
        proc.kill('SIGTERM');
        const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
        await exited;
        clearTimeout(timer);
      }),
    );
  }

  /** The last lines of every member's output, for a failure message. */
  output(lines = 40): string {
    return this.members.map((m) => m.output.slice(-lines).join('\n')).join('\n');
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

const workloadScript = join(repoRoot, 'dist-test/test/ha/workload-client.js');

/**
 * Runs a workload client (workload-client.ts) to its end; resolves with its output, rejects
 * if it exits non-zero.
 */
export async function runWorkload(args: readonly string[]): Promise<string> {
  const proc = orphanProof(
    spawn(process.execPath, [workloadScript, ...args], { stdio: ['ignore', 'pipe', 'pipe'] }),
  );
  let output = '';
  for (const stream of [proc.stdout, proc.stderr]) {
    stream?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
  }
  const { code, signal } = await exitOf(proc);
  if (code !== 0) throw new Error(`workload client exited ${signal ?? code}: ${output}`);
  return output;
}
