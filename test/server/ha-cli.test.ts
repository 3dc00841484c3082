/**
 * `locksmith serve --ha`'s command line: the locker flags are checked as `elect` checks them
 * (one parser), they need `--ha`, and `--fail-if-locked` exits 1 while another server is master.
 * The library's `ha` option is checked as strictly, and works in process.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgumentError } from '../../src/core/errors.js';
import { LocksmithServer } from '../../src/server/server.js';
import { createLocker } from '../../src/store/create-locker.js';
import { cliPath, eventually, run, tempDir } from '../helpers.js';
import { masterToken, startHa } from './ha-fixture.js';
import { RawClient } from './raw-client.js';

describe('serve --ha command line', () => {
  it('refuses misplaced locker flags in one line, exit 2', async () => {
    using data = tempDir('locksmith-ha-cli-');
    const cases: [string[], RegExp][] = [
      [['--ha', 'zookeeper'], /unknown locker "zookeeper"/],
      [['--ha', 'shared-file', '--db', 'x.db'], /--db does not apply to --ha shared-file/],
      [['--ha', 'lease-database'], /--ha lease-database needs --db/],
      [['--lease', '2s'], /--lease applies only with --ha/],
      [['--fail-if-locked'], /--fail-if-locked applies only with --ha/],
      [['--ha', 'lease-database', '--db', 'x.db', '--lease', '4s', '--renew', '3s'], /3\/8/],
      [['--ha', 'shared-file', '--advertise', 'nohost'], /--advertise "nohost" is not host:port/],
      [['--ha', 'shared-file', '--renew', '-1s'], /cannot be negative/],
    ];
    for (const [args, message] of cases) {
      const { code, stderr } = await run([cliPath, 'serve', '--data', data.path, ...args]);
      assert.equal(code, 2, `${args.join(' ')}: ${stderr}`);
      assert.match(stderr, message, args.join(' '));
      assert.equal(stderr.trim().split('\n').length, 1, stderr);
    }
  });

  it('--fail-if-locked exits 1 while another server is master', async () => {
    using data = tempDir('locksmith-ha-cli-');
    const master = await startHa(data.path, ['--ha', 'shared-file']);
    try {
      await eventually(() => masterToken(master), 20_000, 'a master');
      const { code, stdout } = await run([
        cliPath,
        'serve',
        '--data',
        data.path,
        '--port',
        '0',
        '--ha',
        'shared-file',
        '--fail-if-locked',
      ]);
      assert.equal(code, 1, stdout);
      assert.match(stdout, /stopped: another server is master \(--fail-if-locked\)/);
    } finally {
      assert.equal(await master.proc.stop(), 0);
    }
  });
});

describe('LocksmithServer.listen ha option', () => {
  it('refuses a bad ha option before anything is opened', async () => {
    using data = tempDir('locksmith-ha-opt-');
    const locker = await createLocker({ kind: 'shared-file', directory: data.path });
    for (const ha of [
      {},
      { locker: {} },
      { locker, advertise: 'no-port' },
      { locker, keepAlivePeriodMs: -1 },
      { locker, other: 1 },
    ]) {
      await assert.rejects(
        LocksmithServer.listen({ dataDir: data.path, port: 0, ha: ha as never }),
        InvalidArgumentError,
        JSON.stringify(ha),
      );
    }
  });

  it('in process: listens as a slave at once, then serves as master with the token as epoch', async () => {
    using data = tempDir('locksmith-ha-opt-');
    const locker = await createLocker({ kind: 'shared-file', directory: data.path });
    await using server = await LocksmithServer.listen({
      dataDir: data.path,
      port: 0,
      ha: { locker },
    });
    await eventually(() => server.role === 'master', 10_000, 'mastership');
    const { raw, welcome } = await RawClient.session(server.port);
    assert.equal(welcome.role, 'master');
    assert.equal(welcome.epoch, locker.token);
    assert.equal(server.catalog.epoch, locker.token);
    raw.socket.destroy();
    const ha = server.status().ha as { role: string; token: number; locker: string };
    assert.equal(ha.role, 'master');
    assert.equal(ha.locker, locker.name);
  });
});
