import { ValidationError, type ValidationFailure } from '../errors.js'
import { isChanged, isDirty } from './dirty.js'
import { label, STATE, type HasState } from './entity-state.js'

type Validate = (entity: HasState) => string | readonly string[] | undefined

/**
 * Checks the field rules of every new entity and of every changed field, and the entity rules of
 * new and changed entities; throws one ValidationError with every failure. Runs before anything is
 * sent.
 */
export function validate(entities: readonly HasState[], entityRule: (name: string) => Validate | undefined): void {
  const failures: ValidationFailure[] = []
  for (const entity of entities) {
    const state = entity[STATE]
    if (state.status === 'removed' || !isDirty(state)) continue
    for (const field of state.meta.fields) {
      if (field.rules.length === 0 || (state.status !== 'new' && !isChanged(state, field))) continue
      const value = state.values[field.prop]
      if (value === null || value === undefined) continue
      for (const rule of field.rules) {
        const message = rule(value as never)
        if (message) failures.push({ entity: label(state), property: field.prop, message })
      }
    }
    const messages = entityRule(state.meta.name)?.(entity)
    for (const message of typeof messages === 'string' ? [messages] : (messages ?? [])) {
      failures.push({ entity: label(state), property: undefined, message })
    }
  }
  if (failures.length > 0) throw new ValidationError(failures)
}
