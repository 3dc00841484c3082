/**
 * A call's hook for the moment its write is queued for the log and all it still does is wait
 * for its batch to be made durable (the group commit's `fdatasync`). The locksmith server
 * passes one per call under {@link durableWait} (its calls' options) and gives the call's
 * handler back there, as it does when a call waits for a row lock: a handler held through an
 * fsync capped a group commit's batch at the number of handlers (10 by default), so puts with
 * `fsync` durability ran at a tenth of what the disk allows.
 *
 * Contract: called after a write's cells are built and queued, never when nothing is written
 * (once per write: a `batch` call may call it once per mutation, so the hook must be
 * idempotent); it must not throw. Internal: a symbol key, so it is never one of
 * the options a user names.
 */
export const durableWait: unique symbol = Symbol('locksmith.durableWait');
