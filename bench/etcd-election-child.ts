/**
 * One candidate of etcd's own election, for bench/etcd-locker-failover.bench.ts (a fixture, never
 * run by itself): `node etcd-election-child.js <endpoints,comma-separated> <election> <ttl s>`.
 *
 * It runs Go's `concurrency.Election.Campaign` on the etcd3 client (the same recipe as
 * `concurrency.Mutex`, bench/etcd-support.ts's EtcdSession): a session lease of `ttl` seconds
 * kept alive by the client every TTL / 3, the key `<election>/<lease id hex>` put with it if
 * absent, and a wait for the deletion of every key under the election created before it (the
 * predecessor is watched). Prints `leader <ns>` (the CLOCK_MONOTONIC time, which the bench
 * shares) once it leads, then stays until killed; the bench sees its key in etcd.
 */
import { Etcd3 } from 'etcd3';
import { EtcdSession } from './etcd-support.js';
import { nowNs } from './support.js';

const [endpoints, election, ttl] = process.argv.slice(2);
if (endpoints === undefined || election === undefined || ttl === undefined) {
  process.stderr.write('usage: etcd-election-child <endpoints> <election> <ttl seconds>\n');
  process.exit(2);
}
const client = new Etcd3({ hosts: endpoints.split(',') });
const session = await EtcdSession.open(client, Number(ttl));
await session.lock(election);
process.stdout.write(`leader ${nowNs()}\n`);
// The lease keep-alive timer keeps the process alive until it is killed.
