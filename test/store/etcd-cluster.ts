// Not a test file: private etcd members and clusters on loopback ports in a temporary directory,
// for the etcd locker's tests. Every process started here is orphan-proof (killed when the test
// process exits) and killed by `close()`.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Etcd3, type IOptions } from 'etcd3';
import { orphanProof, sleep } from '../helpers.js';

export const ETCD = '/usr/bin/etcd';
export const ETCDCTL = '/usr/bin/etcdctl';

/** Why the etcd tests cannot run here, or undefined when they can. */
export function etcdMissing(): string | undefined {
  if (!existsSync(ETCD) || !existsSync(ETCDCTL)) {
    return 'etcd not installed: apt-get install etcd-server etcd-client';
  }
  const out = spawnSync(ETCD, ['--version'], { encoding: 'utf8' });
  if (out.error !== undefined || out.status !== 0) return `etcd --version failed: ${out.stderr}`;
  return undefined;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** One etcd member: its process, started again on the same data and ports by `restart()`. */
export class EtcdMember {
  readonly name: string;
  readonly clientUrl: string;
  readonly #args: string[];
  #proc: ChildProcess;
  #output = '';

  constructor(name: string, clientUrl: string, args: string[]) {
    this.name = name;
    this.clientUrl = clientUrl;
    this.#args = args;
    this.#proc = this.#spawn();
  }

  #spawn(): ChildProcess {
    const proc = orphanProof(spawn(ETCD, this.#args, { stdio: ['ignore', 'pipe', 'pipe'] }));
    for (const stream of [proc.stdout, proc.stderr]) {
      stream?.on('data', (chunk: Buffer) => {
        this.#output = (this.#output + chunk.toString()).slice(-8000);
      });
    }
    return proc;
  }

  get proc(): ChildProcess {
    return this.#proc;
  }

  /**
   * Starts a killed member again on its data directory (its WAL says which cluster it is in)
   * and waits until it answers a linearizable read, i.e. it has rejoined a quorum.
   */
  async restart(timeoutMs = 30_000): Promise<void> {
    if (this.alive) throw new Error(`etcd ${this.name} is still running`);
    this.#proc = this.#spawn();
    const deadline = Date.now() + timeoutMs;
    const c = new Etcd3({ hosts: this.clientUrl });
    try {
      for (;;) {
        if (!this.alive) throw new Error(`etcd ${this.name} exited:\n${this.#output}`);
        try {
          await c.get('test-probe').exec();
          return;
        } catch (err) {
          if (Date.now() > deadline) throw err;
          await sleep(50);
        }
      }
    } finally {
      c.close();
    }
  }

  get alive(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  get output(): string {
    return this.#output;
  }

  async kill9(): Promise<void> {
    if (!this.alive) return;
    // The child is unref'd (orphanProof): keep this process alive while we wait for it.
    const keepAlive = setInterval(() => {}, 1000);
    const exited = new Promise<void>((r) => this.proc.once('exit', () => r()));
    this.proc.kill('SIGKILL');
    await exited;
    clearInterval(keepAlive);
  }

  /** SIGSTOP: the member stops answering, its connections stay open. */
  pause(): void {
    if (this.alive) this.proc.kill('SIGSTOP');
  }

  resume(): void {
    if (this.alive) this.proc.kill('SIGCONT');
  }
}

/** PEM files of a test CA and of certificates it signed (see `makeCertificates`). */
export interface TestCertificates {
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
}

export interface EtcdClusterOptions {
  /** Raft heartbeat, ms (etcd's default 100). */
  heartbeatMs?: number;
  /** Raft election timeout, ms (etcd's default 1000). */
  electionMs?: number;
  /** Clients must speak TLS (https:// URLs) and show a certificate signed by `ca`. */
  tls?: TestCertificates;
}

/**
 * A throw-away CA (P-256) in `dir`, a server certificate for 127.0.0.1 and a client
 * certificate, both signed by it, valid for a day. Needs `openssl`.
 */
export function makeCertificates(dir: string, name = 'test'): TestCertificates {
  const ssl = (...args: string[]) => {
    const out = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    if (out.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${out.stderr}`);
  };
  const key = (file: string) =>
    ssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', file);
  key(`${name}-ca.key`);
  ssl(
    ...['req', '-x509', '-new', '-key', `${name}-ca.key`, '-out', `${name}-ca.crt`],
    ...['-days', '1', '-subj', `/CN=locksmith ${name} CA`],
  );
  const sign = (who: string, ext: string) => {
    key(`${name}-${who}.key`);
    ssl(
      ...['req', '-new', '-key', `${name}-${who}.key`, '-out', `${name}-${who}.csr`],
      ...['-subj', `/CN=locksmith-${who}`],
    );
    writeFileSync(join(dir, `${name}-${who}.ext`), ext);
    ssl(
      ...['x509', '-req', '-in', `${name}-${who}.csr`, '-CA', `${name}-ca.crt`],
      ...['-CAkey', `${name}-ca.key`, '-CAcreateserial', '-out', `${name}-${who}.crt`],
      ...['-days', '1', '-extfile', `${name}-${who}.ext`],
    );
  };
  sign('server', 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n');
  sign('client', 'extendedKeyUsage=clientAuth\n');
  const at = (f: string) => join(dir, `${name}-${f}`);
  return {
    ca: at('ca.crt'),
    serverCert: at('server.crt'),
    serverKey: at('server.key'),
    clientCert: at('client.crt'),
    clientKey: at('client.key'),
  };
}

/** `n` etcd members on 127.0.0.1, each with its own data directory under one temporary one. */
export class EtcdCluster {
  readonly members: EtcdMember[];
  readonly #dir: string;
  readonly #tls: TestCertificates | undefined;

  private constructor(members: EtcdMember[], dir: string, tls: TestCertificates | undefined) {
    this.members = members;
    this.#dir = dir;
    this.#tls = tls;
  }

  static async start(n: number, options: EtcdClusterOptions = {}): Promise<EtcdCluster> {
    const dir = mkdtempSync(join(tmpdir(), 'locksmith-etcd-'));
    const ports = [];
    for (let i = 0; i < n; i++) ports.push({ client: await freePort(), peer: await freePort() });
    const initial = ports.map((p, i) => `m${i}=http://127.0.0.1:${p.peer}`).join(',');
    const token = `test-${process.pid}-${Date.now()}`;
    const { tls } = options;
    const members = ports.map((p, i) => {
      const client = `${tls === undefined ? 'http' : 'https'}://127.0.0.1:${p.client}`;
      const peer = `http://127.0.0.1:${p.peer}`;
      const args = [
        ...['--name', `m${i}`, '--data-dir', join(dir, `m${i}`)],
        ...['--listen-client-urls', client, '--advertise-client-urls', client],
        ...['--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer],
        ...['--initial-cluster', initial, '--initial-cluster-state', 'new'],
        ...['--initial-cluster-token', token],
        ...['--heartbeat-interval', String(options.heartbeatMs ?? 100)],
        ...['--election-timeout', String(options.electionMs ?? 1000)],
        ...['--logger', 'zap', '--log-level', 'warn', '--log-outputs', 'stderr'],
        ...(tls === undefined
          ? []
          : [
              ...['--cert-file', tls.serverCert, '--key-file', tls.serverKey],
              ...['--trusted-ca-file', tls.ca, '--client-cert-auth'],
            ]),
      ];
      return new EtcdMember(`m${i}`, client, args);
    });
    const cluster = new EtcdCluster(members, dir, tls);
    const probe = cluster.client();
    try {
      const deadline = Date.now() + 30_000;
      for (;;) {
        for (const m of members) {
          if (!m.alive) {
            await cluster.close();
            throw new Error(`etcd ${m.name} exited:\n${m.output}`);
          }
        }
        try {
          await probe.kv.put(
            { key: Buffer.from('test-probe'), value: Buffer.from('1') },
            { deadline: Date.now() + 2000 },
          );
          break;
        } catch (err) {
          if (Date.now() > deadline) {
            await cluster.close();
            throw err;
          }
          await sleep(50);
        }
      }
    } finally {
      probe.close();
    }
    return cluster;
  }

  get endpoints(): string[] {
    return this.members.map((m) => m.clientUrl);
  }

  /** A client of every member (with the test client certificate when the cluster has TLS). */
  client(options: Partial<IOptions> = {}): Etcd3 {
    const tls = this.#tls;
    return new Etcd3({
      hosts: this.endpoints,
      ...(tls === undefined
        ? {}
        : {
            credentials: {
              rootCertificate: readFileSync(tls.ca),
              certChain: readFileSync(tls.clientCert),
              privateKey: readFileSync(tls.clientKey),
            },
          }),
      ...options,
    });
  }

  /** The member that is raft leader now (asked of every live member until one knows). */
  async leader(): Promise<EtcdMember> {
    for (const m of this.members.filter((x) => x.alive)) {
      const c = new Etcd3({ hosts: m.clientUrl });
      try {
        const status = await c.maintenance.status();
        if (status.header.member_id === status.leader) return m;
      } catch {
        // Try the next one.
      } finally {
        c.close();
      }
    }
    throw new Error('no leader');
  }

  async close(): Promise<void> {
    for (const m of this.members) {
      m.resume();
      await m.kill9();
    }
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
