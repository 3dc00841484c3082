import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { repoRoot } from '../helpers.js';
import { cycles, valueImports } from './import-graph.js';

const run = promisify(execFile);

/**
 * The built modules that are programs: loading one runs it (the CLI, and the helper processes
 * that are started as `node <file>`), so they are left out; their tests start them.
 */
const PROGRAMS = new Set([
  'cli/main.js',
  'os/exec-with-parent-death.js',
  'os/command-watchdog-process.js',
]);

function builtModules(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.js'))
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort();
}

describe('every module loads on its own', () => {
  it('src/ has no cycle of value imports (type-only imports may go both ways)', () => {
    const found = cycles(valueImports(join(repoRoot, 'src')));
    assert.deepEqual(
      found.map((c) => c.join(' -> ')),
      [],
      'a module in a value cycle loads only when another module of the cycle is imported first',
    );
  });

  it('the row store never imports the network client, and locksmith/rows does not load it', () => {
    const src = join(repoRoot, 'src');
    const graph = valueImports(src);
    for (const [module, deps] of graph) {
      if (!module.startsWith('rows/')) continue;
      const text = readFileSync(join(src, module), 'utf8');
      assert.doesNotMatch(text, /from '\.\.\/client\//, `${module} imports the client`);
      assert.ok(!deps.some((d) => d.startsWith('client/')), module);
    }
    // What loading locksmith/rows loads: its static value imports, transitively.
    const loaded = new Set<string>();
    const visit = (m: string) => {
      if (loaded.has(m)) return;
      loaded.add(m);
      for (const d of graph.get(m) ?? []) visit(d);
    };
    visit('entries/rows.ts');
    assert.ok(loaded.has('rows/region.ts'));
    assert.deepEqual(
      [...loaded].filter((m) => m.startsWith('client/') || m.startsWith('wire/')),
      [],
    );
  });

  it('the cycle finder finds a cycle (negative control)', () => {
    const graph = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', ['a.ts']],
    ]);
    assert.deepEqual(cycles(graph), [['a.ts', 'b.ts', 'c.ts', 'a.ts']]);
  });

  it('each built module, imported alone in a fresh process, loads', async () => {
    const dist = join(repoRoot, 'dist');
    const modules = builtModules(dist);
    assert.ok(modules.length > 100, `${modules.length} modules in dist/`);
    for (const name of PROGRAMS) assert.ok(modules.includes(name), `${name} is built`);
    const failures: string[] = [];
    const queue = modules.filter((m) => !PROGRAMS.has(m));
    const worker = async () => {
      for (let m = queue.shift(); m !== undefined; m = queue.shift()) {
        const url = new URL(`file://${join(dist, m)}`).href;
        try {
          await run(
            process.execPath,
            ['--input-type=module', '-e', `await import(${JSON.stringify(url)});`],
            {
              timeout: 60_000,
            },
          );
        } catch (err) {
          const e = err as { stderr?: string; message: string };
          const line = (e.stderr ?? e.message).split('\n').find((l) => /Error/.test(l));
          failures.push(`${m}: ${line ?? e.message}`);
        }
      }
    };
    await Promise.all([worker(), worker(), worker()]);
    assert.deepEqual(failures, []);
  });
});
