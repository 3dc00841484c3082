import { isErrno, LocksmithError } from '../core/errors.js';

/**
 * Every error a command throws becomes one line, `locksmith <cmd>: <message> (<CODE>)`: the
 * LocksmithError code, else the OS error code (`ENOENT`, …). The OS error behind a
 * LocksmithError is named too, since its message alone ("Cannot open …") does not say why.
 * The stack is for LOCKSMITH_DEBUG=1 only.
 */
export function errorLine(command: string, err: unknown): string {
  const who = command === '' ? 'locksmith' : `locksmith ${command}`;
  const oneLine = (text: string) => text.replace(/\s*\n\s*/g, '; ').trim();
  if (!(err instanceof Error)) return `${who}: ${oneLine(String(err))} (INTERNAL)`;
  let message = oneLine(err.message);
  const cause = err.cause;
  if (err instanceof LocksmithError) {
    if (
      !(cause instanceof LocksmithError) &&
      isErrno(cause) &&
      !message.includes(cause.code as string)
    )
      message += `: ${cause.code}`;
    return `${who}: ${message} (${err.code})`;
  }
  if (isErrno(err)) return `${who}: ${message} (${err.code})`;
  return `${who}: ${message} (INTERNAL; LOCKSMITH_DEBUG=1 shows the stack)`;
}

/** The stack of `err` and of each of its causes. */
export function stackOf(err: unknown): string {
  const parts: string[] = [];
  for (let e = err, depth = 0; e !== undefined && depth < 8; depth++) {
    parts.push(e instanceof Error ? (e.stack ?? String(e)) : String(e));
    e = e instanceof Error ? e.cause : undefined;
  }
  return parts.join('\nCaused by: ');
}
