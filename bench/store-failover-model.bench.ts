/**
 * ActiveMQ Classic's and Kubernetes client-go's failover with their defaults, as a model of
 * their poll and renew loops (formulas and a seeded Monte Carlo), not a measurement:
 * `node dist-test/bench/store-failover-model.bench.js` (also part of `npm run bench:store`,
 * where it ends with our failover figures against these, p50 against p50).
 */
import { DEFAULT_ACQUIRE_INTERVAL_MS } from '../src/store/index.js';
// mulberry32: the model prints the same figures on every run.
import { seeded as prng } from '../test/helpers.js';
import type { FailoverRow, Scenario } from './store-failover.bench.js';
import { ms, runStoreBench, type StoreSection, sec } from './store-support.js';
import { isMain, median, percentile, ratio, say, sayTable, table } from './support.js';

/** Poll times of a loop with gaps drawn by `gap`, started long before 0 (stationary phase). */
function polls(gap: () => number, until: number): number[] {
  const out: number[] = [];
  let t = -120_000;
  while (t < until) {
    t += gap();
    out.push(t);
  }
  return out;
}

interface Model {
  system: string;
  settings: string;
  kill: Simulated;
  killFormula: string;
  graceful: Simulated;
  gracefulFormula: string;
}

interface Simulated {
  p50: number;
  text: string;
}

/** p50 and max of `trials` draws of `f` (ms). */
function simulate(f: (rand: () => number) => number, trials = 50_000): Simulated {
  const rand = prng(42);
  const values: number[] = [];
  for (let i = 0; i < trials; i++) values.push(f(rand));
  const p50 = percentile(values, 50);
  return { p50, text: `${sec(p50)} / ${sec(Math.max(...values))}` };
}

/**
 * The kill happens at time 0. Loops that sleep a fixed interval after each attempt poll at a
 * uniformly random phase; client-go's candidates poll with `wait.JitterUntil(RetryPeriod,
 * JitterFactor 1.2)`, i.e. gaps uniform in [2 s, 4.4 s), and its leader renews every
 * RetryPeriod (`wait.Until`). A client-go candidate counts the lease from the time it last
 * SAW the record change (`observedTime`), not from the renewal itself.
 */
function models(): Model[] {
  const amqInterval = DEFAULT_ACQUIRE_INTERVAL_MS;
  const firstAfter = (list: number[], t: number) => list.find((x) => x >= t) ?? Number.NaN;
  const fixedPoll = (rand: () => number) => rand() * amqInterval;
  const leaseRenew = 5_000;
  const k8sLease = 15_000;
  const retry = 2_000;
  const jitter = (rand: () => number) => () => retry + rand() * 1.2 * retry;
  const k8sKill = (rand: () => number) => {
    const lastRenew = -rand() * retry;
    const p = polls(jitter(rand), 60_000);
    const observed = firstAfter(p, lastRenew);
    return firstAfter(p, observed + k8sLease);
  };
  return [
    {
      system: 'ActiveMQ SharedFileLocker (KahaDB)',
      settings: 'lockAcquireSleepInterval 10 s, lockKeepAlivePeriod 0',
      kill: simulate(fixedPoll),
      killFormula: 'next poll: U(0, 10 s)',
      graceful: simulate(fixedPoll),
      gracefulFormula: 'next poll: U(0, 10 s)',
    },
    {
      system: 'ActiveMQ DefaultDatabaseLocker (JDBC)',
      settings: 'standby blocked in SELECT … FOR UPDATE; sleep 10 s after an error',
      kill: { p50: 0, text: '≈ 0 s / ≈ 0 s (PostgreSQL); 0 s / 10.00 s (MariaDB)' },
      killFormula:
        'the database frees the row when the session ends; no takeover pause. MariaDB: the wait times out every 50 s (innodb_lock_wait_timeout), then a 10 s sleep',
      graceful: { p50: 0, text: 'the same' },
      gracefulFormula: 'rollback and close free the row',
    },
    {
      system: 'ActiveMQ LeaseDatabaseLocker',
      settings: 'lease = lockAcquireSleepInterval 10 s, renew every 5 s (see below), poll 10 s',
      kill: simulate((rand) => {
        const expiry = -rand() * leaseRenew + amqInterval;
        const phase = rand() * amqInterval;
        return expiry + ((((phase - expiry) % amqInterval) + amqInterval) % amqInterval);
      }),
      killFormula: 'lease − U(0, renew) + next poll U(0, 10 s): 5 – 20 s',
      graceful: simulate(fixedPoll),
      gracefulFormula: 'release sets TIME 0; next poll U(0, 10 s)',
    },
    {
      system: 'Kubernetes client-go leaderelection',
      settings: 'LeaseDuration 15 s, RenewDeadline 10 s, RetryPeriod 2 s',
      kill: simulate(k8sKill),
      killFormula:
        'LeaseDuration after the candidate last saw a renewal (renewals every 2 s, candidate polls every 2–4.4 s), then its next poll',
      graceful: simulate((rand) => firstAfter(polls(jitter(rand), 10_000), 0)),
      gracefulFormula:
        'ReleaseOnCancel (empty holder): the candidate’s next poll, 0–4.4 s; without ReleaseOnCancel (the default) as kill -9',
    },
  ];
}

