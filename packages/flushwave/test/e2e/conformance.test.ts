import knexFactory from 'knex'
import pg from 'pg'
import { createTestSchema, searchPathOptions } from 'devdb'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import {
  createTablesSql,
  defineSchema,
  entity,
  flushwave,
  ForeignKeyViolationError,
  OptimisticLockError,
  t,
  tcpNoDelay,
  UniqueViolationError,
  type Flushwave,
  type FlushResult,
} from '../../src/index.js'
import { openPGlite, pgliteSql } from '../support/pglite.js'

/** One schema with every feature the executors must agree on. */
const schema = defineSchema({
  Author: entity('author', { id: t.id(), name: t.text().unique(), favorite: t.manyToOne('Book').nullable() }),
  Book: entity('book', {
    id: t.id(),
    title: t.text(),
    author: t.manyToOne('Author').onDelete('cascade'),
    tags: t.manyToMany('Tag'),
    version: t.version(),
  }),
  Review: entity('review', { id: t.id(), stars: t.integer(), book: t.manyToOne('Book').onDelete('cascade') }),
  Tag: entity('tag', { id: t.uuidId(), name: t.text() }),
  Publisher: entity('publisher', { id: t.providedId(), name: t.text() }),
})
type Orm = Flushwave<typeof schema.defs>

/** The same unit-of-work story, told to any executor; returns every FlushResult. */
async function story(orm: Orm): Promise<FlushResult[]> {
  const results: FlushResult[] = []
  const em = orm.em()
  const ann = em.create('Author', { name: 'ann' })
  const books = [1, 2, 3].map((i) => em.create('Book', { title: `book ${i}`, author: ann }))
  ann.favorite = books[0]!
  for (const b of books) for (let r = 1; r <= 3; r++) em.create('Review', { stars: r, book: b })
  const tags = ['a', 'b'].map((name) => em.create('Tag', { id: `0190f3a1-7b7c-7cde-8f00-00000000000${name === 'a' ? 1 : 2}`, name }))
  for (const b of books) for (const tag of tags) b.tags.add(tag)
  em.create('Publisher', { id: 7, name: 'p' })
  results.push(await em.flush())

  books[1]!.title = 'book 2, revised'
  books[2]!.tags.remove(tags[0]!)
  results.push(await em.flush())

  // A unique violation in the middle commits nothing, and the fix flushes.
  const bob = em.create('Author', { name: 'ann' })
  em.create('Book', { title: 'by bob', author: bob })
  await expect(em.flush()).rejects.toBeInstanceOf(UniqueViolationError)
  bob.name = 'bob'
  results.push(await em.flush())

  // A stale version fails whole.
  const other = orm.em()
  ;(await other.load('Book', books[0]!.id)).title = 'changed elsewhere'
  results.push(await other.flush())
  books[0]!.title = 'stale'
  await expect(em.flush()).rejects.toBeInstanceOf(OptimisticLockError)
  const fresh = orm.em()
  ;(await fresh.load('Book', books[0]!.id)).title = 'book 1, final'
  results.push(await fresh.flush())

  // Removing ann cascades to her books, reviews and links; her own favorite (a book of the cycle)
  // is cleared first. Bob pointing at one of those books makes it a foreign-key violation until
  // that reference is cleared too.
  const third = orm.em()
  third.remove(await third.load('Author', ann.id))
  const favorite = await third.load('Author', bob.id)
  favorite.favorite = third.ref('Book', books[1]!.id)
  await expect(third.flush()).rejects.toBeInstanceOf(ForeignKeyViolationError)
  favorite.favorite = null
  results.push(await third.flush())

  // A transaction that rolls back leaves nothing.
  await orm
    .em()
    .transaction(async (tx) => {
      tx.create('Author', { name: 'ghost' })
      await tx.flush()
      throw new Error('rollback')
    })
    .catch(() => undefined)
  return results
}

async function dump(sql: postgres.Sql): Promise<unknown> {
  const out: Record<string, unknown> = {}
  for (const table of ['author', 'book', 'review', 'tag', 'book_tag', 'publisher']) {
    out[table] = await sql.unsafe(`select * from "${table}" order by 1, 2`)
  }
  return out
}

