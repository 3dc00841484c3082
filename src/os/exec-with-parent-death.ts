// The launcher of parent-death.ts, run as `node exec-with-parent-death.js <parent pid>
// <fd,fd,...> <file> [args...]`. It arms PR_SET_PDEATHSIG = SIGKILL, then becomes the command
// through execvp, so the command dies with the parent that spawned this launcher.
//
// Exit statuses when the command never starts: 1 when the parent died before the signal was
// armed, 127 when the command is not found, 126 when it cannot be executed (or the launcher
// cannot arm the signal), 2 on a malformed launcher command line; each with one stderr line.
//
// Until execvp this is a Node process: it must not touch process.stdout/stderr/stdin (Node
// would switch pipes and TTYs to non-blocking mode, a change the command would inherit).
import { writeSync } from 'node:fs';
import { errnoName, libc } from './libc.js';
import { LAUNCHER_NAME_ENV } from './parent-death.js';

const PR_SET_PDEATHSIG = 1;
const SIGKILL = 9;
const SIGPIPE = 13;
const SIGXFSZ = 25;
const SIG_SETMASK = 2;
const F_SETFD = 2;
const ENOENT = 2;

/** Who speaks in the one line of a failure, as every locksmith command does (see errorLine). */
const who = process.env[LAUNCHER_NAME_ENV] || 'locksmith';
// The command's environment is the caller's, without this launcher's own variable.
delete process.env[LAUNCHER_NAME_ENV];

/** One line, `<who>: <message> (<CODE>)`, the format of every command's errors; then exit. */
function fail(status: number, message: string, code: string): never {
  writeSync(2, `${who}: ${message} (${code})\n`);
  process.exit(status);
}

const [parentArg, fdsArg, file, ...args] = process.argv.slice(2);
const parent = Number(parentArg);
if (!Number.isSafeInteger(parent) || parent <= 0 || fdsArg === undefined || file === undefined) {
  fail(
    2,
    'usage: exec-with-parent-death <parent pid> <fd,fd,...> <file> [args...]',
    'INVALID_ARGUMENT',
  );
}
const fds = fdsArg === '' ? [] : fdsArg.split(',').map(Number);

const c = libc();
const prctl = c.lib.func(
  'int prctl(int option, unsigned long arg2, unsigned long arg3, unsigned long arg4, unsigned long arg5)',
) as (option: number, a2: number, a3: number, a4: number, a5: number) => number;
const getppid = c.lib.func('int getppid(void)') as () => number;
const fcntl = c.lib.func('int fcntl(int fd, int cmd, ...)') as (
  fd: number,
  cmd: number,
  type: 'int',
  arg: number,
) => number;
const signal = c.lib.func('void *signal(int signum, void *handler)') as (
  signum: number,
  handler: null,
) => unknown;
const sigprocmask = c.lib.func('int sigprocmask(int how, void *set, void *oldset)') as (
  how: number,
  set: Buffer,
  old: null,
) => number;
const execvp = c.lib.func('int execvp(const char *file, const char **argv)') as (
  file: string,
  argv: (string | null)[],
) => number;

if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) !== 0) {
  fail(126, 'cannot set the parent-death signal', errnoName(c.errno()));
}
// Armed only from now on: if the parent died since the fork we were already re-parented and
// no signal will ever come, so the command must not start.
if (getppid() !== parent) fail(1, `parent ${parent} exited before ${file} could start`, 'ABORTED');

// What Node changed in this process that execve would hand down to the command: it ignores
// SIGPIPE and SIGXFSZ (ignored dispositions survive exec), and it marks the inherited fds
// close-on-exec. The signal mask is reset too, in case this thread's was not empty.
signal(SIGPIPE, null);
signal(SIGXFSZ, null);
sigprocmask(SIG_SETMASK, Buffer.alloc(128), null);
for (const fd of fds) {
  if (!Number.isInteger(fd) || fd < 0)
    fail(2, `bad fd list ${JSON.stringify(fdsArg)}`, 'INVALID_ARGUMENT');
  if (fcntl(fd, F_SETFD, 'int', 0) !== 0)
    fail(126, `cannot pass fd ${fd} to the command`, errnoName(c.errno()));
}

execvp(file, [file, ...args, null]);
const errno = c.errno();
fail(errno === ENOENT ? 127 : 126, `cannot run ${file}`, errnoName(errno));
