/**
 * Store-locker benchmarks: `npm run bench:store` (a script, never a test). Runs, in this order,
 * each part of which is also a script of its own:
 *
 * 1. Failover (bench/store-failover.bench.ts, parts `fast` and `default`): a master and a
 *    standby process per locker, from the kill or stop to the standby being master.
 *    The same failover for ActiveMQ Classic's and Kubernetes client-go's defaults, as a model
 *    (bench/store-failover-model.bench.ts, part `model`), not a measurement.
 * 2. Round trips (bench/store-round-trips.bench.ts, part `micro`): the lease locker's
 *    operations against the database's own cheapest lock.
 *
 *   node dist-test/bench/store.bench.js [fast] [default] [model] [micro]   (default: all)
 *
 * Environment: LOCKSMITH_TEST_POSTGRES, LOCKSMITH_TEST_MYSQL (the URLs), STORE_BENCH_SAMPLES
 * (fast-configuration samples per locker and stop mode, default 7).
 *
 * Every lock table is `LOCK_BENCH_<random>_<n>` and dropped at the end; every child process is
 * killed at the end, also on error or Ctrl-C.
 */
import { defaultFailover, fastFailover } from './store-failover.bench.js';
import { failoverModel } from './store-failover-model.bench.js';
import { roundTrips } from './store-round-trips.bench.js';
import { runStoreBench } from './store-support.js';

await runStoreBench([fastFailover, defaultFailover, failoverModel, roundTrips]);
