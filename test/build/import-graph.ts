import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/**
 * The value imports between the modules of `src/`: for each module, the modules it imports
 * for their values. `import type`, and named imports that are all `type`, are left out: they
 * vanish from the built JavaScript, so they cannot make a module load before another.
 */
export function valueImports(srcDir: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of walk(srcDir)) {
    const text = readFileSync(file, 'utf8');
    const deps: string[] = [];
    const re = /^(import|export)\s+([\s\S]*?)\s+from\s+'(\.[^']+)';/gm;
    for (const m of text.matchAll(re)) {
      const clause = m[2] as string;
      if (/^type\s/.test(clause)) continue;
      const braces = /^\{([\s\S]*)\}$/.exec(clause.trim());
      if (braces !== null) {
        const names = (braces[1] as string)
          .split(',')
          .map((n) => n.trim())
          .filter((n) => n !== '');
        if (names.length > 0 && names.every((n) => n.startsWith('type '))) continue;
      }
      const target = resolve(dirname(file), (m[3] as string).replace(/\.js$/, '.ts'));
      deps.push(relative(srcDir, target));
    }
    graph.set(relative(srcDir, file), deps);
  }
  return graph;
}

/** Every cycle found by a depth-first walk, each as the list of modules around it. */
export function cycles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (node: string) => {
    state.set(node, 'open');
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      const s = state.get(next);
      if (s === 'open') found.push([...stack.slice(stack.indexOf(next)), next]);
      else if (s === undefined) visit(next);
    }
    stack.pop();
    state.set(node, 'done');
  };
  for (const node of [...graph.keys()].sort()) if (!state.has(node)) visit(node);
  return found;
}

function* walk(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(path);
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) yield path;
  }
}
