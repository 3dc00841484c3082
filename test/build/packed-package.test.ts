/**
 * The package as a user gets it: `npm pack`, unpacked into a scratch project outside the
 * clone, imported by its name. Each subpath must resolve with TypeScript's default settings,
 * with the older `node10` resolution of TypeScript 5's defaults (which reads `typesVersions`),
 * and with `nodenext` and `bundler` (which read `exports`), and load in Node. The scratch project borrows the clone's installed
 * dependencies (linked, not downloaded), so the test needs no network.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { repoRoot } from '../helpers.js';

const NAME = 'locksmith-locks';
const SUBPATHS = ['', '/directory', '/store', '/rows', '/client', '/server', '/os'] as const;

/** One value each subpath must export (what a user imports first). */
const FIRST_EXPORT: Record<(typeof SUBPATHS)[number], string> = {
  '': 'LocksmithError',
  '/directory': 'FSDirectory',
  '/store': 'createLocker',
  '/rows': 'Region',
  '/client': 'connect',
  '/server': 'LocksmithServer',
  '/os': 'lockHolders',
};

describe('the packed package, installed by name outside the clone', () => {
  let scratch = '';
  const tsc = join(repoRoot, 'node_modules/typescript/bin/tsc');

  before(() => {
    scratch = mkdtempSync(join(tmpdir(), 'locksmith-pack-'));
    const packed = JSON.parse(
      execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', scratch], {
        cwd: repoRoot,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    ) as { filename: string; name: string }[];
    assert.equal(packed[0]?.name, NAME);
    const modules = join(scratch, 'node_modules');
    const target = join(modules, NAME);
    mkdirSync(target, { recursive: true });
    execFileSync('tar', [
      '-xzf',
      join(scratch, packed[0].filename),
      '-C',
      target,
      '--strip-components=1',
    ]);
    // The dependencies (and @types/node, typescript) from the clone, linked by name.
    for (const entry of readdirSync(join(repoRoot, 'node_modules'))) {
      if (entry === '.bin' || entry === NAME || entry.startsWith('.')) continue;
      symlinkSync(join(repoRoot, 'node_modules', entry), join(modules, entry));
    }
    writeFileSync(
      join(scratch, 'package.json'),
      JSON.stringify({ name: 'scratch', private: true, type: 'module' }),
    );
  });

  after(() => {
    if (scratch !== '') rmSync(scratch, { recursive: true, force: true });
  });

  it('is named locksmith-locks and installs the command locksmith', () => {
    const pkg = JSON.parse(
      readFileSync(join(scratch, 'node_modules', NAME, 'package.json'), 'utf8'),
    );
    assert.equal(pkg.name, NAME);
    assert.deepEqual(Object.keys(pkg.bin), ['locksmith']);
    const help = execFileSync(
      process.execPath,
      [join(scratch, 'node_modules', NAME, pkg.bin.locksmith), '--help'],
      {
        encoding: 'utf8',
      },
    );
    assert.match(help, /locksmith/);
  });

  const source = SUBPATHS.map(
    (sub, i) => `import { ${FIRST_EXPORT[sub]} as e${i} } from '${NAME}${sub}';`,
  ).join('\n');

  it('every subpath type-checks with TypeScript defaults, the older node10 resolution (typesVersions), nodenext and bundler (exports)', () => {
    const file = join(scratch, 'check.ts');
    writeFileSync(
      file,
      `${source}\nexport const all: unknown[] = [${SUBPATHS.map((_, i) => `e${i}`).join(', ')}];\n`,
    );
    const run = (extra: string[]) => {
      try {
        execFileSync(
          process.execPath,
          [tsc, '--noEmit', '--strict', '--types', 'node', ...extra, file],
          {
            cwd: scratch,
            encoding: 'utf8',
            stdio: ['ignore', 'pipe', 'pipe'],
          },
        );
      } catch (err) {
        const e = err as { stdout?: string; stderr?: string };
        assert.fail(`tsc ${extra.join(' ') || '(defaults)'} failed:\n${e.stdout}${e.stderr}`);
      }
    };
    run([]);
    // TypeScript 5's defaults (and a tsconfig with "module": "commonjs"): the older resolution,
    // which never reads "exports"; the subpaths resolve through "typesVersions".
    run(['--module', 'commonjs', '--moduleResolution', 'node10', '--ignoreDeprecations', '6.0']);
    run(['--module', 'nodenext', '--moduleResolution', 'nodenext']);
    run(['--module', 'esnext', '--moduleResolution', 'bundler']);
  });

  it('every subpath loads in Node by its name and exports what it should', () => {
    const file = join(scratch, 'check.mjs');
    writeFileSync(
      file,
      `${source}\nfor (const e of [${SUBPATHS.map((_, i) => `e${i}`).join(', ')}]) if (typeof e !== 'function') throw new Error('missing export');\nconsole.log('ok');\n`,
    );
    const out = execFileSync(process.execPath, [file], { cwd: scratch, encoding: 'utf8' });
    assert.equal(out.trim(), 'ok');
  });

  it('a name that is not an entry point is refused (no deep imports into dist)', () => {
    const file = join(scratch, 'deep.mjs');
    writeFileSync(file, `await import('${NAME}/dist/core/index.js');\n`);
    assert.throws(
      () => execFileSync(process.execPath, [file], { cwd: scratch, stdio: 'pipe' }),
      /ERR_PACKAGE_PATH_NOT_EXPORTED/,
    );
  });
});
