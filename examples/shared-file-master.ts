// One master per shared directory: `npx tsx examples/shared-file-master.ts` (run it twice in
// two terminals: the second waits as a slave and takes over when you stop the first).
import { SharedFileLocker, Supervisor } from '../src/store/index.js';

const supervisor = new Supervisor({
  locker: new SharedFileLocker({ directory: './store-data', lockAcquireSleepInterval: 1000 }),
  lockKeepAlivePeriod: 500,
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
process.once('SIGINT', () => void supervisor.stop());
await supervisor.start();
setTimeout(() => void supervisor.stop(), Number(process.env.RUN_MS ?? 3000));
