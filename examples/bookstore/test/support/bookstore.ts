import { createTestSchema, searchPathOptions, type TestSchema } from 'devdb'
import type {} from 'devdb/vitest' // types inject('databaseUrl')
import postgres from 'postgres'
import { inject } from 'vitest'
import { parseServerTiming, type ParsedTiming } from '../../src/server-timing.js'
import { startBookstore, type Bookstore, type BookstoreOptions } from '../../src/server.js'

export interface ApiResponse {
  status: number
  headers: Headers
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked by the tests
  body: any
  text: string
  timing: ParsedTiming | undefined
}

export interface TestBookstore {
  readonly bookstore: Bookstore
  readonly schema: TestSchema
  /** A connection of its own to the test schema, to check what the app committed. */
  readonly db: postgres.Sql
  /** Every response body received, for the "no stack trace, no SQL" check. */
  readonly bodies: string[]
  call(method: string, path: string, body?: unknown, options?: { raw?: string; contentType?: string; headers?: Record<string, string> }): Promise<ApiResponse>
  close(): Promise<void>
}

/**
 * The real app on a free port of 127.0.0.1, migrated by knex into a fresh PostgreSQL schema of the
 * test database, driven over HTTP with fetch.
 */
export async function startTestBookstore(
  options: Partial<Pick<BookstoreOptions, 'poolMax' | 'configure' | 'appDatabaseUrl' | 'seed' | 'warmUp' | 'executor' | 'traceRequests'>> & { name?: string } = {},
): Promise<TestBookstore> {
  const url = inject('databaseUrl')
  const schema = await createTestSchema(url, options.name ?? 'bookstore')
  const bookstore = await startBookstore({
    databaseUrl: url,
    searchPath: schema.name,
    port: 0,
    logLevel: 'error',
    ...(options.poolMax ? { poolMax: options.poolMax } : {}),
    ...(options.configure ? { configure: options.configure } : {}),
    ...(options.appDatabaseUrl ? { appDatabaseUrl: options.appDatabaseUrl } : {}),
    ...(options.seed ? { seed: true } : {}),
    ...(options.warmUp ? { warmUp: true } : {}),
    ...(options.executor ? { executor: options.executor } : {}),
    ...(options.traceRequests ? { traceRequests: true } : {}),
  })
  const db = postgres(url, { max: 1, onnotice: () => {}, ...searchPathOptions(schema.name) })
  const bodies: string[] = []
  return {
    bookstore,
    schema,
    db,
    bodies,
    async call(method, path, body, { raw, contentType, headers = {} } = {}) {
      const payload = raw ?? (body === undefined ? undefined : JSON.stringify(body))
      const response = await fetch(`${bookstore.url}${path}`, {
        method,
        headers: { ...(payload === undefined ? {} : { 'content-type': contentType ?? 'application/json' }), ...headers },
        ...(payload === undefined ? {} : { body: payload }),
      })
      const text = await response.text()
      bodies.push(text)
      let parsed: unknown = undefined
      try {
        parsed = text ? JSON.parse(text) : undefined
      } catch {
        parsed = undefined
      }
      return { status: response.status, headers: response.headers, body: parsed, text, timing: parseServerTiming(response.headers.get('server-timing')) }
    },
    async close() {
      await bookstore.close()
      await db.end()
      await schema.drop()
    },
  }
}

/** A stack frame ("    at fn (file.ts:1:2)") or SQL text in a response body. */
export const STACK_FRAME = /\bat\s+\S*\s*\(?[^\s()]+:\d+:\d+\)?/
export const SQL_TEXT = /\b(select|insert)\b/i
