/**
 * An error as the store family's messages and log lines quote it, on one line: its message;
 * for an error without one (a bare driver error, an AggregateError of connection attempts),
 * its `code` or its first inner error; anything else as a string. Line breaks (gRPC's
 * messages carry some) become "; ", so a quoted error never splits a log line.
 */
export function describe(err: unknown): string {
  return describeRaw(err)
    .replace(/\s*\n\s*/g, '; ')
    .trim();
}

function describeRaw(err: unknown): string {
  if (err instanceof Error) {
    if (err.message.length > 0) return err.message;
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    const errors = (err as { errors?: unknown }).errors;
    if (Array.isArray(errors) && errors[0] instanceof Error) return describeRaw(errors[0]);
  }
  return String(err);
}
