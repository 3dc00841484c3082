/**
 * `createTable` sends the create again while a fleet refuses it with `NOT_SERVING_REGION` (a
 * table of that name was dropped a moment ago and its regions are still closing on another
 * member; nothing was made), until the call's timeout; any other refusal is the answer at once.
 * A scripted peer answers, since a real fleet refuses only in a window a test cannot hold open.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { connect } from '../../src/client/locksmith-client.js';
import { ScriptedPeer, welcome } from '../server/scripted-peer.js';

const TABLE = { name: 't', families: [{ name: 'f', maxVersions: 1 }], timestampOnArrival: false };

function refusal(id: unknown, code: string): unknown[] {
  return [2, id, code, `refused: ${code}`, code === 'NOT_SERVING_REGION', {}];
}

/** Refuses the first `refusals` creates with `code`, then makes the table. */
function peer(refusals: number, code = 'NOT_SERVING_REGION') {
  let creates = 0;
  return ScriptedPeer.start((c, m) => {
    if (m[0] === 0) c.send(welcome('s1', 1));
    else if (m[0] === 1 && m[2] === 'createTable') {
      creates++;
      c.send(creates <= refusals ? refusal(m[1], code) : [1, m[1], TABLE]);
    } else if (m[0] === 1) c.send([1, m[1], null]);
  });
}

function creates(server: ScriptedPeer): number {
  return server.received.filter((r) => r.message[0] === 1 && r.message[2] === 'createTable').length;
}

describe('createTable after a drop in a fleet', () => {
  it('is sent again while refused with NOT_SERVING_REGION, and then made', async () => {
    await using server = await peer(3);
    await using client = await connect(server.url);
    const made = await client.createTable('t', ['f']);
    assert.equal(made.name, 't');
    assert.equal(creates(server), 4);
  });

  it('gives up with NOT_SERVING_REGION at its timeout', async () => {
    await using server = await peer(Number.POSITIVE_INFINITY);
    await using client = await connect(server.url);
    await assert.rejects(client.createTable('t', ['f'], {}, { timeoutMs: 500 }), {
      code: 'NOT_SERVING_REGION',
    });
    // Pauses of 50, 100, 200 ms fit in 500 ms: more than one send, and not a busy loop.
    const sent = creates(server);
    assert.ok(sent >= 2 && sent <= 6, `${sent} creates sent`);
  });

  it('answers any other refusal at once', async () => {
    await using server = await peer(1, 'TABLE_EXISTS');
    await using client = await connect(server.url);
    await assert.rejects(client.createTable('t', ['f']), { code: 'TABLE_EXISTS' });
    assert.equal(creates(server), 1);
  });

  it('stops sending when its signal aborts', async () => {
    await using server = await peer(Number.POSITIVE_INFINITY);
    await using client = await connect(server.url);
    const aborting = new AbortController();
    setTimeout(() => aborting.abort(new Error('enough')), 300);
    await assert.rejects(client.createTable('t', ['f'], {}, { signal: aborting.signal }), {
      code: 'ABORTED',
    });
    const sent = creates(server);
    await new Promise((resolve) => setTimeout(resolve, 400));
    assert.equal(creates(server), sent, 'nothing sent after the abort');
  });
});
