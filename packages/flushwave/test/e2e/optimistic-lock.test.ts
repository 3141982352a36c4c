import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defineSchema, entity, EntityStateError, OptimisticLockError, t } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

const schema = defineSchema({
  Account: entity('account', {
    id: t.id(),
    owner: t.text(),
    balance: t.integer(),
    version: t.version(),
  }),
  Plain: entity('plain', { id: t.id(), name: t.text() }),
})

let db: TestDatabase<typeof schema.defs>
beforeAll(async () => {
  db = await testDatabase(schema, { name: 'lock' })
})
afterAll(() => db.close())

async function account(balance = 100) {
  const em = db.orm.em()
  const a = em.create('Account', { owner: 'ann', balance })
  await em.flush()
  return a.id
}

describe('optimistic locking', () => {
  it('advances the version with each committed update, checked in the same round trip', async () => {
    const id = await account()
    const em = db.orm.em()
    const a = await em.load('Account', id)
    expect(a.version).toBe(1)
    a.balance = 95
    const cold = await em.flush() // the connection prepares the versioned update's shape
    expect(cold.coldStatements).toBe(1)
    a.balance = 90
    db.queries.length = 0
    const result = await em.flush()
    expect(result).toMatchObject({ statements: 1, waves: 1, roundTrips: 1, coldStatements: 0, updated: { account: 1 } })
    expect(db.writes()[0]!.text).toMatch(
      /^with a as \(select \* from unnest\(.*\) as a\(k, v1, s1, v2, s2, ver\)\), d as \(select a\.\* from a join "account" as x on x\."id" = a\.k order by a\.k for no key update of x\), w as \(update "account" as t set .*"version" = t\."version" \+ 1 from d .* and t\."version" = d\.ver returning t\."id" as k\) select \('flushwave-stale:account:' \|\|/,
    )
    expect(a.version).toBe(3)
    a.balance = 80
    await em.flush()
    expect(a.version).toBe(4)
    const [row] = await db.sql`select balance, version from account where id = ${id}`
    expect(row).toEqual({ balance: 80, version: 4 })
    expect(() => ((a as { version: number }).version = 9)).toThrow(EntityStateError)
  })

  it('never overwrites a concurrent writer: the stale flush fails whole and the entity stays as it was', async () => {
    const id = await account()
    const mine = db.orm.em()
    const theirs = db.orm.em()
    const a = await mine.load('Account', id)
    const plain = mine.create('Plain', { name: 'written with the stale update' })
    const b = await theirs.load('Account', id)
    b.owner = 'bob'
    await theirs.flush()

    a.balance = 0
    const error = await mine.flush().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OptimisticLockError)
    expect(error).toMatchObject({ entity: 'Account', table: 'account', ids: [String(id)] })
    expect((error as Error).message).toMatch(/Account \d+ changed or deleted since it was loaded/)
    const [row] = await db.sql`select owner, balance, version from account where id = ${id}`
    expect(row).toEqual({ owner: 'bob', balance: 100, version: 2 })
    expect(await db.sql`select 1 from plain where name = ${plain.name}`).toHaveLength(0)
    expect(a.version).toBe(1)
    expect(a.balance).toBe(0)

    // Reloading in a fresh EntityManager and redoing the change works.
    const again = db.orm.em()
    const fresh = await again.load('Account', id)
    fresh.balance = 0
    await again.flush()
    expect(fresh.version).toBe(3)
  })

  it('checks deletes too, and a stale delete deletes nothing', async () => {
    const id = await account()
    const mine = db.orm.em()
    const a = await mine.load('Account', id)
    const theirs = db.orm.em()
    ;(await theirs.load('Account', id)).balance = 1
    await theirs.flush()

    mine.remove(a)
    await expect(mine.flush()).rejects.toBeInstanceOf(OptimisticLockError)
    expect(await db.sql`select 1 from account where id = ${id}`).toHaveLength(1)

    const ok = db.orm.em()
    ok.remove(await ok.load('Account', id))
    const result = await ok.flush()
    expect(result.deleted).toEqual({ account: 1 })
    expect(await db.sql`select 1 from account where id = ${id}`).toHaveLength(0)
  })

  it('reports every stale row of a batch', async () => {
    const ids = [await account(), await account(), await account()]
    const mine = db.orm.em()
    const rows = await mine.find('Account', { id: { in: ids } }, { orderBy: { id: 'asc' } })
    const theirs = db.orm.em()
    for (const other of await theirs.find('Account', { id: { in: [ids[0]!, ids[2]!] } })) other.balance = 5
    await theirs.flush()
    for (const r of rows) r.balance = 7
    const error = (await mine.flush().catch((e: unknown) => e)) as OptimisticLockError
    expect(error.ids).toEqual([String(ids[0]), String(ids[2])])
  })

  it('refuses to change a versioned row it never read', async () => {
    const id = await account()
    const em = db.orm.em()
    em.ref('Account', id).balance = 1
    await expect(em.flush()).rejects.toThrow(/never loaded/)
  })
})
