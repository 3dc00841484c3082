// A client process of the linearizability check: through a locksmith cluster, it
// increments random counters, writes its own register with increasing values and reads random
// registers, one operation at a time, and logs each with its times and outcome (history.ts).
//
// Usage:
//   node dist-test/test/ha/workload-client.js --addresses locksmith://h:p,h:p --table T
//     --client NAME --duration MS --keys N --out FILE.jsonl [--peers A,B,...] [--op-timeout MS]
//     [--seed N] [--final] [--locked [--hold MS]]
// Counters are rows `ctr-0` .. `ctr-<N-1>` (column f:n, 8-byte big-endian, the row store's
// increment); registers are rows `reg-<client>` (column f:v, the value as decimal text), each
// written only by its client. `--peers` names the clients whose registers it reads (default:
// itself). `--final` reads every counter once instead (retrying until a read succeeds: a read
// changes nothing), for the final values, and exits. `--locked` increments by hand under an
// explicit row lock instead, the way a user guards a resource the lock does not fence: lock
// `mutex-<i>`, read `ctr-<i>`, put the value + 1 (a plain put: only the lock orders it), then
// unlock; two holders of one mutex at once show as a lost or doubled increment. `--hold`
// waits that long between the read and the put (the work a holder does under its lock: the
// window in which a second holder makes an increment lost). It keeps one
// client for the whole run (sessions resumed across failovers are counted, not re-created) and
// prints how many times its session was resumed and lost.
//
// An operation whose outcome is unknown is never retried: it is logged `info` and the loop
// moves on (a write's next value is the next one either way). Every operation has a bounded
// timeout (`--op-timeout`, default 5 s). Connection trouble never ends the loop: the client
// reconnects, and follows the master, by itself; after a few failures in a row, or when the
// client gave up, this process makes a new client over the same addresses. A client without
// the list form of `connect` gets the addresses one at a time, in turn.
// Exits 0 after `--duration`, having logged every operation it made (the file is complete).
import { parseArgs } from 'node:util';
import { connect, type LocksmithClient } from '../../src/client/locksmith-client.js';
import { Get, Put } from '../../src/rows/index.js';
import { seeded, sleep } from '../helpers.js';
import { HistoryWriter, historyNow, type Op, type OpKind, outcomeOf } from './history.js';

const { values } = parseArgs({
  options: {
    addresses: { type: 'string' },
    table: { type: 'string' },
    client: { type: 'string' },
    duration: { type: 'string', default: '10000' },
    keys: { type: 'string', default: '4' },
    out: { type: 'string' },
    peers: { type: 'string' },
    'op-timeout': { type: 'string', default: '5000' },
    seed: { type: 'string' },
    final: { type: 'boolean', default: false },
    locked: { type: 'boolean', default: false },
    hold: { type: 'string', default: '0' },
  },
});
const usage = (why: string): never => {
  process.stderr.write(`workload-client: ${why}\n`);
  process.exit(2);
};
const number = (name: string, text: string | undefined, min: number): number => {
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < min) usage(`--${name} must be an integer >= ${min}`);
  return n;
};
const addresses = values.addresses ?? usage('--addresses is required');
const tableName = values.table ?? usage('--table is required');
const name = values.client ?? usage('--client is required');
const out = values.out ?? usage('--out is required');
const durationMs = number('duration', values.duration, 0);
const keys = number('keys', values.keys, 1);
const opTimeoutMs = number('op-timeout', values['op-timeout'], 1);
const holdMs = number('hold', values.hold, 0);
const peers = (values.peers ?? name).split(',').filter((p) => p !== '');
const random = seeded(values.seed === undefined ? Date.now() : number('seed', values.seed, 0));
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;

/** Each address as its own URL: `locksmith://a:1,b:2` → `locksmith://a:1`, `locksmith://b:2`. */
const scheme = /^(locksmiths?:\/\/)/.exec(addresses)?.[1] ?? 'locksmith://';
const singles = addresses
  .slice(scheme.length)
  .split(',')
  .map((hostPort) => `${scheme}${hostPort}`);
/** Whether `connect` took the list form; false once it refused it (before client failover). */
let listForm = singles.length > 1;
let nextSingle = 0;

const log = new HistoryWriter(out);
const counts = { ok: 0, info: 0, fail: 0, reconnects: 0, resumed: 0, lost: 0 };
let client: LocksmithClient | undefined;
let troubles = 0;
/** Clients this process closed itself. */
const closedHere = new WeakSet<LocksmithClient>();

function closeClient(c: LocksmithClient | undefined): Promise<void> {
  if (c === undefined) return Promise.resolve();
  closedHere.add(c);
  return c.close().catch(() => undefined);
}

/** A new client over the addresses; undefined when none answered this time. */
async function newClient(): Promise<LocksmithClient | undefined> {
  const options = {
    name,
    callTimeoutMs: opTimeoutMs,
    connectTimeoutMs: listForm ? 10_000 : 2_000,
    // Longer than a failover with a paused master takes, so that the session outlives it.
    sessionLeaseMs: values.locked ? 20_000 : 10_000,
  };
  if (listForm) {
    try {
      const made = await connect(addresses, options);
      made.on('connected', (resumed) => {
        if (resumed) counts.resumed++;
      });
      made.on('sessionLost', () => {
        // Closing a client ends its session: that loss is this process's own doing.
        if (!closedHere.has(made)) counts.lost++;
      });
      return made;
    } catch (err) {
      if ((err as { code?: string }).code !== 'INVALID_ARGUMENT') return undefined;
      listForm = false; // this client takes one address at a time
    }
  }
  const url = singles[nextSingle++ % singles.length] as string;
  return connect(url, options).catch(() => undefined);
}

