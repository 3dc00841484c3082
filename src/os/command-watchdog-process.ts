// The watchdog process of command-watchdog.ts, run as `node command-watchdog-process.js`.
// It outlives pauses of its owner (SIGSTOP, a stalled event loop): it has its own event loop,
// and all it does is compare a deadline with the clock.
//
// Protocol, one command per line on stdin (times in ms on CLOCK_MONOTONIC, which every process
// of the machine shares: `process.hrtime`; `inf` for none):
//   arm <pgid> <termAt> <killAt>   watch process group <pgid> from now on
//   extend <termAt> <killAt>       move the deadlines (later or earlier)
//   disarm                         forget the group (it ended; never signal it again)
// When termAt passes while armed: SIGTERM to the group; when killAt passes: SIGKILL, and the
// watchdog disarms itself. stdin reaching EOF or failing means the owner is gone (exited, or
// killed with kill -9): SIGKILL to an armed group at once, then exit 0.
// Reports on stdout, one line each: `ready`, `term <pgid> <late ms>`, `kill <pgid> <late ms>`
// (late: how long after the deadline the signal went), `error <message>` for a line it could
// not parse (then it acts as if its owner were gone: a confused owner must not leave a command
// unwatched).
//
// SIGINT, SIGTERM and SIGHUP are ignored: the watchdog lives exactly as long as its owner's
// end of the pipe, so a signal meant for the owner's terminal or process group cannot remove
// the watch while the command still runs.

const now = (): number => Number(process.hrtime.bigint()) / 1e6;

interface Armed {
  pgid: number;
  termAt: number;
  killAt: number;
  termSent: boolean;
}

let armed: Armed | undefined;
let timer: NodeJS.Timeout | undefined;

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

function signalGroup(pgid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pgid, sig);
  } catch {
    // ESRCH: the group is already gone; EPERM: the id names someone else's group now.
  }
}

function parseTime(text: string | undefined): number {
  if (text === 'inf') return Number.POSITIVE_INFINITY;
  const value = Number(text);
  if (text === undefined || text === '' || !Number.isFinite(value)) {
    throw new Error(`bad time ${JSON.stringify(text)}`);
  }
  return value;
}

/** Acts on the deadlines that passed and sets the timer for the next one. */
function check(): void {
  if (timer !== undefined) clearTimeout(timer);
  timer = undefined;
  const a = armed;
  if (a === undefined) return;
  const t = now();
  if (t >= a.killAt) {
    signalGroup(a.pgid, 'SIGKILL');
    armed = undefined;
    say(`kill ${a.pgid} ${(t - a.killAt).toFixed(1)}`);
    return;
  }
  if (!a.termSent && t >= a.termAt) {
    a.termSent = true;
    signalGroup(a.pgid, 'SIGTERM');
    say(`term ${a.pgid} ${(t - a.termAt).toFixed(1)}`);
  }
  const next = a.termSent ? a.killAt : Math.min(a.termAt, a.killAt);
  if (Number.isFinite(next)) {
    // Node never fires a timer early against the monotonic clock; a late wake-up is checked
    // again here, so the signal goes at the first wake-up past the deadline.
    timer = setTimeout(check, Math.min(Math.max(0, Math.ceil(next - t)), 2_147_483_647));
  }
}

function ownerGone(): void {
  if (armed !== undefined) signalGroup(armed.pgid, 'SIGKILL');
  armed = undefined;
  process.exit(0);
}

function handle(line: string): void {
  const [verb, ...args] = line.trim().split(/\s+/);
  if (verb === 'arm') {
    const pgid = Number(args[0]);
    if (!Number.isSafeInteger(pgid) || pgid <= 1) throw new Error(`bad pgid ${args[0]}`);
    armed = { pgid, termAt: parseTime(args[1]), killAt: parseTime(args[2]), termSent: false };
  } else if (verb === 'extend') {
    const termAt = parseTime(args[0]);
    const killAt = parseTime(args[1]);
    if (armed !== undefined && !armed.termSent) {
      armed.termAt = termAt;
      armed.killAt = killAt;
    }
  } else if (verb === 'disarm') {
    armed = undefined;
  } else if (verb !== '') {
    throw new Error(`unknown command ${JSON.stringify(line)}`);
  }
  check();
}

for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(sig, () => {});

let partial = '';
process.stdin.on('data', (chunk: Buffer) => {
  const lines = (partial + chunk.toString('utf8')).split('\n');
  partial = lines.pop() ?? '';
  for (const line of lines) {
    try {
      handle(line);
    } catch (err) {
      say(`error ${(err as Error).message}`);
      ownerGone();
    }
  }
});
process.stdin.on('end', ownerGone);
process.stdin.on('error', ownerGone);
// stdout closing (the owner died) must not crash the watchdog before it has acted on stdin's end.
process.stdout.on('error', () => {});
say('ready');
