import { startEmbeddedDatabase, type EmbeddedDatabase } from 'devdb'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ConnectionLostError, createTablesSql, flushwave, tcpNoDelay } from '../../src/index.js'
import { bookstore } from '../support/bookstore.js'

/**
 * PostgreSQL itself dies (SIGKILL of every server process, as in a power loss) and comes back with
 * crash recovery. A server of its own, since the others are shared by every test file.
 * FAULT_REPEAT (default 2) sets how many times each case runs.
 */
const REPEAT = Number(process.env.FAULT_REPEAT ?? 2)
const FLUSH_TIMEOUT = 4_000

let db: EmbeddedDatabase
let sql: postgres.Sql
let direct: postgres.Sql
let orm: ReturnType<typeof flushwave<typeof bookstore.defs>>
let anchorId: number
let crashes = 0

beforeAll(async () => {
  db = await startEmbeddedDatabase()
  direct = postgres(db.url, { max: 4, onnotice: () => {} })
  for (const statement of createTablesSql(bookstore)) await direct.unsafe(statement)
  sql = postgres(db.url, { ...tcpNoDelay, max: 2, connect_timeout: 2, onnotice: () => {}, connection: { application_name: 'crash' } })
  orm = flushwave({ schema: bookstore, sql, flushTimeoutMs: FLUSH_TIMEOUT })
  const em = orm.em()
  em.create('Author', { name: 'anchor' })
  await em.flush()
  anchorId = Number((await direct`select id from author where name = 'anchor'`)[0]!.id)
}, 60_000)

afterAll(async () => {
  console.log(`server crashes: ${crashes} (SIGKILL and restart), every flush committed fully or not at all`)
  await sql?.end({ timeout: 1 })
  await direct?.end({ timeout: 1 })
  await db?.stop()
})

let counter = 0
async function unitOfWork() {
  const token = `crash-${++counter}`
  const em = orm.em()
  const anchor = await em.load('Author', anchorId)
  const author = em.create('Author', { name: token })
  for (let b = 0; b < 3; b++) em.create('Book', { title: `${token}-b${b}`, author })
  anchor.email = token
  return { em, token }
}

async function written(token: string): Promise<'all' | 'none' | 'partial'> {
  const [row] = await direct`
    select (select count(*)::int from author where name = ${token}) as authors,
           (select count(*)::int from book where title like ${token + '-b%'}) as books,
           (select count(*)::int from author where id = ${anchorId} and email = ${token}) as anchor`
  const { authors, books, anchor } = row as { authors: number; books: number; anchor: number }
  if (authors === 1 && books === 3 && anchor === 1) return 'all'
  return authors + books + anchor === 0 ? 'none' : 'partial'
}

/** Retries while the pool reconnects after the restart (postgres.js backs off between attempts). */
async function flushUntilWritten(em: { flush(): Promise<unknown> }): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const error = await em.flush().then(() => undefined, (e: unknown) => e)
    if (error === undefined) return
    expect(error).toBeInstanceOf(ConnectionLostError)
    expect((error as ConnectionLostError).outcome).toBe('rolled-back')
    if (attempt === 20) throw error
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
}

describe('the PostgreSQL server crashes and restarts', () => {
  it('a flush against a crashed server fails typed and rolled back; after the restart the retry writes it once', { timeout: 120_000 }, async () => {
    for (let i = 0; i < REPEAT; i++) {
      const { em, token } = await unitOfWork()
      await db.crash()
      crashes++
      const error = await em.flush().then(() => undefined, (e: unknown) => e)
      expect(error).toBeInstanceOf(ConnectionLostError)
      // The connection was dead before the pipeline left: nothing can have committed, though
      // a socket the client had not yet seen close leaves no answer to ask about.
      expect(['rolled-back', 'unknown']).toContain((error as ConnectionLostError).outcome)
      await db.restart()
      expect(await written(token)).toBe('none')
      await flushUntilWritten(em)
      expect(await written(token)).toBe('all')
    }
  })

  it('a crash while the flush waits on a lock: the server, asked after its restart, says rolled back', { timeout: 120_000 }, async () => {
    for (let i = 0; i < REPEAT; i++) {
      const { em, token } = await unitOfWork()
      const holder = await direct.reserve()
      await holder`begin`
      await holder`select 1 from author where id = ${anchorId} for update`
      const flushing = em.flush().then(() => undefined, (e: unknown) => e)
      for (let w = 0; ; w++) {
        const rows = await direct`select 1 from pg_stat_activity where application_name = 'crash' and wait_event_type = 'Lock'`
        if (rows.length > 0) break
        if (w === 200) throw new Error('the flush never waited on the lock')
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      await db.crash()
      crashes++
      // Not released: postgres.js cannot take back a reserved connection whose socket closed.
      // Back up while Flushwave is still asking (it retries its probe until its deadline).
      const restarted = db.restart()
      const error = await flushing
      await restarted
      expect(error).toBeInstanceOf(ConnectionLostError)
      const lost = error as ConnectionLostError
      expect(lost.transactionId).toMatch(/^\d+$/)
      expect(lost.outcome).toBe('rolled-back')
      // Aborted, or never durable: the id is then "in the future" for the recovered server.
      const status = await direct`select pg_xact_status(${lost.transactionId!}::xid8) as s`.then(
        ([row]) => row!.s as string,
        (e: Error) => e.message,
      )
      expect(status).toMatch(/^aborted$|is in the future/)
      expect(await written(token)).toBe('none')
      await flushUntilWritten(em)
      expect(await written(token)).toBe('all')
    }
  })
})
