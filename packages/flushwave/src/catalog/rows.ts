import { parseArrayLiteral } from '../schema/types/arrays.js'

/** The values catalog queries answer, as each driver gives them. */

/** Drivers answer booleans as booleans or as 't'/'f'. */
export const bool = (v: unknown): boolean => v === true || v === 't'

/** A text array, parsed by the driver or in PostgreSQL's text form (`{a,"b c"}`). */
export function textArray(v: unknown): string[] {
  if (Array.isArray(v)) return v.map(String)
  return parseArrayLiteral(String(v)).map((x) => x ?? '')
}

/** ON DELETE actions by pg_constraint.confdeltype; NO ACTION ('a') has none. */
export const ON_DELETE: Readonly<Record<string, 'cascade' | 'set null' | 'restrict'>> = { c: 'cascade', n: 'set null', r: 'restrict' }

/** `CHECK ((pages >= 0))` → `(pages >= 0)`: the condition pg_get_constraintdef wraps. */
export function checkCondition(definition: string): string {
  const match = /^CHECK \((.*)\)( NOT VALID)?$/s.exec(definition)
  return match ? match[1]! : definition
}
