/**
 * What a supervisor protects: the work only a master may do (ActiveMQ's broker role, for any
 * service). `start` runs once mastership is held, with the fencing token of that mastership
 * and a signal that aborts the moment mastership is lost or the supervisor stops; `stop` must
 * resolve only once the service no longer acts on the store.
 */
export interface Service {
  start(context: ServiceContext): Promise<void> | void;
  stop(): Promise<void> | void;
}

export interface ServiceContext {
  /** Aborts (with the reason) when mastership is lost or the supervisor stops. */
  signal: AbortSignal;
  /** The fencing token of this mastership; writes to the store should carry it. */
  token: number;
}
