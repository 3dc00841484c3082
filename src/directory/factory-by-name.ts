import { InvalidArgumentError } from '../core/errors.js';
import type { LockFactory } from './lock-factory.js';
import { NativeFSLockFactory } from './native-fs-lock-factory.js';
import { NoLockFactory } from './no-lock-factory.js';
import { SimpleFSLockFactory } from './simple-fs-lock-factory.js';
import { SingleInstanceLockFactory } from './single-instance-lock-factory.js';

const FACTORIES: Record<string, () => LockFactory> = {
  native: () => NativeFSLockFactory.INSTANCE,
  simple: () => SimpleFSLockFactory.INSTANCE,
  single: () => new SingleInstanceLockFactory(),
  none: () => NoLockFactory.INSTANCE,
};

const LUCENE_CLASS_NAMES: Record<string, string> = {
  'org.apache.lucene.store.NativeFSLockFactory': 'native',
  'org.apache.lucene.store.SimpleFSLockFactory': 'simple',
  'org.apache.lucene.store.SingleInstanceLockFactory': 'single',
  'org.apache.lucene.store.NoLockFactory': 'none',
};

/** The factory names accepted on command lines. */
export const FACTORY_NAMES: readonly string[] = [
  ...Object.keys(FACTORIES),
  ...Object.keys(LUCENE_CLASS_NAMES),
];

/**
 * The factories that lock across processes through the file system: the only ones a command
 * that holds or inspects a lock for other processes (`locksmith lock`, `locksmith status`)
 * can mean. `single` locks within one process and `none` not at all.
 */
export const FILE_FACTORY_NAMES: readonly string[] = ['native', 'simple'];

/**
 * A lock factory from its short name (`native`, `simple`, `single`, `none`) or its Lucene class
 * name (`org.apache.lucene.store.NativeFSLockFactory`, …), among `accepted` (all of
 * {@link FACTORY_NAMES} by default). `single` is a new instance each time. Any other name is an
 * {@link InvalidArgumentError} listing the accepted ones.
 */
export function lockFactoryByName(
  name: string,
  accepted: readonly string[] = FACTORY_NAMES,
): LockFactory {
  const make = accepted.includes(name) ? FACTORIES[LUCENE_CLASS_NAMES[name] ?? name] : undefined;
  if (make === undefined) {
    throw new InvalidArgumentError(
      `Unknown lock factory ${JSON.stringify(name)}: expected one of ${accepted.join(', ')}`,
    );
  }
  return make();
}
