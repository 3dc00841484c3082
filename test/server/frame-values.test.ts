/**
 * A frame within the byte limit but holding millions of tiny MessagePack values is refused
 * before it is decoded (decoding it would hold the event loop for seconds): a PROTOCOL_ERROR
 * closes that connection, and every other client goes on being served.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Get, Put } from '../../src/rows/index.js';
import { encode } from '../../src/wire/codec.js';
import { frame } from '../../src/wire/frame.js';
import { RawClient } from './raw-client.js';
import { client, startServer } from './server-fixture.js';

describe('values per frame', () => {
  it('a 16 MiB put of 2.3 million empty cells is a PROTOCOL_ERROR, refused undecoded', async () => {
    await using server = await startServer();
    await using other = await client(server);
    await other.createTable('t', ['f']);
    const { raw } = await RawClient.session(server.port);
    try {
      const cells = Array.from({ length: 2_300_000 }, () => ['f', '', Buffer.alloc(0), null]);
      const bytes = frame(encode([1, 2, 'put', ['t', ['r', null, null, cells]]]));
      assert.ok(bytes.length < 16 * 1024 * 1024, 'within the default frame limit');
      raw.sendBytes(bytes);
      const error = await raw.next((m) => m[0] === 2, 30_000);
      assert.equal(error[2], 'PROTOCOL_ERROR');
      assert.match(String(error[3]), /more than 1250000 MessagePack values/);
      await raw.whenClosed(30_000);
      await other.table('t').put(new Put('r').add('f', 'q', 'still served'));
      const got = await other.table('t').get(new Get('r'));
      assert.equal(got.getValue('f', 'q')?.toString(), 'still served');
    } finally {
      raw.destroy();
    }
  });
});
