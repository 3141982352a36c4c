import type { EntityName, OrderBy } from '../schema/infer.js'
import type { SchemaDefs } from '../schema/define.js'
import type { EntityMeta } from '../schema/meta.js'
import type { RowLock, SelectOptions } from '../sql/render-select.js'
import { isServerError, lockingReadError } from '../drivers/protocol/pg-error.js'
import { EntityStateError, InvalidValueError } from '../errors.js'
import { columnOf, isPlainObject } from './where.js'

/** A locking read's server errors, typed: `nowait` on a locked row is a (retryable) LockTimeoutError. */
export async function lockingRead<T>(meta: EntityMeta, read: () => Promise<T>): Promise<T> {
  try {
    return await read()
  } catch (error) {
    throw isServerError(error) ? lockingReadError(error, meta.name, meta.table) : error
  }
}

/**
 * A locking read, inside `em.transaction()` only: `for update` (or `for share`) of the rows read,
 * held until the transaction ends; `wait: 'nowait'` fails at once with LockTimeoutError when a row
 * is locked, `'skip-locked'` leaves such rows out (a job queue's next job).
 */
export interface LockOptions {
  readonly lock?: 'update' | 'share'
  readonly wait?: 'nowait' | 'skip-locked'
}

export interface FindOptions<D extends SchemaDefs, K extends EntityName<D>> extends LockOptions {
  readonly orderBy?: OrderBy<D, K>
  readonly limit?: number
}

/** `find()`'s options, checked: the order, limit and lock of its SELECT. */
export function selectOptions(meta: EntityMeta, options: FindOptions<SchemaDefs, string>, inTransaction: boolean): SelectOptions {
  // Untyped callers: null or an array here would otherwise be read as "no options" or by index.
  if (!isPlainObject(options as unknown)) throw new InvalidValueError(meta.name, 'options', options, 'find() options must be an object')
  if (options.orderBy !== undefined && !isPlainObject(options.orderBy as unknown)) {
    throw new InvalidValueError(meta.name, 'orderBy', options.orderBy, "expected an object of property: 'asc' | 'desc'")
  }
  const orderBy = Object.entries(options.orderBy ?? {}).map(([prop, dir]) => {
    const column = columnOf(meta, prop) // an unknown property is the error, whatever its direction
    if (dir !== 'asc' && dir !== 'desc') throw new InvalidValueError(meta.name, prop, dir, "order must be 'asc' or 'desc'")
    return [column.quoted, dir] as const
  })
  if (options.limit !== undefined && !(Number.isSafeInteger(options.limit) && options.limit >= 0)) {
    throw new InvalidValueError(meta.name, 'limit', options.limit, 'expected a non-negative integer')
  }
  const lock = rowLock(meta.name, options, inTransaction)
  return { orderBy, lock, ...(options.limit === undefined ? {} : { limit: options.limit }) }
}

/** The checked lock of a read, or undefined; a lock outside `em.transaction()` would end with the read. */
export function rowLock(entity: string, options: LockOptions, inTransaction: boolean): RowLock | undefined {
  const { lock, wait } = options
  if (lock === undefined) {
    if (wait !== undefined) throw new InvalidValueError(entity, 'wait', wait, "takes a lock: { lock: 'update', wait }")
    return undefined
  }
  if (lock !== 'update' && lock !== 'share') throw new InvalidValueError(entity, 'lock', lock, "expected 'update' or 'share'")
  if (wait !== undefined && wait !== 'nowait' && wait !== 'skip-locked') throw new InvalidValueError(entity, 'wait', wait, "expected 'nowait' or 'skip-locked'")
  if (!inTransaction) {
    throw new EntityStateError(`a locking read (lock: '${lock}') needs em.transaction(): outside one, the lock would be released as soon as the read returns`)
  }
  return { strength: lock, wait }
}
