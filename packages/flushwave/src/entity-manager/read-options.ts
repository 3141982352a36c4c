import type { EntityName } from '../schema/infer.js'
import type { OrderBy } from '../schema/filters.js'
import type { PopulatePath } from '../schema/read-types.js'
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

/** Reads leave soft-deleted rows out (of the entity and of the relations their conditions reach) unless `withDeleted`. */
export interface DeletedOptions {
  readonly withDeleted?: boolean
}

/** `withDeleted` of a read's options, checked (untyped callers: 'true' is not true). */
export function withDeletedOf(meta: EntityMeta, options: unknown): boolean {
  const value = typeof options === 'object' && options !== null ? (options as DeletedOptions).withDeleted : undefined
  if (value === undefined) return false
  if (typeof value !== 'boolean') throw new InvalidValueError(meta.name, 'withDeleted', value, 'expected a boolean')
  return value
}

export interface FindOptions<D extends SchemaDefs, K extends EntityName<D>> extends LockOptions, DeletedOptions {
  readonly orderBy?: OrderBy<D, K>
  readonly limit?: number
  /** Rows to skip first (for pages by number; `findPage` pages by cursor, which rows written meanwhile never shift). */
  readonly offset?: number
  /** Relations, or paths of them, to load with the entities found (see `em.populate`). */
  readonly populate?: readonly PopulatePath<D, K>[]
}

/** `find()`'s options as an untyped caller may pass them. */
export type UncheckedFindOptions = LockOptions & { readonly orderBy?: object; readonly limit?: number; readonly offset?: number; readonly populate?: readonly string[] }

/** `find()`'s options, checked: the order, limit and lock of its SELECT. */
export function selectOptions(meta: EntityMeta, options: UncheckedFindOptions, inTransaction: boolean): SelectOptions {
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
  for (const key of ['limit', 'offset'] as const) {
    const n = options[key]
    if (n !== undefined && !(Number.isSafeInteger(n) && n >= 0)) throw new InvalidValueError(meta.name, key, n, 'expected a non-negative integer')
  }
  if (options.populate !== undefined && !(Array.isArray(options.populate) && options.populate.every((p) => typeof p === 'string'))) {
    throw new InvalidValueError(meta.name, 'populate', options.populate, 'expected an array of relation paths')
  }
  const lock = rowLock(meta.name, options, inTransaction)
  return { orderBy, lock, ...(options.limit === undefined ? {} : { limit: options.limit }), ...(options.offset === undefined ? {} : { offset: options.offset }) }
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
