/**
 * Directory locks, part 3: stress throughput, `locksmith stress` + `locksmith verify-server`
 * against Lucene's LockStressTest + LockVerifyServer (Java), same machine, same run.
 * `node dist-test/bench/directory-stress.bench.js` (also part 3 of `npm run bench:directory`,
 * a script, never a test). The Java side is skipped without `java` or the Lucene core jar
 * (`LUCENE_CORE_JAR`).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { type DirectoryPart, goals, runDirectoryBench, work } from './directory-support.js';
import { fmt, isMain, median, nowNs, ratio, repoRoot, say, sleep, table } from './support.js';

const STRESS_TRIES = 20_000;
const STRESS_RUNS = 5;

const cliPath = join(repoRoot, 'dist/cli/main.js');

class Skip extends Error {}

interface StressResult {
  wallMs: number;
  fromGunMs: number | undefined;
}

/** Lucene's core jar: $LUCENE_CORE_JAR, else Debian's liblucene8-java location. */
function luceneJar(): string | undefined {
  const fromEnv = process.env.LUCENE_CORE_JAR;
  if (fromEnv !== undefined && existsSync(fromEnv)) return fromEnv;
  const dir = '/usr/share/java';
  if (existsSync(join(dir, 'lucene-core.jar'))) return join(dir, 'lucene-core.jar');
  if (!existsSync(dir)) return undefined;
  const versioned = readdirSync(dir)
    .filter((f) => /^lucene-core-\d[\d.]*\.jar$/.test(f))
    .sort();
  const last = versioned.at(-1);
  return last === undefined ? undefined : join(dir, last);
}

function exited(p: ChildProcess): Promise<number | null> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve(p.exitCode);
  return new Promise((r) => p.once('exit', (code) => r(code)));
}

function collect(p: ChildProcess): () => string {
  let text = '';
  const add = (d: Buffer) => {
    text = (text + d.toString()).slice(-4000);
  };
  p.stdout?.on('data', add);
  p.stderr?.on('data', add);
  return () => text;
}

/**
 * One stress run: a verify server for 2 clients, then 2 stress clients started together.
 * Wall time runs from spawning the clients to both exiting (runtime startup included);
 * `fromGunMs` from the server's "fire gun" line (all clients registered) to both exiting.
 */
async function stressRun(
  server: string[],
  client: (id: number, port: number, dir: string) => string[],
  tag: string,
): Promise<StressResult> {
  const dir = join(work, `stress-${tag}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const [serverCmd = '', ...serverArgs] = server;
  const srv = spawn(serverCmd, serverArgs, { stdio: ['ignore', 'pipe', 'pipe'] });
  const serverOutput = collect(srv);
  try {
    let gun: bigint | undefined;
    const port = await new Promise<number>((resolvePort, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no "Listening" line: ${serverOutput()}`)),
        20_000,
      );
      srv.once('error', (err) => {
        clearTimeout(timer);
        reject(new Skip(`cannot start ${serverCmd}: ${err.message}`));
      });
      srv.once('exit', () => {
        clearTimeout(timer);
        const out = serverOutput();
        reject(
          /not implemented/i.test(out)
            ? new Skip('stress CLI not available')
            : new Error(`server exited: ${out}`),
        );
      });
      createInterface({ input: srv.stdout }).on('line', (line) => {
        const m = /Listening on .*:(\d+)/.exec(line);
        if (m?.[1] !== undefined) {
          clearTimeout(timer);
          resolvePort(Number(m[1]));
        }
        if (/fire gun/i.test(line)) gun ??= nowNs();
      });
    });
    const start = nowNs();
    const clients = [1, 2].map((id) => {
      const [cmd = '', ...args] = client(id, port, dir);
      const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      return { p, output: collect(p) };
    });
    const codes = await Promise.all(clients.map((c) => exited(c.p)));
    const end = nowNs();
    for (const [i, code] of codes.entries()) {
      if (code === 0) continue;
      const out = clients[i]?.output() ?? '';
      throw /not implemented/i.test(out)
        ? new Skip('stress CLI not available')
        : new Error(`client ${i + 1} exited ${code}: ${out}`);
    }
    const serverCode = await Promise.race([
      exited(srv),
      sleep(10_000).then(() => 'timeout' as const),
    ]);
    if (serverCode !== 0)
      throw new Error(`verify server ended with ${serverCode}: ${serverOutput()}`);
    return {
      wallMs: Number(end - start) / 1e6,
      fromGunMs: gun === undefined ? undefined : Number(end - gun) / 1e6,
    };
  } finally {
    if (srv.exitCode === null && srv.signalCode === null) srv.kill('SIGKILL');
  }
}

