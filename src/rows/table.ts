import { InvalidArgumentError } from '../core/errors.js';
import type { LockHandle } from '../core/lock-handle.js';
import type { Delete, Increment, Put, RowMutations } from './mutation.js';
import type { Get, Scan } from './query.js';
import type { Result } from './result.js';
import type { BytesInput } from './row-input.js';

/** The outcome of one entry of {@link Table.batch}. */
export type BatchStatus = { ok: true } | { ok: false; error: unknown };

/** An explicit row lock of a {@link Table}: the core lock handle plus the row and lock id. */
export interface TableRowLock extends LockHandle {
  /** Unguessable and never reused; what mutations carry (`new Put(row, { rowLock })`). */
  readonly lockId: string;
  readonly row: Buffer;
}

/** Per call: how to give up waiting (for a row lock, or for the server). */
export interface TableCallOptions {
  /** Cancels the call's waiting: for the row lock, and over the network for the answer. */
  signal?: AbortSignal | undefined;
  /** Milliseconds to wait for a row lock before `LOCK_TIMEOUT` (the table's default otherwise). */
  waitMs?: number | undefined;
}

/**
 * `lockRow`'s and `withRowLock`'s options. `renew` (default `true`): the lock stays held while
 * its holder is alive — in process until unlocked or the region closes, over the network while
 * the client's session lives (its heartbeats keep it). `false`: the lease of HBase — lost with
 * `LEASE_EXPIRED` unless a use or `renewLease` comes within the lease period.
 */
export interface TableLockOptions extends TableCallOptions {
  renew?: boolean | undefined;
}

/** `tryLockRow`'s options: `renew` as in {@link TableLockOptions}. */
export interface TableTryLockOptions {
  renew?: boolean | undefined;
}

/** What `unlockRow` and `renewLease` accept: the lock, or its id. */
export type RowLockRef = TableRowLock | { readonly lockId: string } | string;

/**
 * The id a {@link RowLockRef} names. Refuses, with the same `INVALID_ARGUMENT` in process and
 * remotely (before anything is sent), anything but a non-empty id or an object carrying one.
 */
export function rowLockIdOf(lock: RowLockRef): string {
  const id =
    typeof lock === 'string'
      ? lock
      : typeof lock === 'object' && lock !== null
        ? (lock as { lockId?: unknown }).lockId
        : undefined;
  if (typeof id !== 'string')
    throw new InvalidArgumentError('Expected a RowLock returned by lockRow() or its lockId');
  if (id === '')
    throw new InvalidArgumentError('Invalid row lock id "": must be a non-empty string');
  return id;
}

/**
 * One table of the row store, wherever it lives: the in-process {@link Region} and the network
 * client's remote table implement it with the same types, the same errors and the same codes,
 * and one test suite runs against both.
 *
 * Every method returns a promise: over the network even `unlockRow` is a round trip. Errors
 * are `LocksmithError`s and always come as rejections (bad arguments included); a remote
 * table adds `CONNECTION_LOST` (the server could not be reached; the call may or may not have
 * been applied) and `SESSION_EXPIRED`.
 */
export interface Table extends AsyncDisposable {
  lockRow(row: BytesInput, options?: TableLockOptions): Promise<TableRowLock>;
  /** Locks `row` if nobody holds it or waits for it; null otherwise. Never waits. */
  tryLockRow(row: BytesInput, options?: TableTryLockOptions): Promise<TableRowLock | null>;
  withRowLock<T>(
    row: BytesInput,
    fn: (lock: TableRowLock) => T | PromiseLike<T>,
    options?: TableLockOptions,
  ): Promise<T>;
  unlockRow(lock: RowLockRef): Promise<void>;
  renewLease(lock: RowLockRef): Promise<void>;

  get(get: Get, options?: TableCallOptions): Promise<Result>;
  scan(scan: Scan): AsyncGenerator<Result, void, undefined>;

  put(put: Put, options?: TableCallOptions): Promise<void>;
  delete(del: Delete, options?: TableCallOptions): Promise<void>;
  checkAndPut(
    row: BytesInput,
    family: string,
    qualifier: BytesInput,
    expected: BytesInput | null,
    put: Put,
    options?: TableCallOptions,
  ): Promise<boolean>;
  checkAndDelete(
    row: BytesInput,
    family: string,
    qualifier: BytesInput,
    expected: BytesInput | null,
    del: Delete,
    options?: TableCallOptions,
  ): Promise<boolean>;
  increment(inc: Increment, options?: TableCallOptions): Promise<Result>;
  incrementColumnValue(
    row: BytesInput,
    family: string,
    qualifier: BytesInput,
    amount: bigint | number,
    options?: TableCallOptions & { rowLock?: { readonly lockId: string } | undefined },
  ): Promise<bigint>;
  mutateRow(mutations: RowMutations, options?: TableCallOptions): Promise<void>;
  mutateRows(mutations: readonly (Put | Delete)[], options?: TableCallOptions): Promise<void>;
  batch(mutations: readonly (Put | Delete)[], options?: TableCallOptions): Promise<BatchStatus[]>;

  /** In process: closes the region. Remote: forgets the table handle (the server keeps it). */
  close(): Promise<void>;
}
