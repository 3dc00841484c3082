/**
 * A server that answers with malformed values: the client reports the server's fault as a
 * `PROTOCOL_ERROR` (`ProtocolError`), never as the caller's `INVALID_ARGUMENT`. A scripted peer
 * speaks the frames, since a real server never sends them.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { connect } from '../../src/client/locksmith-client.js';
import { InvalidArgumentError, ProtocolError } from '../../src/core/errors.js';
import { Get, Scan } from '../../src/rows/index.js';
import { ScriptedPeer, welcome } from './scripted-peer.js';

/** Welcomes, then answers each method with what `answers` holds for it. */
function peer(answers: Record<string, unknown>) {
  return ScriptedPeer.start((c, m) => {
    if (m[0] === 0) c.send(welcome('s1', 1));
    else if (m[0] === 1) c.send([1, m[1], answers[m[2] as string] ?? null]);
  });
}

function serverFault(err: unknown): boolean {
  assert.ok(err instanceof ProtocolError, String(err));
  assert.ok(!(err instanceof InvalidArgumentError));
  assert.equal(err.code, 'PROTOCOL_ERROR');
  assert.match(err.message, /The server sent a malformed/);
  return true;
}

describe('a server that sends malformed values', () => {
  for (const [what, grant] of [
    ['a grant without a lock id', [123, 1, 60_000]],
    ['a grant with a string token', ['lock-1', 'one', 60_000]],
    ['a grant that is not an array', 'lock-1'],
  ] as const) {
    it(`${what}: tryLockRow fails with PROTOCOL_ERROR`, async () => {
      await using server = await peer({ tryLockRow: grant });
      await using client = await connect(server.url);
      await assert.rejects(client.table('t').tryLockRow('r'), serverFault);
    });
  }

  it('a malformed get result, scanner and counter: PROTOCOL_ERROR', async () => {
    await using server = await peer({
      get: ['row', 'not cells'],
      openScanner: ['s', 'not rows'],
      increment: ['row', []],
    });
    await using client = await connect(server.url);
    const table = client.table('t');
    await assert.rejects(table.get(new Get('row')), serverFault);
    await assert.rejects(
      (async () => {
        for await (const _ of table.scan(new Scan())) {
        }
      })(),
      serverFault,
    );
    await assert.rejects(table.incrementColumnValue('row', 'f', 'q', 1), serverFault);
  });
});
