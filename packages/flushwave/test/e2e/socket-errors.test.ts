import type net from 'node:net'
import { createTestSchema, type TestSchema } from 'devdb'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { ConnectionLostError, createTablesSql, flushwave, noDelaySocket, type Flushwave, type SocketTarget } from '../../src/index.js'
import { bookstoreUuid } from '../support/bookstore-uuid.js'

/**
 * A socket that fails with an error (ECONNRESET, EPIPE) in the middle of a flush, on postgres.js.
 * After such an error postgres.js still writes the queries it is given until the socket's close
 * event, and keeps them: it rejects only what it had sent when the error came, and a close after an
 * error rejects nothing. Flushwave sends the statements behind a COPY once its rows are written,
 * so a socket that failed under COPY data left queries behind; on reconnect each took the answer
 * of a newer query (the pool's reconnecting `select 1` never answered: flushes waited for a
 * connection for seconds, reads timed out). The faults suite met it now and then through
 * toxiproxy; here the socket fails on cue, every time.
 */
const schema = bookstoreUuid
const FLUSH_TIMEOUT = 1_500

async function settlesWithin<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const hung = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} still pending after ${ms} ms`)), ms)))
  return Promise.race([promise, hung]).finally(() => clearTimeout(timer))
}

/** Sockets whose next one, once armed, fails with `code` after `bytes` more bytes were written. */
class Breaker {
  private armed: { bytes: number; code: string } | undefined
  broke = 0

  readonly socket = async (target: SocketTarget): Promise<net.Socket> => {
    const socket = await noDelaySocket(target)
    const write = socket.write.bind(socket) as (chunk: Uint8Array, ...rest: unknown[]) => boolean
    socket.write = ((chunk: Uint8Array, ...rest: unknown[]) => {
      const armed = this.armed
      if (armed !== undefined) {
        armed.bytes -= chunk.length
        if (armed.bytes <= 0) {
          this.armed = undefined
          this.broke++
          socket.destroy(Object.assign(new Error(`write ${armed.code}`), { code: armed.code, errno: -32, syscall: 'write' }))
          return false
        }
      }
      return write(chunk, ...rest)
    }) as typeof socket.write
    return socket
  }

  arm(bytes: number, code: string): void {
    this.armed = { bytes, code }
  }
}

describe('postgres.js: a socket error in the middle of a flush', () => {
  let ns: TestSchema
  let sql: postgres.Sql
  let orm: Flushwave<typeof schema.defs>
  const breaker = new Breaker()
  beforeAll(async () => {
    ns = await createTestSchema(inject('databaseUrl'), 'socket_errors')
    // One connection: whatever the broken one keeps, the next query meets.
    sql = postgres(inject('databaseUrl'), { max: 1, ...({ socket: breaker.socket } as object), onnotice: () => {}, connection: { search_path: `"${ns.name}"` } })
    for (const statement of createTablesSql(schema)) await sql.unsafe(statement)
    orm = flushwave({ schema, sql, copyRows: 50, flushTimeoutMs: FLUSH_TIMEOUT })
  })
  afterAll(async () => {
    await sql?.end({ timeout: 1 })
    await ns?.drop()
  })

  /** An author with 40 books of two reviews each: the reviews (80 rows, 2 KB a body) go by COPY. */
  function graph(tag: string) {
    const em = orm.em()
    const author = em.create('Author', { name: tag })
    for (let b = 0; b < 40; b++) {
      const book = em.create('Book', { title: `${tag} ${b}`, author })
      for (const stars of [4, 5]) em.create('Review', { stars, body: `${tag} ${b} ${stars} `.padEnd(2_000, 'x'), book })
    }
    return em
  }

  const count = async (tag: string) => Number((await sql`select count(*)::int as n from author where name = ${tag}`)[0]!.n)

  for (const code of ['EPIPE', 'ECONNRESET']) {
    for (const [where, bytes] of [
      ['under the COPY data', 60_000],
      ['in the statements before COPY', 200],
    ] as const) {
      it(`${code} ${where}: rolled back, and the pool serves the next flush and reads at once`, { timeout: 30_000 }, async () => {
        const tag = `${code}-${bytes}`
        const em = graph(tag)
        breaker.arm(bytes, code)
        const failed = await settlesWithin(em.flush(), FLUSH_TIMEOUT + 8_000, 'the broken flush').then(
          () => undefined,
          (e: unknown) => e,
        )
        expect(breaker.broke).toBeGreaterThan(0)
        expect(failed).toBeInstanceOf(ConnectionLostError)
        expect((failed as ConnectionLostError).outcome).toBe('rolled-back')
        expect(await count(tag)).toBe(0)
        // No waiting: the next flush gets a connection and commits on its first try.
        const retried = await em.flush()
        expect(retried.copied).toEqual({ review: 80 })
        expect(await count(tag)).toBe(1)
        // Each read answered with its own rows.
        const values = Array.from({ length: 20 }, (_, n) => n + 1)
        const answers = await Promise.all(values.map((n) => orm.em().query<{ n: number }>('select $1::int as n', [n])))
        expect(answers.map((rows) => rows[0]?.n)).toEqual(values)
      })
    }
  }
})
