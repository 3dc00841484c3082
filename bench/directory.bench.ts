/**
 * Directory-lock benchmarks: `npm run bench:directory` (a script, never a test). Runs, in this
 * order, each part of which is also a script of its own:
 *
 * 1. Uncontended obtain+release (bench/directory-obtain-release.bench.ts).
 * 2. Two-process handoff latency and the CPU of a waiting process
 *    (bench/directory-handoff.bench.ts).
 * 3. Stress throughput against Lucene (bench/directory-stress.bench.ts).
 *
 *   node dist-test/bench/directory.bench.js [1] [2] [3]   (default: all)
 *
 * Prints Markdown tables (ratios included) and a goals table; docs/benchmarks.md records a run.
 * Missed goals are reported, not fatal: the exit code is non-zero only when something broke.
 */
import { handoffAndWaiterCpu } from './directory-handoff.bench.js';
import { obtainRelease } from './directory-obtain-release.bench.js';
import { stressAgainstLucene } from './directory-stress.bench.js';
import { runDirectoryBench } from './directory-support.js';

await runDirectoryBench([obtainRelease, handoffAndWaiterCpu, stressAgainstLucene]);
