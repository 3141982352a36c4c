import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defineSchema, entity, flushwave, FlushwaveError, t, ValidationError, type Hooks } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

const schema = defineSchema({
  User: entity('app_user', {
    id: t.id(),
    email: t.text().length({ min: 3, max: 40 }).check((v) => (v.includes('@') ? undefined : 'must contain @')),
    age: t.integer().range({ min: 0, max: 150 }).nullable(),
    updatedAt: t.timestamptz().nullable(),
    plan: t.text().default('free'),
  }),
  Audit: entity('audit', { id: t.id(), what: t.text() }),
  Chain: entity('chain', { id: t.id(), n: t.integer() }),
})
type D = typeof schema.defs

let db: TestDatabase<D>
beforeAll(async () => {
  db = await testDatabase(schema, { name: 'hooks' })
})
afterAll(() => db.close())

const events: string[] = []
const hooks: Hooks<D> = {
  beforeFlush: (em) => void events.push(`beforeFlush ${em.constructor.name}`),
  entities: {
    User: {
      async beforeCreate(user, em) {
        user.email = user.email.toLowerCase()
        // Hooks may read before the transaction starts: here, to pick a plan.
        const paying = await em.find('Audit', { what: `paying ${user.email}` })
        if (paying.length > 0) user.plan = 'paid'
        em.create('Audit', { what: `created ${user.email}` })
      },
      beforeUpdate(user) {
        user.updatedAt = new Date('2026-01-01T00:00:00Z')
      },
      beforeDelete(user, em) {
        em.create('Audit', { what: `deleted ${user.email}` })
      },
      validate: (user) => (user.plan === 'paid' && user.age === null ? 'a paid plan needs an age' : undefined),
      afterCommit: (user, change) => void events.push(`${change} ${user.email}`),
    },
    Chain: {
      // A hook that always creates more work: the flush must stop it.
      beforeCreate: (chain, em) => void em.create('Chain', { n: chain.n + 1 }),
    },
  },
  afterCommit: (result) => void events.push(`committed ${result.statements} statements`),
}

describe('hooks and validation', () => {
  it('run before the flush, and what they change joins the same pipeline', async () => {
    const orm = flushwave({ schema, sql: db.sql, hooks, onQuery: (e) => db.queries.push(e) })
    events.length = 0
    const em = orm.em()
    await em.flush() // nothing to do, but beforeFlush runs
    db.queries.length = 0
    const user = em.create('User', { email: 'Ann@Example.com' })
    const result = await em.flush()
    expect(user.email).toBe('ann@example.com')
    expect(result.inserted).toEqual({ app_user: 1, audit: 1 })
    expect(result.waves).toBe(1)
    expect(db.queries.map((q) => q.phase)).toEqual(['read', 'allocate', 'write', 'write'])

    user.age = 30
    await em.flush()
    expect(user.updatedAt).toEqual(new Date('2026-01-01T00:00:00Z'))
    em.remove(user)
    const removal = await em.flush()
    expect(removal.inserted).toEqual({ audit: 1 })
    expect(removal.deleted).toEqual({ app_user: 1 })
    expect(events).toEqual([
      'beforeFlush EntityManager',
      'beforeFlush EntityManager',
      'created ann@example.com',
      'committed 2 statements',
      'beforeFlush EntityManager',
      'updated ann@example.com',
      'committed 1 statements',
      'beforeFlush EntityManager',
      'deleted ann@example.com',
      'committed 2 statements',
    ])
    expect(await db.sql`select what from audit order by id`).toEqual([{ what: 'created ann@example.com' }, { what: 'deleted ann@example.com' }])
  })

  it('reports every validation failure at once, and sends nothing', async () => {
    const orm = flushwave({ schema, sql: db.sql, hooks, onQuery: (e) => db.queries.push(e) })
    const em = orm.em()
    em.create('Audit', { what: 'paying bo@x.io' })
    await em.flush()
    db.queries.length = 0
    em.create('User', { email: 'no-at-sign', age: 200 })
    em.create('User', { email: 'x' })
    em.create('User', { email: 'bo@x.io' }) // paid, by its hook, without an age
    const error = (await em.flush().catch((e: unknown) => e)) as ValidationError
    expect(error).toBeInstanceOf(ValidationError)
    expect(error.failures.map((f) => `${f.property ?? '*'}: ${f.message}`)).toEqual([
      'email: must contain @',
      'age: must be at most 150',
      'email: must be at least 3 characters long',
      'email: must contain @',
      '*: a paid plan needs an age',
    ])
    expect(db.queries.filter((q) => q.phase !== 'read')).toEqual([])
  })

  it('stops hooks that keep creating work', async () => {
    const orm = flushwave({ schema, sql: db.sql, hooks })
    const em = orm.em()
    em.create('Chain', { n: 0 })
    await expect(em.flush()).rejects.toThrow(FlushwaveError)
    await expect(em.flush()).rejects.toThrow(/after 10 rounds/)
    expect(await db.sql`select count(*)::int as n from chain`).toEqual([{ n: 0 }])
  })

  it('calls afterCommit only once a surrounding transaction commits', async () => {
    const orm = flushwave({ schema, sql: db.sql, hooks })
    events.length = 0
    const em = orm.em()
    await em
      .transaction(async (tx) => {
        tx.create('User', { email: 'rolled@back.io' })
        await tx.flush()
        expect(events.filter((e) => !e.startsWith('beforeFlush'))).toEqual([])
        throw new Error('no')
      })
      .catch(() => undefined)
    expect(events.filter((e) => !e.startsWith('beforeFlush'))).toEqual([])
    // (That EntityManager still holds the rolled-back user as new; a fresh one keeps this focused.)
    await orm.em().transaction(async (tx) => {
      tx.create('User', { email: 'kept@tx.io' })
      await tx.flush()
    })
    expect(events.filter((e) => !e.startsWith('beforeFlush'))).toEqual(['created kept@tx.io', 'committed 2 statements'])
  })
})

