import { InvalidArgumentError } from '../../core/errors.js';

/**
 * SQL identifiers that locksmith splices into statements (the lock table name, an optional
 * schema prefix) are never quoted or escaped: they are refused unless they match this strict
 * pattern, so no input can inject SQL. A letter or underscore, then letters, digits or
 * underscores, at most 63 characters (PostgreSQL's limit, the smallest of the three);
 * optionally one `schema.` prefix of the same form.
 *
 * Identifiers stay unquoted on purpose, as ActiveMQ writes them: PostgreSQL folds them to
 * lower case, MySQL keeps the case, and an ActiveMQ broker naming the same table finds it.
 */
const PART = '[A-Za-z_][A-Za-z0-9_]{0,62}';
const IDENTIFIER = new RegExp(`^(?:${PART}\\.)?${PART}$`);

export function checkIdentifier(value: unknown, what: string): string {
  if (typeof value !== 'string' || !IDENTIFIER.test(value)) {
    throw new InvalidArgumentError(
      `${what} must be an SQL identifier (letters, digits, _; not starting with a digit; at most 63 characters; optionally schema.name), got ${JSON.stringify(value)}`,
    );
  }
  return value;
}
