/**
 * Every column type, by family: each file in types/ is one family. The rest of the library imports
 * them from here.
 */
export { asText, declaredType, plain, writeText, type ColumnType, type OperatorKind, type Wire } from './types/column-type.js'
export { array, parseArrayLiteral } from './types/arrays.js'
export { keyParts, keyTuple, keyTupleType } from './types/key-tuple.js'
export { bytea } from './types/bytes.js'
export { custom, type CustomTypeSpec } from './types/custom.js'
export { jsonb } from './types/json.js'
export { cidr, inet } from './types/network.js'
export { bigint, double, float4Value, integer, numeric, real, serialId, smallint } from './types/numbers.js'
export { boolean, enumeration, uuid } from './types/scalars.js'
export { char, characters, citext, text, unstorableText, varchar } from './types/text.js'
export { date, dateFromDays, interval, time, timestamp, timestamptz } from './types/times.js'