// A flush skips its validation pass when nothing can fail it: no field rule in the schema and no
// validate hook. Each of the two alone must still make it run.
describe('validation, with rules in only one place', () => {
  const plain = defineSchema({ Note: entity('note', { id: t.id(), body: t.text() }) })
  const ruled = defineSchema({ Note: entity('note', { id: t.id(), body: t.text().check((v) => (v === '' ? 'must not be empty' : undefined)) }) })
  let plainDb: TestDatabase<typeof plain.defs>
  let ruledDb: TestDatabase<typeof ruled.defs>
  beforeAll(async () => {
    plainDb = await testDatabase(plain, { name: 'hooks_plain' })
    ruledDb = await testDatabase(ruled, { name: 'hooks_ruled' })
  })
  afterAll(async () => {
    await plainDb.close()
    await ruledDb.close()
  })

  it('runs a validate hook when no field has a rule', async () => {
    expect(plain.fieldRules).toBe(false)
    const orm = flushwave({ schema: plain, sql: plainDb.sql, hooks: { entities: { Note: { validate: (n) => (n.body === '' ? 'an empty note' : undefined) } } }, onQuery: (e) => plainDb.queries.push(e) })
    const em = orm.em()
    em.create('Note', { body: '' })
    plainDb.queries.length = 0
    const error = (await em.flush().catch((e: unknown) => e)) as ValidationError
    expect(error).toBeInstanceOf(ValidationError)
    expect(error.failures.map((f) => f.message)).toEqual(['an empty note'])
    expect(plainDb.queries).toEqual([])
  })

  it('runs a field rule when there is no hook', async () => {
    expect(ruled.fieldRules).toBe(true)
    const orm = flushwave({ schema: ruled, sql: ruledDb.sql, onQuery: (e) => ruledDb.queries.push(e) })
    const em = orm.em()
    em.create('Note', { body: '' })
    ruledDb.queries.length = 0
    const error = (await em.flush().catch((e: unknown) => e)) as ValidationError
    expect(error).toBeInstanceOf(ValidationError)
    expect(error.failures.map((f) => `${f.property}: ${f.message}`)).toEqual(['body: must not be empty'])
    expect(ruledDb.queries).toEqual([])
  })

  it('writes what nothing refuses', async () => {
    const orm = flushwave({ schema: plain, sql: plainDb.sql })
    const em = orm.em()
    em.create('Note', { body: '' })
    const result = await em.flush()
    expect(result.inserted).toEqual({ note: 1 })
  })
})