const executors = ['postgres.js', 'node-postgres', 'knex', 'pglite'] as const
const states = new Map<string, unknown>()
const resultsBy = new Map<string, FlushResult[]>()
const closers: (() => Promise<void>)[] = []

/**
 * Each executor gets its own PostgreSQL schema; behind PgBouncer (PGBOUNCER_URL, set by
 * scripts/pgbouncer.sh) its own database instead, since transaction pooling keeps no session
 * settings such as search_path, and postgres.js runs with `prepare: false` (PgBouncer 1.18 cannot
 * keep prepared statements in that mode).
 */
async function isolated(name: string) {
  const direct = inject('databaseUrl')
  const bouncer = process.env.PGBOUNCER_URL
  if (!bouncer) {
    const ns = await createTestSchema(direct, `conf_${name}`)
    return {
      url: direct,
      sqlOptions: { ...searchPathOptions(ns.name) },
      knexOptions: { searchPath: [ns.name] },
      pgOptions: { options: `-c search_path=${ns.name}` },
      drop: () => ns.drop(),
    }
  }
  const database = `conf_${name}_${process.pid}_${Date.now().toString(36)}`
  const admin = postgres(direct, { max: 1, onnotice: () => {} })
  await admin.unsafe(`create database ${database}`)
  const url = new URL(bouncer)
  url.pathname = `/${database}`
  return {
    url: url.toString(),
    sqlOptions: { prepare: false },
    knexOptions: {},
    pgOptions: {},
    drop: async () => {
      await admin.unsafe(`drop database if exists ${database} with (force)`)
      await admin.end()
    },
  }
}

beforeAll(async () => {
  for (const name of executors) {
    if (name === 'pglite') {
      // In-process: a database of its own, nothing of PgBouncer or the network in between.
      const lite = await openPGlite()
      const sql = pgliteSql(lite)
      for (const statement of createTablesSql(schema)) await sql.unsafe(statement)
      resultsBy.set(name, await story(flushwave({ schema, pglite: lite })))
      states.set(name, await dump(sql))
      closers.push(() => lite.close())
      continue
    }
    const db = await isolated(name.replace(/[^a-z]/g, ''))
    const sql = postgres(db.url, { ...tcpNoDelay, max: 2, onnotice: () => {}, ...db.sqlOptions })
    for (const statement of createTablesSql(schema)) await sql.unsafe(statement)
    const knex = knexFactory({ client: 'pg', connection: db.url, ...db.knexOptions, pool: { min: 0, max: 2 } })
    // The application's own pool, made without `pipeline: true`: the executor switches it per flush.
    const pool = new pg.Pool({ connectionString: db.url, max: 2, ...db.pgOptions })
    const orm = name === 'knex' ? flushwave({ schema, knex }) : name === 'node-postgres' ? flushwave({ schema, pg: pool }) : flushwave({ schema, sql })
    resultsBy.set(name, await story(orm))
    states.set(name, await dump(sql))
    closers.push(async () => {
      await pool.end()
      await knex.destroy()
      await sql.end()
      await db.drop()
    })
  }
})
afterAll(async () => {
  for (const close of closers) await close()
})

describe('executor conformance', () => {
  it('postgres.js, node-postgres, knex and PGlite leave identical database state after the same story', () => {
    expect(states.get('node-postgres')).toEqual(states.get('postgres.js'))
    expect(states.get('knex')).toEqual(states.get('postgres.js'))
    expect(states.get('pglite')).toEqual(states.get('postgres.js'))
    const state = states.get('knex') as Record<string, unknown[]>
    expect(state.author).toHaveLength(1) // ann cascaded away, bob stays, ghost rolled back
    expect(state.book).toHaveLength(1)
    expect(state.publisher).toHaveLength(1)
  })

  it('report the same rows written, each flush in one round trip after its id allocation', () => {
    const reference = resultsBy.get('postgres.js')!.map((r) => [r.inserted, r.updated, r.deleted])
    for (const name of executors) {
      const results = resultsBy.get(name)!
      expect(results.map((r) => [r.inserted, r.updated, r.deleted])).toEqual(reference)
      // Cold or warm, direct or through PgBouncer: the pipeline itself is one round trip.
      for (const r of results) expect([name, r.roundTrips - r.plan.preparation.reduce((n, p) => n + p.roundTrips, 0)]).toEqual([name, 1])
    }
  })
})
