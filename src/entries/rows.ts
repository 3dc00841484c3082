// `locksmith-locks/rows`: the row store (src/rows/) and, for the programs written against it, the
// network client's `connect`, which now lives in `locksmith-locks/client`. The client is loaded only
// when `connect` is called, so an in-process Region user never loads it.
import type { connect as clientConnect } from '../client/locksmith-client.js';

export type {
  AdminCallOptions,
  ConnectOptions,
  LocksmithClient,
  RemoteTable,
} from '../client/index.js';
export * from '../rows/index.js';

/** `connect` of `locksmith-locks/client` (see there), loaded on first use. */
export const connect: typeof clientConnect = async (...args) => {
  const client = await import('../client/locksmith-client.js');
  return client.connect(...args);
};
