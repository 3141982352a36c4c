import { EntityStateError, InvalidValueError } from '../errors.js'
import { writeText } from '../schema/column-types.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import { label, STATE, stateOf, type HasState } from './entity-state.js'
import type { IdentityMap } from './identity-map.js'
import { KeyIndex } from './key-index.js'

/** What an upsert needs of its unit of work. */
export interface UpsertHost {
  readonly map: IdentityMap
  create(meta: EntityMeta, data: Record<string, unknown>): HasState
  assign(entity: HasState, data: Record<string, unknown>): void
  /** Checks a value for a field of a new entity, as create() checks it. */
  checkNew(meta: EntityMeta, field: FieldMeta, value: unknown): void
}

/** `em.upsert` for one unit of work, with its key indexes by type and the key's properties. */
export class Upserts {
  private readonly keyIndexes = new Map<EntityMeta, Map<string, KeyIndex>>()

  constructor(private readonly host: UpsertHost) {}

  /**
   * `em.upsert`: the entity this EntityManager already holds with that key (a pending upsert, or a
   * row read), with `data` assigned; otherwise a new entity whose INSERT goes `on conflict (key) do
   * update` of the properties in `data`. Found through a KeyIndex: constant time per upsert while
   * nothing else changes the entities of that type in between.
   */
  upsert(meta: EntityMeta, data: Record<string, unknown>, onConflict: unknown): HasState {
    if (typeof data !== 'object' || data === null || Array.isArray(data)) {
      throw new InvalidValueError(meta.name, 'data', data, 'upsert() takes an object of property values')
    }
    const key = conflictKey(meta, onConflict)
    // The key's fields: a unique key's, or a composite primary key's (none for an id property).
    const fields = key === 'id' ? meta.key : key
    const props = fields === undefined ? [meta.id.prop] : fields.map((f) => f.prop)
    for (const prop of props) {
      if (data[prop] === undefined || data[prop] === null) throw new InvalidValueError(meta.name, prop, data[prop], `is the upsert's key (onConflict): give it a value`)
    }
    const keyText = (read: (prop: string) => unknown): string | undefined => {
      const parts: string[] = []
      for (const [i, prop] of props.entries()) {
        const value = read(prop)
        if (value === undefined || value === null) return undefined
        const field = fields?.[i]
        if (field?.ref) {
          const target = stateOf(value)
          if (target?.id === undefined) return undefined
          parts.push(String(target.id))
        } else parts.push(field ? writeText(field.type, value) : meta.id.type.toText(value))
      }
      return parts.join('\u0000')
    }
    // Checked like create's and assign's values before the search, so a bad key is an error, not a miss.
    if (fields !== undefined) for (const field of fields) this.host.checkNew(meta, field, data[field.prop])
    const wanted = keyText((prop) => data[prop])
    const heldKey = (entity: HasState): string | undefined => {
      const state = entity[STATE]
      return keyText((prop) => (fields === undefined ? state.id : state.values[prop]))
    }
    const index = this.keyIndex(meta, props, heldKey, fields !== undefined && fields.some((f) => f.type.mutable))
    for (const entity of wanted === undefined ? [] : index.find(this.host.map, wanted)) {
      const state = entity[STATE]
      if (state.status === 'detached' || heldKey(entity) !== wanted) continue
      if (state.status === 'removed') throw new EntityStateError(`${label(state)} has this key and is removed in this EntityManager: flush the removal first`)
      if (state.status === 'new' && state.upsert === undefined) throw new EntityStateError(`${label(state)} has this key and is new: it will be inserted; assign to it instead`)
      // The key's values are equal already (and a pending upsert's key cannot be assigned).
      const rest = Object.fromEntries(Object.entries(data).filter(([prop]) => prop !== meta.id.prop && !props.includes(prop)))
      this.host.assign(entity, rest)
      index.keyUnchanged(this.host.map) // `rest` holds no property of the key
      if (state.upsert) for (const prop in rest) state.upsert.update.add(meta.fieldByProp.get(prop)!)
      return entity
    }
    const entity = this.host.create(meta, data)
    index.created(this.host.map, entity, heldKey(entity))
    const update = new Set<FieldMeta>()
    for (const prop in data) {
      const field = meta.fieldByProp.get(prop)
      if (field && !props.includes(prop)) update.add(field)
    }
    entity[STATE].upsert = { key, update }
    return entity
  }

  private keyIndex(meta: EntityMeta, props: readonly string[], keyOf: (entity: HasState) => string | undefined, changesInPlace: boolean): KeyIndex {
    let byProps = this.keyIndexes.get(meta)
    if (!byProps) this.keyIndexes.set(meta, (byProps = new Map()))
    const name = props.join(',')
    let index = byProps.get(name)
    if (!index) byProps.set(name, (index = new KeyIndex(this.host.map, meta, keyOf, changesInPlace)))
    return index
  }
}

/**
 * What `onConflict` names: a unique property, the properties of a unique key over several columns
 * (in any order), or the id of an entity whose ids the application provides.
 */
function conflictKey(meta: EntityMeta, onConflict: unknown): readonly FieldMeta[] | 'id' {
  const props = typeof onConflict === 'string' ? [onConflict] : Array.isArray(onConflict) && onConflict.every((p) => typeof p === 'string') ? (onConflict as string[]) : undefined
  if (props === undefined || props.length === 0) {
    throw new InvalidValueError(meta.name, 'onConflict', onConflict, 'expected a unique property, or the properties of a unique key')
  }
  if (meta.key && sameProps(props, meta.key)) return 'id'
  if (props.length === 1 && props[0] === meta.id.prop && !meta.key) {
    if (meta.id.strategy === 'provided') return 'id'
    throw new InvalidValueError(meta.name, 'onConflict', onConflict, `${meta.name}'s ids come from ${meta.id.strategy === 'sequence' ? 'its sequence' : 'create()'}: upsert by a unique key`)
  }
  const wanted = [...props].sort().join(',')
  const key = meta.uniqueKeys.find((k) => k.map((f) => f.prop).sort().join(',') === wanted)
  if (key === undefined) {
    const known = meta.uniqueKeys.map((k) => k.map((f) => f.prop).join(' + '))
    throw new InvalidValueError(meta.name, 'onConflict', onConflict, `is not a unique key of ${meta.name}${known.length > 0 ? ` (its unique keys: ${known.join('; ')})` : ' (it has none)'}`)
  }
  return key
}

/** Whether `props` name exactly the fields of `key`, in any order. */
const sameProps = (props: readonly string[], key: readonly FieldMeta[]): boolean => props.length === key.length && key.every((f) => props.includes(f.prop))