function dropClient(): void {
  const old = client;
  client = undefined;
  troubles = 0;
  counts.reconnects++;
  closeClient(old).catch(() => undefined);
}

/** Runs one operation and logs it; the op is never retried. */
async function run(
  op: OpKind,
  key: string,
  call: (signal: AbortSignal) => Promise<number | null | undefined>,
  value?: number,
): Promise<Op['outcome']> {
  const entry: Op = {
    client: name,
    op,
    key,
    ...(value === undefined ? {} : { value }),
    invokeAt: historyNow(),
    completeAt: 0,
    outcome: 'ok',
  };
  try {
    const result = await call(AbortSignal.timeout(opTimeoutMs));
    entry.completeAt = historyNow();
    if (result !== undefined) entry.result = result;
    troubles = 0;
  } catch (err) {
    entry.completeAt = historyNow();
    const { outcome, error } = outcomeOf(err);
    entry.outcome = outcome;
    entry.error = error;
    // The client is closed for good, or keeps failing: make a new one (never under --locked,
    // whose point is that the one session lives through the failovers).
    const closed = /client is closed/.test((err as Error).message);
    if (closed || (++troubles >= 3 && !values.locked)) dropClient();
  }
  log.append(entry);
  counts[entry.outcome]++;
  return entry.outcome;
}

async function ready(): Promise<LocksmithClient> {
  while (client === undefined) {
    client = await newClient();
    if (client === undefined) await sleep(100);
  }
  return client;
}

const counter = (i: number) => `ctr-${i}`;

async function readCounter(key: string): Promise<Op['outcome']> {
  const table = (await ready()).table(tableName);
  return run('read', key, async (signal) => {
    const cell = (await table.get(new Get(key), { signal })).getValue('f', 'n');
    return cell === undefined ? null : Number(cell.readBigInt64BE(0));
  });
}

/**
 * lock `mutex-<i>`, read `ctr-<i>`, put + 1, unlock: logged as one `incr` of `ctr-<i>`. Until
 * the put is sent nothing can have been written, so a failure before it is `fail`; after it,
 * the outcome is the put's.
 */
async function lockedIncr(i: number): Promise<Op['outcome']> {
  const table = (await ready()).table(tableName);
  const key = counter(i);
  let putSent = false;
  const entry: Op = {
    client: name,
    op: 'incr',
    key,
    invokeAt: historyNow(),
    completeAt: 0,
    outcome: 'ok',
  };
  const signal = AbortSignal.timeout(opTimeoutMs);
  let lock: Awaited<ReturnType<typeof table.lockRow>> | undefined;
  try {
    lock = await table.lockRow(`mutex-${i}`, { waitMs: opTimeoutMs, signal });
    const cell = (await table.get(new Get(key), { signal })).getValue('f', 'n');
    const next = (cell === undefined ? 0 : Number(cell.readBigInt64BE(0))) + 1;
    if (holdMs > 0) await sleep(holdMs);
    const value = Buffer.alloc(8);
    value.writeBigInt64BE(BigInt(next));
    lock.ensureValid();
    putSent = true;
    await table.put(new Put(key).add('f', 'n', value), { signal });
    entry.completeAt = historyNow();
    entry.result = next;
    troubles = 0;
  } catch (err) {
    entry.completeAt = historyNow();
    const { outcome, error } = outcomeOf(err);
    entry.outcome = putSent ? outcome : 'fail';
    entry.error = error;
    if (/client is closed/.test((err as Error).message)) dropClient();
  }
  await lock?.close().catch(() => undefined);
  log.append(entry);
  counts[entry.outcome]++;
  return entry.outcome;
}

if (values.final) {
  for (let i = 0; i < keys; i++) {
    const deadline = Date.now() + 60_000;
    while ((await readCounter(counter(i))) !== 'ok') {
      if (Date.now() > deadline) usage(`no final read of ${counter(i)} within 60 s`);
      await sleep(100);
    }
  }
} else if (values.locked) {
  const end = Date.now() + durationMs;
  while (Date.now() < end) {
    if ((await lockedIncr(Math.floor(random() * keys))) !== 'ok') await sleep(50);
  }
} else {
  const own = `reg-${name}`;
  let seq = 0;
  const end = Date.now() + durationMs;
  while (Date.now() < end) {
    const table = (await ready()).table(tableName);
    const key = counter(Math.floor(random() * keys));
    const outcomes = [
      await run('incr', key, async (signal) =>
        Number(await table.incrementColumnValue(key, 'f', 'n', 1, { signal })),
      ),
    ];
    const written = ++seq;
    const writeTable = (await ready()).table(tableName);
    outcomes.push(
      await run(
        'write',
        own,
        async (signal) => {
          await writeTable.put(new Put(own).add('f', 'v', String(written)), { signal });
          return undefined;
        },
        written,
      ),
    );
    const peer = `reg-${pick(peers)}`;
    const readTable = (await ready()).table(tableName);
    outcomes.push(
      await run('read', peer, async (signal) => {
        const cell = (await readTable.get(new Get(peer), { signal })).getValue('f', 'v');
        return cell === undefined ? null : Number(cell.toString());
      }),
    );
    // Trouble: do not spin while the cluster fails over.
    if (outcomes.some((o) => o !== 'ok')) await sleep(50);
  }
}

log.close();
await closeClient(client);
process.stdout.write(
  `done ${name}: ok ${counts.ok}, info ${counts.info}, fail ${counts.fail}, new clients ${counts.reconnects}, sessions resumed ${counts.resumed}, lost ${counts.lost}\n`,
);
process.exit(0);