function printModels(list: Model[]): void {
  sayTable(
    '### ActiveMQ and Kubernetes defaults (model, not measured)',
    ['system', 'settings', 'kill -9 p50 / max', 'how', 'graceful p50 / max', 'how'],
    list.map((m) => [
      m.system,
      m.settings,
      m.kill.text,
      m.killFormula,
      m.graceful.text,
      m.gracefulFormula,
    ]),
  );
  say();
}

/**
 * Ours against the anchors, p50 against p50: our default configuration (one sample, so the
 * ratio carries that sample's luck), our fast one, the ActiveMQ locker of the same kind and
 * client-go (graceful: with ReleaseOnCancel).
 */
function printComparison(fast: FailoverRow[], dflt: FailoverRow[], list: Model[]): void {
  const amq = (s: Scenario) => list[s.locker === 'file' ? 0 : s.locker === 'database' ? 1 : 2];
  const k8s = list[3];
  if (k8s === undefined) return;
  const x = (a: number, b: number) => (b > 0 ? ratio(a / b) : '—');
  for (const mode of ['kill', 'graceful'] as const) {
    say(
      `### Ours against ActiveMQ and client-go: ${mode === 'kill' ? 'kill -9' : 'graceful stop'}`,
    );
    say();
    say(
      table(
        [
          'locker',
          'ours, default (1 sample)',
          'ours, fast p50',
          'ActiveMQ counterpart p50 (model)',
          'default ÷ ActiveMQ',
          'default ÷ client-go',
          'fast ÷ client-go',
        ],
        dflt.map((row) => {
          const s = row.scenario;
          const ours = row[mode].samples[0] ?? Number.NaN;
          const f = fast.find((r) => r.scenario === s);
          const fastP50 = f === undefined ? Number.NaN : median(f[mode].samples);
          const a = amq(s);
          const anchor = a === undefined ? Number.NaN : a[mode].p50;
          return [
            s.name,
            sec(ours),
            f === undefined ? '—' : ms(fastP50),
            a === undefined ? '—' : `${sec(anchor)} (${a.system.replace('ActiveMQ ', '')})`,
            x(ours, anchor),
            x(ours, k8s[mode].p50),
            f === undefined ? '—' : x(fastP50, k8s[mode].p50),
          ];
        }),
      ),
    );
    say();
  }
  say(
    `client-go p50 (model): kill -9 ${sec(k8s.kill.p50)}, graceful with ReleaseOnCancel ${sec(k8s.graceful.p50)}.`,
  );
  say();
}

/** The model's table, and ours against it when the default configuration was measured. */
export const failoverModel: StoreSection = {
  name: 'model',
  run: async (results) => {
    const list = models();
    printModels(list);
    if (results.default.length > 0) printComparison(results.fast, results.default, list);
  },
};

if (isMain(import.meta.url)) await runStoreBench([failoverModel]);
