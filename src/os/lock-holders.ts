import { readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';

export interface LockHolder {
  /** `OFDLCK` (open-file-description), `POSIX` (fcntl, e.g. Java) or `FLOCK`. */
  kind: string;
  /** The owning process, when the OS says (`undefined` for an OFD lock whose owner was not found). */
  pid: number | undefined;
  /** The process's command line, when readable. */
  command?: string;
}

/**
 * Who holds kernel locks on `path`, as far as the OS tells (Linux `/proc`): `/proc/locks` lists
 * every lock on the inode; POSIX locks name their process there, OFD locks do not (pid -1), so
 * for those the processes' open descriptors are searched for the file. Returns `[]` when the
 * file is not locked, and `undefined` where the OS offers no such information.
 */
export function lockHolders(path: string): LockHolder[] | undefined {
  if (process.platform !== 'linux') return undefined;
  let locks: string;
  try {
    locks = readFileSync('/proc/locks', 'utf8');
  } catch {
    return undefined;
  }
  const st = statSync(path);
  const dev = BigInt(st.dev);
  const major = Number(((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn));
  const minor = Number((dev & 0xffn) | ((dev >> 12n) & ~0xffn));
  const key = `${major.toString(16).padStart(2, '0')}:${minor.toString(16).padStart(2, '0')}:${st.ino}`;
  const holders: LockHolder[] = [];
  // Several shared (READ) OFD locks are several lines with pid -1; the search for their
  // processes finds all of them at once, so it runs once and each process is listed once.
  let searched: number[] | undefined;
  const listed = new Set<string>();
  for (const line of locks.split('\n')) {
    // "1: OFDLCK ADVISORY  WRITE -1 fe:00:2146516 0 EOF" (blocked waiters have "->")
    const fields = line.trim().split(/\s+/);
    if (fields.length < 6 || fields[1] === '->' || fields[5] !== key) continue;
    const kind = fields[1] ?? '?';
    const pid = Number(fields[4]);
    if (pid <= 0 && searched === undefined) searched = processesWithOpen(path, st.ino);
    const found = pid > 0 ? [pid] : (searched ?? []);
    for (const p of found) {
      if (listed.has(`${kind} ${p}`)) continue;
      listed.add(`${kind} ${p}`);
      holders.push(withCommand({ kind, pid: p }));
    }
    if (found.length === 0 && !listed.has(kind)) {
      listed.add(kind);
      holders.push({ kind, pid: undefined });
    }
  }
  return holders;
}

function processesWithOpen(path: string, ino: number): number[] {
  const pids: number[] = [];
  for (const entry of safeReaddir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    for (const fd of safeReaddir(`/proc/${entry}/fd`)) {
      let target: string;
      try {
        target = readlinkSync(`/proc/${entry}/fd/${fd}`);
      } catch {
        continue;
      }
      if (target !== path && !target.startsWith(`${path} (deleted)`)) continue;
      try {
        const info = readFileSync(`/proc/${entry}/fdinfo/${fd}`, 'utf8');
        if (info.includes(`:${ino} `) && /lock:\s.*OFDLCK/.test(info)) {
          pids.push(Number(entry));
          break;
        }
      } catch {}
    }
  }
  return pids;
}

function withCommand(holder: LockHolder): LockHolder {
  try {
    const cmd = readFileSync(`/proc/${holder.pid}/cmdline`, 'utf8')
      .split('\0')
      .filter(Boolean)
      .join(' ');
    if (cmd !== '') holder.command = cmd;
  } catch {}
  return holder;
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
