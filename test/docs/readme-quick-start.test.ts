/**
 * README's quick-start with the shell, run as written (in `sh`, from the repository's root,
 * against a fresh server named by LOCKSMITH_SERVER), three times: the put under another
 * session's lock waits for the lock every time (its line comes after the holder's, at least the
 * hold's 3 s later, at the clock's one-second resolution), and every command succeeds.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '../helpers.js';
import { startServer } from '../server/server-fixture.js';

function quickStart(): string[] {
  const text = readFileSync(join(repoRoot, 'README.md'), 'utf8');
  const start = text.indexOf('try it with the shell:');
  assert.ok(start >= 0, 'README has the quick-start with the shell');
  const block = /```sh\n([\s\S]*?)```/.exec(text.slice(start))?.[1] ?? '';
  const lines = block.split('\n').filter((l) => l.startsWith('node dist/cli/main.js '));
  assert.ok(
    lines.some((l) => l.includes(' rows lock ')),
    'the quick-start takes a lock',
  );
  return lines;
}

function sh(script: string, env: NodeJS.ProcessEnv): Promise<{ code: number; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', script], {
      cwd: repoRoot,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, out }));
  });
}

const seconds = (hms: string) => {
  const [h, m, s] = hms.split(':').map(Number) as [number, number, number];
  return h * 3600 + m * 60 + s;
};

test("README's quick-start shows the put waiting for the lock, every time", async () => {
  const lines = quickStart();
  for (let round = 0; round < 3; round++) {
    await using server = await startServer();
    const env = { ...process.env, LOCKSMITH_SERVER: `127.0.0.1:${server.port}` };
    const outputs: string[] = [];
    for (const line of lines) {
      const { code, out } = await sh(line, env);
      assert.equal(code, 0, `${line}\n${out}`);
      outputs.push(out);
    }
    const all = outputs.join('');
    const held = /^row1 held at (\d\d:\d\d:\d\d)$/m.exec(all)?.[1];
    const done = /^put done at (\d\d:\d\d:\d\d)$/m.exec(all)?.[1];
    assert.ok(held !== undefined && done !== undefined, all);
    assert.ok(all.indexOf('row1 held') < all.indexOf('put done'), all);
    // The hold is 3 s; the clock prints whole seconds, so at least 2 of them show between.
    const waited = (seconds(done) - seconds(held) + 86_400) % 86_400;
    assert.ok(waited >= 2, `the put finished ${waited} s after the lock was held:\n${all}`);
    assert.match(all, /value=again/, 'the put landed once the lock was released');
  }
});
