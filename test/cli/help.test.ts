import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { cliPath, repoRoot, run } from '../helpers.js';

const COMMANDS = ['lock', 'status', 'elect', 'verify-server', 'stress', 'rows'];

test('--help and -h on every command print its usage on stdout and exit 0', async () => {
  for (const command of COMMANDS) {
    for (const flag of ['--help', '-h']) {
      const result = await run([cliPath, command, flag]);
      assert.equal(result.code, 0, `${command} ${flag}: ${result.stderr}`);
      assert.equal(result.stderr, '', `${command} ${flag}`);
      assert.match(result.stdout, new RegExp(`^Usage: locksmith ${command} `), command);
    }
  }
  // --help among other arguments is still help; after -- it belongs to the command.
  const mixed = await run([cliPath, 'lock', '/nonexistent/x', '--wait', '2s', '--help']);
  assert.equal(mixed.code, 0);
  assert.match(mixed.stdout, /^Usage: locksmith lock /);
});

test('every option in a command usage names its default', async () => {
  const lock = await run([cliPath, 'lock', '--help']);
  assert.match(lock.stdout, /--factory native\|simple .*\(default: native\)/);
  assert.match(lock.stdout, /--wait <duration> .*\(default: fail at once\)/);
  const status = await run([cliPath, 'status', '--help']);
  assert.match(status.stdout, /--name <lock> .*\(default: write\.lock\)/);
  assert.match(status.stdout, /--factory native\|simple .*\(default: native\)/);
  const elect = await run([cliPath, 'elect', '--help']);
  for (const option of ['table', 'lease', 'renew', 'acquire-interval', 'grace', 'fail-if-locked']) {
    assert.match(elect.stdout, new RegExp(`--${option}\\b.*default: `), option);
  }
});

test('help <command> is <command> --help; the top-level usage lists every synopsis', async () => {
  const top = await run([cliPath, 'help']);
  assert.equal(top.code, 0);
  for (const command of COMMANDS) {
    const viaHelp = await run([cliPath, 'help', command]);
    const viaFlag = await run([cliPath, command, '--help']);
    assert.equal(viaHelp.code, 0);
    assert.equal(viaHelp.stdout, viaFlag.stdout, command);
    // The synopsis line of the command usage appears as is in the top-level usage.
    const synopsis = (viaFlag.stdout.split('\n')[0] as string).replace(/^Usage: /, '');
    assert.ok(top.stdout.includes(`  ${synopsis}\n`), `${command} synopsis in top usage`);
  }
  assert.match(top.stdout, /locksmith status <dir> .*--factory native\|simple/);
  // Asking help for help, or for a subcommand, is not an error.
  const helpHelp = await run([cliPath, 'help', '--help']);
  assert.equal(helpHelp.code, 0);
  assert.equal(helpHelp.stdout, top.stdout);
  const sub = await run([cliPath, 'help', 'rows', 'put']);
  const subFlag = await run([cliPath, 'rows', 'put', '--help']);
  assert.equal(sub.code, 0, sub.stderr);
  assert.equal(sub.stdout, subFlag.stdout);
  assert.equal((await run([cliPath, 'help', 'rows', 'nope'])).code, 2);
  const unknown = await run([cliPath, 'help', 'nope']);
  assert.equal(unknown.code, 2);
  assert.equal(unknown.stderr.trim().split('\n').length, 1);
  assert.match(unknown.stderr, /\(INVALID_ARGUMENT\)\n$/);
});

test('--version prints the package version', async () => {
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
    version: string;
  };
  const result = await run([cliPath, '--version']);
  assert.equal(result.code, 0);
  assert.equal(result.stdout, `${pkg.version}\n`);
});

test('verify-server and stress: a bad value or a runtime failure is one line, exit 1, no usage', async () => {
  const cases: [string[], RegExp][] = [
    [['verify-server', '127.0.0.1', 'abc'], /clients must be an integer from 1 to 256, got "abc"/],
    [['verify-server', '10.255.255.1', '2'], /\((IO_ERROR|EADDRNOTAVAIL)\)$/],
    [
      ['stress', '0', '127.0.0.1', '1', 'native', '/tmp/x', 'abc', '1'],
      /sleepTimeMS must be an integer, 0 or more, got "abc"/,
    ],
    [['stress', '300', '127.0.0.1', '1', 'native', '/tmp/x', '1', '1'], /myID must be/],
    [['stress', '0', '127.0.0.1', 'x', 'native', '/tmp/x', '1', '1'], /verifierPort must be/],
    [['stress', '0', '127.0.0.1', '1', 'nope', '/tmp/x', '1', '1'], /Unknown lock factory "nope"/],
  ];
  for (const [args, message] of cases) {
    const result = await run([cliPath, ...args], { timeoutMs: 30_000 });
    assert.equal(result.code, 1, args.join(' '));
    const lines = result.stderr.trim().split('\n');
    assert.equal(lines.length, 1, `${args.join(' ')}: ${result.stderr}`);
    assert.match(lines[0] as string, new RegExp(`^locksmith ${args[0]}: `));
    assert.match(lines[0] as string, message);
    assert.doesNotMatch(result.stderr, /Usage:|NaN/);
  }
  // A wrong number of arguments is Lucene's usage error: the usage, exit 1.
  const wrong = await run([cliPath, 'stress', '0']);
  assert.equal(wrong.code, 1);
  assert.match(wrong.stderr, /^Usage: locksmith stress /);
});
