/**
 * The cluster harness and the workload clients on a standalone `locksmith serve` (no --ha):
 * the harness starts it, finds it by its status, pauses, resumes, kills and restarts it on the
 * same ports with its data intact; workload clients run through a kill -9 and restart of the
 * server, and their histories pass the linearizability checker with the final counter values.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { connect } from '../../src/client/locksmith-client.js';
import { Get, Put } from '../../src/rows/index.js';
import { sleep, tempDir } from '../helpers.js';
import { Cluster, runWorkload } from './cluster.js';
import { type Op, readHistories } from './history.js';
import { checkHistory, formatViolations, summarize } from './linearizability.js';

describe('cluster harness on a standalone server', () => {
  it('starts, finds, pauses, resumes, kills and restarts a server; its data survives', async () => {
    using dir = tempDir();
    await using cluster = await Cluster.start({ size: 1, dataDir: dir.path });
    const master = await cluster.master(10_000);
    assert.equal(master.index, 0);
    assert.equal((await cluster.status(0))?.role, 'standalone');
    {
      await using client = await connect(master.url);
      await client.createTable('t', ['f']);
      await client.table('t').put(new Put('r').add('f', 'q', 'kept'));
    }

    cluster.pause(0);
    assert.equal(await cluster.status(0, 500), undefined, 'a paused server does not answer');
    cluster.resume(0);
    assert.equal((await cluster.status(0, 5_000))?.role, 'standalone');

    await cluster.kill9(0);
    assert.equal(cluster.members[0]?.state, 'killed');
    assert.equal(await cluster.status(0), undefined);
    const again = await cluster.restart(0);
    assert.equal(again.port, master.port, 'restarted on the same port');
    await using client = await connect(again.url);
    const value = (await client.table('t').get(new Get('r'))).getValue('f', 'q');
    assert.equal(value?.toString(), 'kept');
  });

  it('workload clients through a kill -9 and restart: the checker passes their histories', async (t) => {
    using dir = tempDir();
    await using cluster = await Cluster.start({ size: 1, dataDir: dir.path });
    const master = await cluster.master(10_000);
    {
      await using client = await connect(master.url);
      await client.createTable('w', ['f']);
    }
    const names = ['a', 'b', 'c'];
    const common = ['--addresses', cluster.addresses, '--table', 'w', '--keys', '3'];
    const files = names.map((name) => join(dir.path, `${name}.jsonl`));
    const clients = names.map((name, i) =>
      runWorkload([
        ...common,
        ...['--client', name, '--duration', '4000', '--out', files[i] as string],
        ...['--peers', names.join(','), '--op-timeout', '3000', '--seed', String(i + 1)],
      ]),
    );
    await sleep(1_500);
    await cluster.kill9(0);
    await sleep(300);
    await cluster.restart(0);
    const outputs = await Promise.all(clients);
    const finalFile = join(dir.path, 'final.jsonl');
    await runWorkload([...common, '--client', 'final', '--out', finalFile, '--final']);

    const history = readHistories([...files, finalFile]);
    const result = checkHistory(history, { clockSlackMs: 1, requireFinalReads: true });
    assert.deepEqual(
      result.violations,
      [],
      `${formatViolations(result.violations)}\n${summarize(result)}\n${outputs.join('')}`,
    );
    const ok = history.filter((op) => op.outcome === 'ok' && op.op === 'incr').length;
    assert.ok(ok > 10, `few increments acknowledged: ${summarize(result)}\n${outputs.join('')}`);
    assert.equal(result.counters.size, 3);
    t.diagnostic(summarize(result).replaceAll('\n', '; '));

    // The same real history, corrupted: an acknowledged increment lost, one applied twice.
    const final = history.find((op) => op.client === 'final' && op.key === 'ctr-0') as Op;
    const lost = history.map((op) => (op === final ? { ...op, result: (op.result ?? 0) - 1 } : op));
    assert.ok(
      checkHistory(lost).violations.some(
        (v) => v.kind === 'lost-increment' || v.kind === 'counter-order',
      ),
    );
    const [x, y] = history.filter(
      (op) => op.op === 'incr' && op.outcome === 'ok' && op.key === 'ctr-0',
    );
    assert.ok(x !== undefined && y !== undefined);
    const twice = history.map((op) => (op === y ? { ...op, result: x.result as number } : op));
    assert.ok(checkHistory(twice).violations.some((v) => v.kind === 'duplicate-increment'));
  });
});
