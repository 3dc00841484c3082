/**
 * README's "The command line" shows what `locksmith help` prints, line for line, and names
 * every subcommand of the row shell: a new flag or command that is missing from the README
 * fails here.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROWS_SUBCOMMANDS } from '../../src/cli/usage.js';
import { cliPath, repoRoot, run } from '../helpers.js';

function readmeSection(): string {
  const text = readFileSync(join(repoRoot, 'README.md'), 'utf8');
  const start = text.indexOf('\n## The command line\n');
  assert.ok(start >= 0, 'README has "## The command line"');
  return text.slice(start, text.indexOf('\n## ', start + 1));
}

test("README's command synopsis is `locksmith help`'s, and it names every rows subcommand", async () => {
  const help = await run([cliPath, 'help']);
  assert.equal(help.code, 0, help.stderr);
  const fromHelp = help.stdout
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('locksmith '));
  const section = readmeSection();
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
  const fromReadme = block.split('\n').filter((l) => l.startsWith('locksmith '));
  assert.deepEqual(fromReadme, fromHelp);
  for (const sub of Object.keys(ROWS_SUBCOMMANDS)) {
    assert.ok(section.includes(`\`${sub}\``), `README names rows ${sub}`);
  }
});
