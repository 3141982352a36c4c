import type { ConnectionTarget } from './otel-types.js'

/**
 * Database, host and port from a driver's options, without a round trip: postgres.js's
 * `sql.options`, pg.Pool's `pool.options` (or its `connectionString`), knex's `client.config.connection`.
 * Whatever cannot be told is left out.
 */
export function targetOf(driver: unknown): ConnectionTarget {
  const sql = field(driver, 'options')
  if (sql && ('database' in sql || 'connectionString' in sql || 'host' in sql)) return fromOptions(sql)
  const connection = field(field(driver, 'client'), 'config')?.['connection']
  if (typeof connection === 'object' && connection !== null) return fromOptions(connection)
  if (typeof connection === 'string') return fromUrl(connection)
  return {}
}

function fromOptions(options: object): ConnectionTarget {
  const url = (options as { connectionString?: unknown }).connectionString
  const parsed = typeof url === 'string' ? fromUrl(url) : {}
  const { database, host, port } = options as { database?: unknown; host?: unknown; port?: unknown }
  return {
    database: typeof database === 'string' ? database : parsed.database,
    // postgres.js keeps host and port as arrays (one entry per host).
    host: (first(host, 'string') as string | undefined) ?? parsed.host,
    port: Number(first(port, 'number') ?? first(port, 'string') ?? parsed.port) || undefined,
  }
}

function fromUrl(text: string): ConnectionTarget {
  try {
    const url = new URL(text)
    return { database: decodeURIComponent(url.pathname.slice(1)) || undefined, host: url.hostname || undefined, port: Number(url.port) || undefined }
  } catch {
    return {}
  }
}

function first(value: unknown, type: 'string' | 'number'): string | number | undefined {
  const one: unknown = Array.isArray(value) ? value[0] : value
  return typeof one === type ? (one as string | number) : undefined
}

function field(value: unknown, key: string): Record<string, unknown> | undefined {
  // postgres.js's sql is a function with properties.
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return undefined
  const inner = (value as Record<string, unknown>)[key]
  return typeof inner === 'object' && inner !== null ? (inner as Record<string, unknown>) : undefined
}
