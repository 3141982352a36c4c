import { asText, type ColumnType } from './column-type.js'

/** In JSON.stringify's output: a \u escape (after an even run of backslashes) of NUL or of a surrogate. */
const UNSTORABLE_JSON_ESCAPE = /(?<!\\)(?:\\\\)*\\u(0000|[dD][89a-fA-F][0-9a-fA-F]{2})/

export function jsonb<T>(): ColumnType<T> {
  return {
    sqlType: 'jsonb',
    operators: 'json',
    mutable: true,
    check: (v) => {
      try {
        // JSON.stringify writes NaN and ±Infinity as null: refuse them rather than store something else.
        let nonFinite: number | undefined
        const json = JSON.stringify(v, (_key, value: unknown) => {
          if (typeof value === 'number' && !Number.isFinite(value)) nonFinite ??= value
          return value
        }) as string | undefined
        if (json === undefined) return 'expected a JSON value'
        if (nonFinite !== undefined) return `JSON has no ${nonFinite} (JSON.stringify would write null)`
        // JSON.stringify escapes NUL and lone surrogates (\u0000, \ud800): PostgreSQL's jsonb rejects both.
        const escape = UNSTORABLE_JSON_ESCAPE.exec(json)?.[1]?.toLowerCase()
        if (escape === '0000') return 'JSON strings cannot contain NUL (\\u0000) characters'
        if (escape) return `JSON strings cannot contain a lone surrogate (\\u${escape})`
        return undefined
      } catch (error) {
        return `not serializable as JSON: ${(error as Error).message}`
      }
    },
    toText: (v) => JSON.stringify(v),
    fromDb: (raw) => JSON.parse(String(raw)) as T,
    // Read as text so the caller's postgres.js json parser cannot change what we see.
    selectExpr: asText,
  }
}

