import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import {
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  truncateSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { FENCE_LEAD_MICROS, readFenceCounter } from '../../src/directory/fence-token-file.js';
import { exitOf, fixture, orphanProof, sleep, tempDir } from '../helpers.js';

/**
 * Fencing tokens must strictly increase across every grant on the machine, whatever happens
 * to `write.lock.fence` between grants, or the grant must fail with a clear LockIOError.
 * Every grant here runs in a real child process that keeps its fence descriptor cached across
 * grants, as a long-lived process does. Nothing is timed: the only time bound is the reply
 * timeout, far above any grant.
 */
const REPLY_MS = 60_000;

type Grant = { token: number } | { code: string; message: string };

/** A child process (fixtures/fence-granter) that grants the lock when asked. */
class Granter {
  readonly #proc: ChildProcess;
  readonly #lines: string[] = [];
  #waiter: (() => void) | undefined;
  #buffer = '';

  private constructor(proc: ChildProcess) {
    this.#proc = proc;
    proc.stdout?.on('data', (chunk: Buffer) => {
      this.#buffer += chunk.toString();
      const parts = this.#buffer.split('\n');
      this.#buffer = parts.pop() ?? '';
      this.#lines.push(...parts);
      this.#waiter?.();
    });
    proc.once('exit', () => this.#waiter?.());
  }

  static async start(dir: string, factory = 'native'): Promise<Granter> {
    const proc = orphanProof(
      spawn(process.execPath, [fixture('fence-granter'), dir, factory], {
        stdio: ['pipe', 'pipe', 'inherit'],
      }),
    );
    const granter = new Granter(proc);
    assert.equal(await granter.#next(), 'ready');
    return granter;
  }

  async #next(): Promise<string> {
    const deadline = Date.now() + REPLY_MS;
    // The child is unref'd (orphanProof): a timer keeps this process alive while we wait.
    const keepAlive = setInterval(() => {}, 1000);
    try {
      for (;;) {
        const line = this.#lines.shift();
        if (line !== undefined) return line;
        if (this.#proc.exitCode !== null || this.#proc.signalCode !== null) {
          throw new Error(`granter exited (${this.#proc.exitCode ?? this.#proc.signalCode})`);
        }
        if (Date.now() > deadline) throw new Error('granter did not answer');
        await new Promise<void>((resolve) => {
          this.#waiter = resolve;
          setTimeout(resolve, 1000).unref();
        });
        this.#waiter = undefined;
      }
    } finally {
      clearInterval(keepAlive);
    }
  }

  /** `n` grants in a row in the child; the last token, or the first failure. */
  async grant(n = 1): Promise<Grant> {
    this.#proc.stdin?.write(`grant ${n}\n`);
    const line = await this.#next();
    const token = /^token (\d+)$/.exec(line);
    if (token !== null) return { token: Number(token[1]) };
    const error = /^error (\S+) (.*)$/.exec(line);
    assert.ok(error !== null, `unexpected reply ${JSON.stringify(line)}`);
    return { code: error[1] as string, message: JSON.parse(error[2] as string) as string };
  }

  async stop(): Promise<void> {
    this.#proc.stdin?.end();
    const { code } = await exitOf(this.#proc);
    assert.equal(code, 0);
  }
}

/** Tracks every token issued so far and asserts each new one is above all of them. */
class Tokens {
  readonly all: number[] = [];
  max = Number.NEGATIVE_INFINITY;

  accept(grant: Grant, what: string): number {
    assert.ok('token' in grant, `${what}: the grant failed: ${JSON.stringify(grant)}`);
    assert.ok(
      Number.isSafeInteger(grant.token) && grant.token > this.max,
      `${what}: token ${grant.token} is not above ${this.max}, an earlier one (grant ${this.all.length + 1})`,
    );
    this.all.push(grant.token);
    this.max = grant.token;
    return grant.token;
  }
}

function assertRefused(grant: Grant, pattern: RegExp, what: string): void {
  assert.ok('code' in grant, `${what}: expected a refusal, got token ${JSON.stringify(grant)}`);
  assert.equal(grant.code, 'IO_ERROR', what);
  assert.match(grant.message, /write\.lock\.fence/, what);
  assert.match(grant.message, pattern, what);
}

const GRANTS = 20;

/** What happens to the fence file between two grants; `old` is a copy taken after grant 1. */
const mutations: [string, (fence: string, old: string) => void][] = [
  ['deleted', (fence) => rmSync(fence, { force: true })],
  ['truncated', (fence) => truncateSync(fence, 0)],
  ['overwritten with garbage', (fence) => writeFileSync(fence, 'not a counter\n')],
  [
    'overwritten with a small counter',
    (fence) => writeFileSync(fence, `${'1'.padStart(20, '0')}\n`),
  ],
  [
    'replaced by an older copy of itself',
    (fence, old) => {
      writeFileSync(`${fence}.new`, old);
      renameSync(`${fence}.new`, fence);
    },
  ],
  [
    'replaced by an empty file',
    (fence) => {
      writeFileSync(`${fence}.new`, '');
      renameSync(`${fence}.new`, fence);
    },
  ],
];

for (const factory of ['native', 'simple']) {
  for (const [what, mutate] of mutations) {
    if (factory === 'simple' && !/deleted|older copy/.test(what)) continue;
    test(`${factory}: two processes alternating, the fence file ${what} before every grant: every token above all earlier ones`, async () => {
      using tmp = tempDir();
      const fence = join(tmp.path, 'write.lock.fence');
      const granters = [
        await Granter.start(tmp.path, factory),
        await Granter.start(tmp.path, factory),
      ];
      const tokens = new Tokens();
      tokens.accept(await (granters[0] as Granter).grant(), 'grant 1');
      const old = readFileSync(fence, 'latin1');
      tokens.accept(await (granters[1] as Granter).grant(), 'grant 2');
      for (let i = 2; i < GRANTS; i++) {
        mutate(fence, old);
        tokens.accept(await (granters[i % 2] as Granter).grant(), `${what}, grant ${i + 1}`);
        // A burst from the same process between mutations: it issues from its reservation.
        if (i % 5 === 0) tokens.accept(await (granters[i % 2] as Granter).grant(50), 'burst');
      }
      for (const g of granters) await g.stop();
    });
  }
}

for (const [what, plant, pattern] of [
  [
    'a symbolic link (to a file holding a valid counter)',
    (fence: string) => {
      writeFileSync(`${fence}.target`, `${'7'.padStart(20, '0')}\n`);
      symlinkSync(`${fence}.target`, fence);
    },
    /symbolic link/,
  ],
  [
    'a dangling symbolic link',
    (fence: string) => symlinkSync(`${fence}.nowhere`, fence),
    /symbolic link/,
  ],
  ['a directory', (fence: string) => mkdirSync(fence), /not a regular file/],
] as const) {
  test(`native: the fence file replaced by ${what}: grants fail with IO_ERROR until it is removed, then tokens go on above all earlier ones`, async () => {
    using tmp = tempDir();
    const fence = join(tmp.path, 'write.lock.fence');
    const granters = [await Granter.start(tmp.path), await Granter.start(tmp.path)];
    const tokens = new Tokens();
    for (let i = 0; i < 4; i++) tokens.accept(await (granters[i % 2] as Granter).grant(), 'before');
    rmSync(fence);
    plant(fence);
    for (let i = 0; i < 4; i++) {
      assertRefused(await (granters[i % 2] as Granter).grant(), pattern, `${what}, grant ${i}`);
    }
    // A process that never saw the file refuses too, and nothing followed the link.
    const third = await Granter.start(tmp.path);
    assertRefused(await third.grant(), pattern, `${what}, a new process`);
    if (what.startsWith('a symbolic link')) {
      assert.equal(readFileSync(`${fence}.target`, 'latin1'), `${'7'.padStart(20, '0')}\n`);
    }
    rmSync(fence, { recursive: true });
    for (let i = 0; i < 4; i++) {
      tokens.accept(await ([...granters, third][i % 3] as Granter).grant(), 'after removal');
    }
    for (const g of [...granters, third]) await g.stop();
  });
}

test('native: 300 alternations keep the counter and every token within the lead over the clock; a third process after a delete, a fourth after garbage still issue above all', async () => {
  using tmp = tempDir();
  const fence = join(tmp.path, 'write.lock.fence');
  const granters = [await Granter.start(tmp.path), await Granter.start(tmp.path)];
  const tokens = new Tokens();
  // Date.now() may lag the µs clock the tokens use by up to 1 ms.
  const slack = FENCE_LEAD_MICROS + 1000;
  for (let i = 0; i < 300; i++) {
    const token = tokens.accept(await (granters[i % 2] as Granter).grant(), `alternation ${i + 1}`);
    const now = Date.now() * 1000;
    assert.ok(
      token <= now + slack,
      `token ${token} leads the clock ${now} by more than ${slack} µs`,
    );
  }
  const counter = readFenceCounter(join(tmp.path, 'write.lock'));
  assert.ok(counter !== undefined && counter >= tokens.max, 'the counter covers every token');
  const now = Date.now() * 1000;
  assert.ok(
    counter <= now + slack,
    `counter ${counter} leads the clock ${now} by more than ${slack} µs`,
  );

  unlinkSync(fence);
  const third = await Granter.start(tmp.path);
  tokens.accept(await third.grant(), 'a third process, the fence file deleted');
  writeFileSync(fence, 'garbage');
  const fourth = await Granter.start(tmp.path);
  tokens.accept(await fourth.grant(), 'a fourth process, the fence file garbled');
  for (let i = 0; i < 4; i++) {
    tokens.accept(await ([...granters, third, fourth][i] as Granter).grant(), 'all four again');
  }
  for (const g of [...granters, third, fourth]) await g.stop();
});

test('native: the fence file moved away, a new one used by another process, then moved back: the first process notices and issues above', async () => {
  using tmp = tempDir();
  const fence = join(tmp.path, 'write.lock.fence');
  const first = await Granter.start(tmp.path);
  const tokens = new Tokens();
  tokens.accept(await first.grant(), 'first');
  // Past one ctime tick of any kernel, so the rename gives the file a new ctime (the documented
  // limit is a move away and back within one tick of the last write).
  await sleep(50);
  renameSync(fence, `${fence}.away`);
  const second = await Granter.start(tmp.path);
  tokens.accept(await second.grant(), 'second, on a new fence file');
  tokens.accept(await second.grant(20), 'second again');
  unlinkSync(fence);
  renameSync(`${fence}.away`, fence);
  tokens.accept(await first.grant(), 'first, its own file back in place');
  tokens.accept(await second.grant(), 'second, on the file moved back');
  for (const g of [first, second]) await g.stop();
});

test('native: a counter far ahead of the clock is continued from; one too large to continue refuses the grant', async () => {
  using tmp = tempDir();
  const fence = join(tmp.path, 'write.lock.fence');
  const granter = await Granter.start(tmp.path);
  const tokens = new Tokens();
  tokens.accept(await granter.grant(), 'first');
  // As after the wall clock was set back by a day: the stored counter still rules.
  const ahead = Date.now() * 1000 + 86_400_000_000;
  writeFileSync(fence, `${String(ahead).padStart(20, '0')}\n`);
  const other = await Granter.start(tmp.path);
  // Every token issued is below the stored counter, so the next may be the counter itself.
  assert.ok(tokens.accept(await other.grant(), 'ahead') >= ahead);
  tokens.accept(await granter.grant(5), 'ahead, the first process');
  tokens.accept(await other.grant(5), 'ahead, again');
  writeFileSync(fence, `${String(2 ** 53 - 2).padStart(20, '0')}\n`);
  assertRefused(await granter.grant(), /too large/, 'at 2^53');
  for (const g of [granter, other]) await g.stop();
});
