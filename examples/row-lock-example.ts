// HBase: The Definitive Guide, example 3.17 (RowLockExample), on locksmith's row store:
// `npx tsx examples/row-lock-example.ts` from the clone, after `npm install` (which builds
// `dist/`, where `locksmith/rows` resolves to).
//
// The main task locks row1; a second task's put to row1 without the lock blocks until the
// main task, after sleeping 5 s, has put val1 and val2 with the lock and unlocked the row.
// `timestampOnArrival` reproduces HBase 0.90: the blocked put's time was read when it
// arrived, so val3 ends up about 5 s older than val1 although it was written last.
import { setTimeout as sleep } from 'node:timers/promises';
import { formatCell, Get, Put, Region } from 'locksmith-locks/rows';

const ROW1 = 'row1';
const COLFAM1 = 'colfam1';
const QUAL1 = 'qual1';

const table = await Region.open({
  families: ['colfam1', 'colfam2'],
  timestampOnArrival: true,
  ...(process.argv[2] === undefined ? {} : { dir: process.argv[2] }),
});

async function unlockedPut(): Promise<void> {
  const put = new Put(ROW1).add(COLFAM1, QUAL1, 'val3');
  const time = Date.now();
  console.log('Thread trying to put same row now...');
  await table.put(put);
  console.log(`Wait time: ${Date.now() - time}ms`);
}

console.log('Taking out lock...');
const lock = await table.lockRow(ROW1);
console.log(`Lock ID: ${lock.lockId}`);
// Like Java's thread.start(): the second task begins on a later turn of the event loop.
const thread = new Promise((resolve) => setImmediate(resolve)).then(unlockedPut);
try {
  console.log('Sleeping 5secs in main()...');
  await sleep(5000);
  await table.put(new Put(ROW1, { rowLock: lock }).add(COLFAM1, QUAL1, 'val1'));
  await table.put(new Put(ROW1, { rowLock: lock }).add(COLFAM1, QUAL1, 'val2'));
} catch (err) {
  console.error(`Error: ${err}`);
} finally {
  console.log('Releasing lock...');
  await table.unlockRow(lock);
}
await thread;
console.log('After thread ended...');

// HBaseHelper.dump: every version of row1.
const result = await table.get(new Get(ROW1).setMaxVersions());
for (const kv of result.cells) {
  console.log(`KV: ${formatCell(kv)}, Value: ${kv.value.toString()}`);
}
await table.close();
