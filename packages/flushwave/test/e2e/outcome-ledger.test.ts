import { createTestSchema, searchPathOptions, type TestSchema } from 'devdb'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { CheckViolationError, createTablesSql, defineSchema, entity, FlushError, ledgerTableSql, t } from '../../src/index.js'
import { EXECUTORS, openExecutor } from '../support/executors.js'

/**
 * The outcome ledger as the application meets it: a flush writes exactly one token row in its own
 * transaction (no extra statement, no extra round trip), a missing table is a clear error before
 * anything commits, `outcomeLedger: false` runs without it, and occasional flushes prune old tokens.
 * What the ledger decides after a lost connection is tested fault by fault in faults.test.ts.
 */
const schema = defineSchema({ Note: entity('note', { id: t.id(), text: t.text() }) })

describe.each(EXECUTORS)('the outcome ledger through %s', (name) => {
  let ns: TestSchema
  let sql: postgres.Sql
  beforeAll(async () => {
    ns = await createTestSchema(inject('databaseUrl'), `ledger_${name.replace(/[^a-z]/g, '')}`)
    sql = postgres(inject('databaseUrl'), { max: 1, onnotice: () => {}, ...searchPathOptions(ns.name) })
    for (const statement of createTablesSql(schema, { outcomeLedger: false })) await sql.unsafe(statement)
    await sql`alter table note add constraint note_not_bad check (text <> 'bad')`
  })
  afterAll(async () => {
    await sql?.end()
    await ns?.drop()
  })
  const open = (outcomeLedger?: false) => openExecutor(name, inject('databaseUrl'), schema, { searchPath: ns.name, orm: outcomeLedger === false ? { outcomeLedger } : {} })
  const notes = async () => (await sql`select count(*)::int as n from note`)[0]!.n as number

  it('without its table, a flush fails with what to do and commits nothing; `outcomeLedger: false` flushes without it', async () => {
    const withLedger = open()
    try {
      const em = withLedger.orm.em()
      em.create('Note', { text: 'needs the ledger' })
      const error = await em.flush().catch((e: unknown) => e)
      expect(error).toBeInstanceOf(FlushError)
      expect((error as Error).message).toMatch(/outcome ledger table "flushwave_outcome" does not exist; nothing was committed.*ledgerTableSql\(\).*outcomeLedger: false/)
      expect(await notes()).toBe(0)
    } finally {
      await withLedger.close()
    }
    const without = open(false)
    try {
      const em = without.orm.em()
      em.create('Note', { text: 'no ledger' })
      expect(await em.flush()).toMatchObject({ statements: 1, roundTrips: 2 }) // the id allocation, then the flush
      expect(await notes()).toBe(1)
    } finally {
      await without.close()
    }
  })

  it('each flush writes one token in its own transaction, with no extra statement or round trip', async () => {
    for (const statement of ledgerTableSql()) await sql.unsafe(statement)
    const executor = open()
    try {
      await executor.orm.warmUp()
      const tokens = async () => (await sql`select count(*)::int as n from flushwave_outcome where not probe`)[0]!.n as number
      const before = await tokens()
      for (let i = 0; i < 5; i++) {
        const em = executor.orm.em()
        em.create('Note', { text: `ledgered ${i}` })
        expect(await em.flush()).toMatchObject({ statements: 1, roundTrips: 1 })
      }
      expect((await tokens()) - before).toBe(5)
      // A flush the server refuses writes no token: its transaction rolled back.
      const em = executor.orm.em()
      em.create('Note', { text: 'bad' })
      await expect(em.flush()).rejects.toBeInstanceOf(CheckViolationError)
      expect((await tokens()) - before).toBe(5)
    } finally {
      await executor.close()
    }
  })

  it('prunes tokens older than an hour as flushes go, a few at a time, without a job', async () => {
    await sql`insert into flushwave_outcome (token, at) select gen_random_uuid(), now() - interval '2 hours' from generate_series(1, 100)`
    const old = async () => (await sql`select count(*)::int as n from flushwave_outcome where at < now() - interval '1 hour'`)[0]!.n as number
    expect(await old()).toBe(100)
    const executor = open()
    try {
      // One flush in 64 prunes up to 64 old tokens: 128 flushes remove them all.
      for (let i = 0; i < 128; i++) {
        const em = executor.orm.em()
        em.create('Note', { text: `pruning ${i}` })
        await em.flush()
      }
      expect(await old()).toBe(0)
      expect((await sql`select count(*)::int as n from flushwave_outcome where at > now() - interval '1 hour'`)[0]!.n).toBeGreaterThanOrEqual(128)
    } finally {
      await executor.close()
    }
  })
})
