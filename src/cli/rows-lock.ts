/**
 * `locksmith rows lock <table> <row> -- <command>`: holds one row's lock while a command
 * runs. {@link lockAction} checks the subcommand's own flags (`--wait`, `--grace`, the
 * command after `--`) before the server is reached; the run takes the lock, starts the
 * command with the lock's token, keeps the lock while it runs, stops the command when the
 * lock is lost or a stop signal arrives, and releases the lock when it ends (see
 * {@link lockAndRun} for the exit statuses). `rows.ts` parses the command line and connects.
 */
import type { LocksmithClient } from '../client/locksmith-client.js';
import { LockLostError, LockObtainFailedError } from '../core/errors.js';
import { toStringBinary } from '../rows/bytes.js';
import type { TableRowLock } from '../rows/table.js';
import { CommandService, DEFAULT_GRACE_MS } from '../store/command-service.js';
import { durationOption } from './args.js';
import { interrupted, signalStatus } from './interrupted.js';
import type { Action, Parsed } from './rows.js';

/** Signals that stop `rows lock`: the command is stopped (with the grace), the lock released. */
const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * `rows lock`'s flags, checked before connecting: a command after `--` is required, `--wait`
 * (absent: fail at once when the row is held) and `--grace` are durations.
 */
export function lockAction(p: Parsed, table: string, row: Buffer): Action {
  if (p.command === undefined || p.command.length === 0) {
    throw p.misuse('expected -- and a command to run while the row is locked');
  }
  const command = p.command;
  const waitText = p.values.wait as string | undefined;
  const waitMs = waitText === undefined ? undefined : durationOption('--wait', waitText);
  const grace = p.values.grace as string | undefined;
  const graceMs = grace === undefined ? DEFAULT_GRACE_MS : durationOption('--grace', grace);
  return (client) => lockAndRun(client, { table, row, waitMs, waitText, graceMs, command });
}

interface LockRun {
  table: string;
  row: Buffer;
  waitMs: number | undefined;
  waitText: string | undefined;
  graceMs: number;
  command: string[];
}

/**
 * `rows lock`: takes the row's lock (at once, or waiting up to `--wait`), runs the command
 * with `LOCKSMITH_FENCING_TOKEN` and `LOCKSMITH_LOCK_ID`, keeps the lock while it runs (it
 * renews itself: held while this client's session lives), and releases it when it ends; exits
 * with the command's status. The command runs in its own process group and dies with this
 * process (see CommandService). If the lock is lost (session expired, server gone), the
 * command is stopped (SIGTERM,
 * SIGKILL after `--grace`) and the loss is the error (exit 1). SIGINT/SIGTERM/SIGHUP stop the
 * command the same way and exit 128 + the signal's number.
 */
async function lockAndRun(client: LocksmithClient, r: LockRun): Promise<number> {
  const table = client.table(r.table);
  let received: NodeJS.Signals | undefined;
  const stop = new AbortController();
  const onSignal = (sig: NodeJS.Signals) => {
    received ??= sig;
    stop.abort();
  };
  for (const sig of STOP_SIGNALS) process.on(sig, onSignal);
  try {
    let lock: TableRowLock | null;
    try {
      lock =
        r.waitMs === undefined
          ? await table.tryLockRow(r.row)
          : await table.lockRow(r.row, { waitMs: r.waitMs, signal: stop.signal });
    } catch (err) {
      if (received !== undefined) {
        return interrupted(
          'rows lock',
          received,
          `row ${toStringBinary(r.row.toString('latin1'))} of table ${r.table}`,
        );
      }
      if ((err as { code?: unknown }).code === 'LOCK_TIMEOUT') {
        throw await heldError(client, r, `after waiting ${r.waitText}`, err);
      }
      throw err;
    }
    if (lock === null) throw await heldError(client, r, '', undefined);
    try {
      return await runHolding(lock, r, stop.signal, () => received);
    } finally {
      await lock.close().catch(() => undefined);
    }
  } finally {
    for (const sig of STOP_SIGNALS) process.off(sig, onSignal);
  }
}

async function runHolding(
  lock: TableRowLock,
  r: LockRun,
  stopped: AbortSignal,
  received: () => NodeJS.Signals | undefined,
): Promise<number> {
  const service = new CommandService(r.command, {
    graceMs: r.graceMs,
    name: 'locksmith rows lock',
    env: { ...process.env, LOCKSMITH_LOCK_ID: lock.lockId },
  });
  // Stops the command on a loss or a stop signal (CommandService stops it on this abort).
  const run = new AbortController();
  let lost: LockLostError | undefined;
  const onLost = () => {
    lost ??= lock.lostReason;
    run.abort();
  };
  lock.signal.addEventListener('abort', onLost, { once: true });
  stopped.addEventListener('abort', () => run.abort(), { once: true, signal: run.signal });
  try {
    if (stopped.aborted) return signalStatus(received() ?? 'SIGTERM');
    await service.start({ signal: run.signal, token: lock.token });
    const exit = await service.exited;
    const sig = received();
    if (sig !== undefined) return signalStatus(sig);
    if (exit.stopped && lost !== undefined) {
      throw new LockLostError(
        `lost the lock of row ${toStringBinary(lock.row.toString('latin1'))} in ${r.table}, stopped ${r.command[0]}: ${lost.message}`,
        { code: lost.code as never, cause: lost },
      );
    }
    return exit.status;
  } finally {
    lock.signal.removeEventListener('abort', onLost);
    run.abort(); // removes the stop listener
  }
}

/** The row is locked by another session: says which, from the server's status. */
async function heldError(
  client: LocksmithClient,
  r: LockRun,
  after: string,
  cause: unknown,
): Promise<LockObtainFailedError> {
  const row = toStringBinary(r.row.toString('latin1'));
  let by = 'another session';
  try {
    const { locks } = await client.status();
    const holder = locks.find((l) => l.table === r.table && l.row === row);
    if (holder !== undefined) by = `session ${holder.session} (${holder.client ?? 'unnamed'})`;
  } catch {
    // The failure is still worth reporting without the holder.
  }
  const code = after === '' ? 'LOCK_OBTAIN_FAILED' : 'LOCK_TIMEOUT';
  return new LockObtainFailedError(
    `row ${row} of ${r.table} is locked${after === '' ? '' : ` ${after}`}: held by ${by}`,
    { code, cause },
  );
}
