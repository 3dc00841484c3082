/**
 * TLS: `locksmith serve --tls-cert --tls-key` with a self-signed certificate (made here with
 * openssl; skipped, saying so, where openssl is missing) serves a client that connects with
 * `locksmiths://localhost:PORT` and `tls: { ca }`, locks included; a plain client, and a TLS
 * client that does not trust the certificate, fail with errors that say why; in a list of
 * addresses, one whose certificate is not trusted is skipped for the next.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { connect } from '../../src/client/locksmith-client.js';
import { Get, Put } from '../../src/rows/index.js';
import { startServeProcess } from '../fixtures/serve-process.js';
import { tempDir } from '../helpers.js';
import { deadPort } from './dead-port.js';
import { selfSigned } from './self-signed.js';
import { startServer } from './server-fixture.js';

describe('TLS', () => {
  it('serves locksmiths:// with a trusted certificate; plain and untrusting clients fail clearly', async (t) => {
    using dir = tempDir('locksmith-tls-');
    const files = selfSigned(dir.path);
    if (typeof files === 'string') {
      t.skip(`skipped: ${files}; this test needs openssl to make a self-signed certificate`);
      return;
    }
    const server = await startServeProcess(join(dir.path, 'data'), [
      '--tls-cert',
      files.cert,
      '--tls-key',
      files.key,
    ]);
    try {
      assert.match(server.url, /^locksmiths:\/\//);
      const url = `locksmiths://localhost:${server.port}`;
      const ca = readFileSync(files.cert);
      await using a = await connect(url, { tls: { ca } });
      await using b = await connect(url, { tls: { ca } });
      await a.createTable('t', ['f']);
      const lock = await a.table('t').lockRow('r');
      assert.equal(await b.table('t').tryLockRow('r'), null, 'the lock holds over TLS');
      await a.table('t').put(new Put('r', { rowLock: lock as never }).add('f', 'q', 'over tls'));
      await lock.close();
      const result = await b.table('t').get(new Get('r'));
      assert.equal(result.getValue('f', 'q')?.toString(), 'over tls');

      // A plain client: the server speaks TLS only.
      await assert.rejects(
        connect(`locksmith://localhost:${server.port}`, { connectTimeoutMs: 2_000 }),
        (err: Error & { code?: string }) => {
          assert.equal(err.code, 'CONNECTION_LOST');
          assert.match(err.message, /use locksmiths:\/\//);
          return true;
        },
      );
      // A TLS client that does not trust the certificate fails at once, saying so.
      await assert.rejects(connect(url, { connectTimeoutMs: 20_000 }), (err: Error) => {
        assert.match(err.message, /certificate .* is not trusted: self[- ]signed certificate/);
        assert.match(err.message, /tls: \{ ca \}/);
        return true;
      });
      // In a list, that address is skipped like any other that fails: the next one is reached.
      {
        await using plain = await startServer();
        await using client = await connect([url, plain.url], { connectTimeoutMs: 20_000 });
        assert.equal(client.master, `127.0.0.1:${plain.port}`);
      }
      // And when none works, the error gives the certificate as that address's reason.
      const dead = `locksmith://127.0.0.1:${await deadPort()}`;
      // Both fail at once (a refused certificate, a refused connection): a long bound costs
      // nothing, and a short one can run out on a busy machine before the second is tried.
      await assert.rejects(connect([url, dead], { connectTimeoutMs: 20_000 }), (err: Error) => {
        assert.match(
          err.message,
          new RegExp(
            `localhost:${server.port}: TLS: the certificate of localhost:${server.port} is not trusted`,
          ),
        );
        assert.match(err.message, /ECONNREFUSED/);
        return true;
      });
    } finally {
      await server.kill9();
    }
  });
});
