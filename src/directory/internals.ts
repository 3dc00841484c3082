/**
 * Access to a lock's private state for tests that simulate "an external force" (as Lucene's
 * tests reach into package-private fields). Not exported from the package.
 */
export const internals: unique symbol = Symbol('locksmith.internals');
