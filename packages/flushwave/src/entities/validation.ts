import { ValidationError, type ValidationFailure } from '../errors.js'
import { isChanged, isDirty } from './dirty.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import { changeableInPlace, readValue, type CollectionFactory } from './entity-class.js'
import { label, STATE, type HasState } from './entity-state.js'

const hasRules = (f: FieldMeta): boolean => f.rules.length > 0

type Validate = (entity: HasState) => string | readonly string[] | undefined

/**
 * Checks the field rules of every new entity and of every changed field, and the entity rules of
 * new and changed entities; throws one ValidationError with every failure. Runs before anything is
 * sent. An entity whose type has no rule costs one lookup per type.
 */
export function validate(entities: readonly HasState[], entityRule: (name: string) => Validate | undefined): void {
  const failures: ValidationFailure[] = []
  type Rules = { fields: readonly FieldMeta[]; entity: Validate | undefined } | null
  const rules = new Map<EntityMeta, Rules>()
  // Entities mostly come in runs of one type: the type's rules are looked up once per run.
  let meta: EntityMeta | undefined
  let ofType: Rules = null
  for (let e = 0; e < entities.length; e++) {
    const entity = entities[e]!
    const state = entity[STATE]
    if (state.meta !== meta) {
      meta = state.meta
      let found = rules.get(meta)
      if (found === undefined) {
        const fields = meta.fields.filter(hasRules)
        const rule = entityRule(meta.name)
        rules.set(meta, (found = fields.length === 0 && rule === undefined ? null : { fields, entity: rule }))
      }
      ofType = found
    }
    if (ofType === null || state.status === 'removed' || !isDirty(state)) continue
    for (const field of ofType.fields) {
      if (state.status !== 'new' && !isChanged(state, field)) continue
      const value = readValue(state, field)
      if (value === null || value === undefined) continue
      // The rule is handed the value itself: a Date or JSON object it keeps may change in place.
      if (changeableInPlace(field, value)) (state.owner as CollectionFactory).watch(entity)
      for (const rule of field.rules) {
        const message = rule(value as never)
        if (message) failures.push({ entity: label(state), property: field.prop, message })
      }
    }
    const messages = ofType.entity?.(entity)
    for (const message of typeof messages === 'string' ? [messages] : (messages ?? [])) {
      failures.push({ entity: label(state), property: undefined, message })
    }
  }
  if (failures.length > 0) throw new ValidationError(failures)
}
