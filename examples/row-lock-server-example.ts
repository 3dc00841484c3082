// HBase: The Definitive Guide, example 3.17 (RowLockExample), over the network: two client
// processes of one `locksmith serve`. Start a server (`npx locksmith serve --data ./data`), then
// `npx tsx examples/row-lock-server-example.ts [locksmith://127.0.0.1:7420]` from the clone.
//
// This process (client 1) locks row1 with an explicit lock and starts a second process
// (client 2, the book's thread), whose put to row1 without the lock blocks on the server until
// client 1, after sleeping 5 s, has put val1 and val2 with the lock and unlocked the row.
// `timestampOnArrival` reproduces HBase 0.90: the blocked put's time was read when it arrived
// at the server, so val3 ends up about 5 s older than val1 although it was written last.
// Client 2's lines are relayed through this process's stdout, so the output reads like the
// seed's single-process run.
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { connect, formatCell, Get, Put } from 'locksmith-locks/client';

const TABLE = 'testtable';
const ROW1 = 'row1';
const COLFAM1 = 'colfam1';
const QUAL1 = 'qual1';
const THREAD_READY = 'Thread trying to put same row now...';

const url = process.argv[2] ?? 'locksmith://127.0.0.1:7420';
const client = await connect(url, { name: `row-lock-example ${process.argv[3] ?? 'main'}` });

if (process.argv[3] === 'thread') {
  // Client 2: HBase's UnlockedPut thread.
  const table = client.table(TABLE);
  const put = new Put(ROW1).add(COLFAM1, QUAL1, 'val3');
  const time = Date.now();
  console.log(THREAD_READY);
  await table.put(put);
  console.log(`Wait time: ${Date.now() - time}ms`);
  await client.close();
} else {
  // HBaseHelper: a fresh testtable with two families.
  await client.dropTable(TABLE).catch((err: { code?: string }) => {
    if (err.code !== 'TABLE_NOT_FOUND') throw err;
  });
  await client.createTable(TABLE, [COLFAM1, 'colfam2'], { timestampOnArrival: true });
  const table = client.table(TABLE);

  console.log('Taking out lock...');
  const lock = await table.lockRow(ROW1);
  console.log(`Lock ID: ${lock.lockId}`);
  const rowLock = lock;
  // Like Java's thread.start(), in a process of its own; its stdout is relayed line by line.
  const thread = spawn(
    process.execPath,
    [...process.execArgv, fileURLToPath(import.meta.url), url, 'thread'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let ready: () => void = () => undefined;
  const threadReady = new Promise<void>((resolve) => {
    ready = resolve;
  });
  const threadEnded = new Promise<number | null>((resolve) => thread.once('exit', resolve));
  void threadEnded.then(() => ready());
  let pending = '';
  thread.stdout.on('data', (chunk: Buffer) => {
    pending += chunk.toString();
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      console.log(line);
      if (line === THREAD_READY) ready();
    }
  });
  try {
    console.log('Sleeping 5secs in main()...');
    // The thread's put is on its way once it says so; the 5 s count from there, as in the
    // book, where the thread starts at once.
    await threadReady;
    await sleep(5000);
    await table.put(new Put(ROW1, { rowLock }).add(COLFAM1, QUAL1, 'val1'));
    await table.put(new Put(ROW1, { rowLock }).add(COLFAM1, QUAL1, 'val2'));
  } catch (err) {
    console.error(`Error: ${err}`);
  } finally {
    console.log('Releasing lock...');
    await table.unlockRow(lock);
  }
  const code = await threadEnded;
  if (code !== 0) console.error(`Error: the thread's process exited with ${code}`);
  console.log('After thread ended...');

  // HBaseHelper.dump: every version of row1.
  const result = await table.get(new Get(ROW1).setMaxVersions());
  for (const kv of result.cells) {
    console.log(`KV: ${formatCell(kv)}, Value: ${kv.value.toString()}`);
  }
  await client.close();
  if (code !== 0) process.exitCode = 1;
}
