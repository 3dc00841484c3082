import { InvalidArgumentError } from '../../core/errors.js';

export type DialectKind = 'sqlite' | 'postgres' | 'mysql';

/** What a database URL names. */
export type DatabaseUrl =
  | { kind: 'sqlite'; path: string }
  | { kind: 'postgres'; url: string }
  | { kind: 'mysql'; url: string };

/**
 * `sqlite:<path>` (also `sqlite://<path>`, or a bare file path such as `./lease.db`: a value
 * with no scheme is a SQLite file; `sqlite::memory:` is refused: a lock nobody else can see
 * protects nothing), `postgres://…` / `postgresql://…` (anything `pg` accepts), and
 * `mysql://…` / `mariadb://…` (anything `mysql2` accepts). Anything else is an
 * {@link InvalidArgumentError}. The library and every command read database URLs here.
 */
export function parseDatabaseUrl(value: unknown): DatabaseUrl {
  if (typeof value !== 'string' || value.length === 0) {
    throw new InvalidArgumentError(`database URL must be a non-empty string, got ${String(value)}`);
  }
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(value)?.[1]?.toLowerCase();
  if (scheme === undefined) return parseDatabaseUrl(`sqlite:${value}`);
  switch (scheme) {
    case 'sqlite': {
      const path = value.slice('sqlite:'.length).replace(/^\/\//, '');
      if (path.length === 0 || path === ':memory:' || path.includes('\0')) {
        throw new InvalidArgumentError(
          `sqlite URL needs a file path shared by the contenders (sqlite:<path>), got ${JSON.stringify(value)}`,
        );
      }
      return { kind: 'sqlite', path };
    }
    case 'postgres':
    case 'postgresql':
      checkUrl(value);
      return { kind: 'postgres', url: value };
    case 'mysql':
    case 'mariadb':
      checkUrl(value);
      return { kind: 'mysql', url: value.replace(/^mariadb:/i, 'mysql:') };
    default:
      throw new InvalidArgumentError(
        `Unsupported database URL ${JSON.stringify(redactUrl(value))}: expected a SQLite file path (sqlite:<path>), postgres://… or mysql://…`,
      );
  }
}

function checkUrl(value: string): void {
  try {
    new URL(value);
  } catch (err) {
    throw new InvalidArgumentError(`Malformed database URL ${JSON.stringify(redactUrl(value))}`, {
      cause: err,
    });
  }
}

/** The URL with any password replaced by `***`, for messages and logs. */
export function redactUrl(value: string): string {
  return value.replace(/(\/\/[^:/@]*:)[^@/]*@/, '$1***@');
}