async function stress(): Promise<void> {
  say(`## 3. Stress: 2 processes × ${STRESS_TRIES} tries, sleep 0, with the verify server`);
  say();
  // Both sides take Lucene's command lines: server `<host> <clients>`, client `<id> <host>
  // <port> <factory> <dir> <sleep ms> <tries>`.
  const serverArgs = ['127.0.0.1', '2'];
  const factory = 'org.apache.lucene.store.NativeFSLockFactory';
  const clientArgs = (id: number, port: number, dir: string) => [
    String(id),
    '127.0.0.1',
    String(port),
    factory,
    dir,
    '0',
    String(STRESS_TRIES),
  ];
  const ourServer = [process.execPath, cliPath, 'verify-server', ...serverArgs];
  const ourClient = (id: number, port: number, dir: string) => [
    process.execPath,
    cliPath,
    'stress',
    ...clientArgs(id, port, dir),
  ];
  const jar = luceneJar();
  const java = spawnSync('java', ['-version'], { encoding: 'utf8' });
  let javaSkip: string | undefined;
  if (java.error !== undefined || java.status !== 0) javaSkip = 'skipped: java not found';
  else if (jar === undefined) javaSkip = 'skipped: lucene-core jar not found (set LUCENE_CORE_JAR)';
  const javaServer = [
    'java',
    '-cp',
    jar ?? '',
    'org.apache.lucene.store.LockVerifyServer',
    ...serverArgs,
  ];
  const javaClient = (id: number, port: number, dir: string) => [
    'java',
    '-cp',
    jar ?? '',
    'org.apache.lucene.store.LockStressTest',
    ...clientArgs(id, port, dir),
  ];

  const runs: { ours: StressResult[]; java: StressResult[] } = { ours: [], java: [] };
  let ourSkip: string | undefined;
  for (let i = 0; i < STRESS_RUNS; i++) {
    if (javaSkip === undefined) {
      process.stderr.write(`  stress: Lucene run ${i + 1}/${STRESS_RUNS}\n`);
      try {
        runs.java.push(await stressRun(javaServer, javaClient, `java-${i}`));
      } catch (err) {
        if (!(err instanceof Skip)) throw err;
        javaSkip = `skipped: ${err.message}`;
      }
    }
    if (ourSkip === undefined) {
      process.stderr.write(`  stress: locksmith run ${i + 1}/${STRESS_RUNS}\n`);
      try {
        runs.ours.push(await stressRun(ourServer, ourClient, `ours-${i}`));
      } catch (err) {
        if (!(err instanceof Skip)) throw err;
        ourSkip = `skipped: ${err.message}`;
      }
    }
  }
  const totalTries = 2 * STRESS_TRIES;
  const row = (name: string, list: StressResult[], skip: string | undefined) => {
    if (skip !== undefined || list.length === 0) return [name, skip ?? 'skipped', '', '', '', ''];
    const wall = median(list.map((r) => r.wallMs));
    const guns = list.flatMap((r) => (r.fromGunMs === undefined ? [] : [r.fromGunMs]));
    const gun = guns.length > 0 ? median(guns) : undefined;
    return [
      name,
      fmt(wall / 1000),
      fmt(totalTries / (wall / 1000)),
      gun === undefined ? 'n/a' : fmt(gun / 1000),
      gun === undefined ? 'n/a' : fmt(totalTries / (gun / 1000)),
      list.map((r) => fmt(r.wallMs / 1000)).join(' '),
    ];
  };
  say(
    table(
      ['implementation', 'wall s', 'tries/s', 'from gun s', 'tries/s from gun', 'runs (wall s)'],
      [
        row('locksmith stress + verify-server (Node)', runs.ours, ourSkip),
        row('Lucene 8.7 LockStressTest + LockVerifyServer (Java)', runs.java, javaSkip),
      ],
    ),
  );
  say();
  say(
    `Median of ${STRESS_RUNS} alternating runs. Wall: spawning both clients to both exiting (runtime start`,
  );
  say('included). From gun: the server printing "fire gun" (both registered) to both exiting.');
  say();
  if (
    ourSkip !== undefined ||
    javaSkip !== undefined ||
    runs.ours.length === 0 ||
    runs.java.length === 0
  ) {
    goals.push({
      what: 'stress tries/s vs Lucene',
      goal: 'ours ≥ Lucene',
      measured: ourSkip ?? javaSkip ?? 'skipped',
      met: undefined,
    });
    return;
  }
  const ourWall = median(runs.ours.map((r) => r.wallMs));
  const javaWall = median(runs.java.map((r) => r.wallMs));
  goals.push({
    what: 'stress tries/s vs Lucene (wall)',
    goal: 'ours ≥ Lucene',
    measured: `${ratio(javaWall / ourWall)} Lucene's (${fmt(totalTries / (ourWall / 1000))} vs ${fmt(totalTries / (javaWall / 1000))} tries/s)`,
    met: ourWall <= javaWall,
  });
}

export const stressAgainstLucene: DirectoryPart = {
  key: '3',
  name: '3. stress',
  run: () => stress(),
};

if (isMain(import.meta.url)) await runDirectoryBench([stressAgainstLucene]);
