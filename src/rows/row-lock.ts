/**
 * An explicit row lock, as HBase's client `RowLock`: the row and the lock id that operations
 * carry. `token` is the fencing token of this grant; it increases with every grant of the row.
 * The id is unguessable and never reused: knowing a row does not let anyone use its lock.
 */
export interface RowLock {
  readonly row: Buffer;
  readonly lockId: string;
  readonly token: number;
  /** Unlocks if still held (`await using`); a no-op once unlocked or expired. */
  [Symbol.asyncDispose](): Promise<void>;
}
