// One master per shared directory: `npx tsx examples/shared-file-master.ts` (run it twice in
// two terminals: the second waits as a slave and takes over when you stop the first). It runs
// until Ctrl-C (SIGINT) or SIGTERM, which stop it at once: the service first, then the lock is
// given back, then the process ends.
import { AbortedError, SharedFileLocker, Supervisor } from 'locksmith-locks/store';

const supervisor = new Supervisor({
  locker: new SharedFileLocker({ directory: './store-data', acquireIntervalMs: 1000 }),
  keepAlivePeriodMs: 500,
  service: {
    start({ signal, token }) {
      console.log(`master now, fencing token ${token}`);
      const timer = setInterval(() => console.log('working as master'), 1000);
      signal.addEventListener('abort', () => clearInterval(timer), { once: true });
    },
    stop() {
      console.log('stopped being master');
    },
  },
});
supervisor.on('waiting', () => console.log('slave: waiting for the lock'));
supervisor.on('demoted', (e) => console.log(`demoted: ${String(e.reason)}`));
supervisor.on('stopped', () => console.log('stopped'));

for (const name of ['SIGINT', 'SIGTERM'] as const) {
  process.once(name, () => {
    console.log(`${name}: stopping`);
    supervisor.stop().catch((err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    });
  });
}

try {
  await supervisor.start(); // resolves on becoming master; the supervisor then runs on its own
} catch (err) {
  // Stopped (Ctrl-C) while still a slave: not an error.
  if (!(err instanceof AbortedError)) throw err;
}
