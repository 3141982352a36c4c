import { startEmbeddedDatabase, type EmbeddedDatabase } from 'devdb'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTablesSql, type Flushwave } from '../../src/index.js'
import { bookstore } from '../support/bookstore.js'
import { EXECUTORS, openExecutor, type ExecutorName } from '../support/executors.js'

/**
 * Prepared statements: on every executor, a connection that lost its statements (`DISCARD ALL`),
 * a new connection and a restarted server never fail a flush, and never commit part of one. A
 * server of its own: it is restarted.
 */
type Orm = Flushwave<typeof bookstore.defs>

let db: EmbeddedDatabase
let admin: postgres.Sql
beforeAll(async () => {
  db = await startEmbeddedDatabase()
  admin = postgres(db.url, { max: 1, onnotice: () => {} })
  for (const statement of createTablesSql(bookstore)) await admin.unsafe(statement)
}, 60_000)
afterAll(async () => {
  await admin?.end({ timeout: 1 })
  await db?.stop()
})

/** An author and two books: three statements and the ledger insert. */
async function write(orm: Orm, tag: string) {
  const em = orm.em()
  const author = em.create('Author', { name: tag })
  for (const title of ['a', 'b']) em.create('Book', { title: `${tag}-${title}`, author })
  return em.flush()
}

describe.each(EXECUTORS)('prepared statements on %s', (name: ExecutorName) => {
  it('survive DISCARD ALL, a new connection and a server restart: every flush commits', { timeout: 60_000 }, async () => {
    const app = `named-${name.replace(/[^a-z]/g, '')}`
    const opened = openExecutor(name, db.url, bookstore, { max: 1, applicationName: app })
    const orm = opened.orm
    const tags: string[] = []
    const flush = async (tag: string) => {
      tags.push(tag)
      return write(orm, tag)
    }
    try {
      await flush(`${app}-1`)
      expect(await flush(`${app}-2`)).toMatchObject({ roundTrips: 1, coldStatements: 0 })
      // The session forgets every prepared statement; the next flush commits all the same.
      await opened.query('discard all')
      const afterDiscard = await flush(`${app}-3`)
      expect(afterDiscard.inserted).toEqual({ author: 1, book: 2 })
      expect(await flush(`${app}-4`)).toMatchObject({ roundTrips: 1 })
      await opened.query('discard all')
      expect(await orm.em().find('Author', { name: `${app}-1` })).toHaveLength(1)

      // A new connection: its server process terminated, the pool opens another.
      await admin`select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${app}`
      // The pool may hand the dead connection to the first flush: an application retries it (rolled back).
      await orm.unitOfWork(
        async (em) => {
          const author = em.create('Author', { name: `${app}-5` })
          em.create('Book', { title: `${app}-5-a`, author })
          em.create('Book', { title: `${app}-5-b`, author })
        },
        { attempts: 10 },
      )
      tags.push(`${app}-5`)
      expect(await flush(`${app}-6`)).toMatchObject({ roundTrips: 1 })

      // A restarted server: every connection new, nothing prepared anywhere.
      await db.shutdown()
      await db.restart()
      await orm.unitOfWork(
        async (em) => {
          const author = em.create('Author', { name: `${app}-7` })
          em.create('Book', { title: `${app}-7-a`, author })
          em.create('Book', { title: `${app}-7-b`, author })
        },
        { attempts: 10 },
      )
      tags.push(`${app}-7`)
      expect(await flush(`${app}-8`)).toMatchObject({ roundTrips: 1 })

      const rows = await admin`select a.name, count(b.id)::int as books from author a left join book b on b.author_id = a.id where a.name = any(${tags}) group by a.name order by a.name`
      expect(rows).toEqual([...tags].sort().map((tag) => ({ name: tag, books: 2 })))
    } finally {
      await opened.close()
    }
  })
})
