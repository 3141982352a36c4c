import { plain, type ColumnType } from './column-type.js'

/** Types whose values are one of a fixed vocabulary of texts: booleans, UUIDs and enum labels. */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export const boolean: ColumnType<boolean> = {
  sqlType: 'bool',
  operators: 'equality',
  check: (v) => (typeof v === 'boolean' ? undefined : 'expected a boolean'),
  toText: (v) => (v ? 't' : 'f'),
  fromDb: (raw) => raw === true || raw === 't' || raw === 'true',
  selectExpr: plain,
}

export const uuid: ColumnType<string> = {
  sqlType: 'uuid',
  operators: 'ordered',
  check: (v) => (typeof v === 'string' && UUID.test(v) ? undefined : 'expected a UUID string'),
  // PostgreSQL's own form (lower case): the text a key tuple holds is the one the server returns.
  toText: (v) => v.toLowerCase(),
  fromDb: (raw) => String(raw),
  selectExpr: plain,
}

export function enumeration<const V extends string>(sqlType: string, values: readonly V[]): ColumnType<V> {
  const allowed = new Set<string>(values)
  return {
    sqlType,
    operators: 'ordered',
    check: (v) =>
      typeof v === 'string' && allowed.has(v) ? undefined : `expected one of ${values.map((x) => JSON.stringify(x)).join(', ')}`,
    toText: (v) => v,
    fromDb: (raw) => String(raw) as V,
    selectExpr: plain,
  }
}
