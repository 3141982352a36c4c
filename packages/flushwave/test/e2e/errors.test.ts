import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  CheckViolationError,
  DeadlockError,
  defineSchema,
  entity,
  flushwave,
  LockTimeoutError,
  NotNullViolationError,
  SerializationError,
  StatementTimeoutError,
  t,
  tcpNoDelay,
} from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

const schema = defineSchema({
  Item: entity('item', { id: t.id(), name: t.text(), qty: t.integer(), note: t.text().nullable() }),
})
type D = typeof schema.defs

let db: TestDatabase<D>
beforeAll(async () => {
  db = await testDatabase(schema, { name: 'errors', max: 4 })
  // Constraints the entity definitions do not know about: the database has the last word.
  await db.sql`alter table item add constraint qty_not_negative check (qty >= 0)`
  await db.sql`alter table item add column sku text not null default 'x'`
  await db.sql`alter table item alter column note set not null`
})
afterAll(() => db.close())

/** A Flushwave on its own connections with extra session settings. */
function withSettings(connection: Record<string, string>) {
  const sql = postgres({ ...(db.sql.options as object), ...tcpNoDelay, max: 2, connection: { ...(db.sql.options as { connection: object }).connection, ...connection } } as never) as postgres.Sql
  return { orm: flushwave({ schema, sql }), end: () => sql.end() }
}

async function item(qty = 1) {
  const em = db.orm.em()
  const i = em.create('Item', { name: 'i', qty, note: 'n' })
  await em.flush()
  return i.id
}

describe('errors a user can cause', () => {
  it('check constraint and not-null violations name the entity, table and constraint', async () => {
    const em = db.orm.em()
    em.create('Item', { name: 'negative', qty: -1, note: 'n' })
    await expect(em.flush()).rejects.toMatchObject({ name: 'CheckViolationError', entity: 'Item', table: 'item', constraint: 'qty_not_negative' })
    await expect(em.flush()).rejects.toBeInstanceOf(CheckViolationError)

    const em2 = db.orm.em()
    em2.create('Item', { name: 'no note', qty: 1 })
    await expect(em2.flush()).rejects.toBeInstanceOf(NotNullViolationError)
  })

  it('a row lock held too long is a LockTimeoutError, a slow statement a StatementTimeoutError', async () => {
    const id = await item()
    const holder = await db.sql.reserve()
    await holder`begin`
    await holder`select 1 from item where id = ${id} for update`
    try {
      for (const [setting, ErrorClass] of [
        [{ lock_timeout: '200ms' }, LockTimeoutError],
        [{ statement_timeout: '200ms' }, StatementTimeoutError],
      ] as const) {
        const { orm, end } = withSettings(setting)
        try {
          const em = orm.em()
          ;(await em.load('Item', id)).qty = 5
          const error = await em.flush().catch((e: unknown) => e)
          expect(error).toBeInstanceOf(ErrorClass)
          expect(error).toMatchObject({ entity: 'Item', table: 'item' })
        } finally {
          await end()
        }
      }
    } finally {
      await holder`rollback`
      holder.release()
    }
  })

  it('a serialization failure is a retryable SerializationError', async () => {
    const a = await item(10)
    const b = await item(10)
    const { orm, end } = withSettings({ default_transaction_isolation: 'serializable' })
    try {
      // Classic write skew: each transaction reads both rows and writes the other one.
      const [one, two] = [orm.em(), orm.em()]
      const outcome = await Promise.allSettled(
        [
          [one, a, b],
          [two, b, a],
        ].map(([em, read, write]) =>
          (em as ReturnType<typeof orm.em>).transaction(async (tx) => {
            await tx.find('Item', { id: { in: [a, b] } })
            await new Promise((r) => setTimeout(r, 100))
            ;(await tx.load('Item', write as number)).qty = 0
            void read
            await tx.flush()
          }),
        ),
      )
      const failures = outcome.filter((o) => o.status === 'rejected').map((o) => (o as PromiseRejectedResult).reason as unknown)
      expect(failures).toHaveLength(1)
      expect(failures[0]).toBeInstanceOf(SerializationError)
      expect(failures[0]).toMatchObject({ retryable: true })
    } finally {
      await end()
    }
  })

  it('a deadlock is a retryable DeadlockError, and the other transaction commits', async () => {
    const a = await item()
    const b = await item()
    const { orm, end } = withSettings({ deadlock_timeout: '100ms' })
    try {
      let step = 0
      const waitFor = async (n: number) => {
        while (step < n) await new Promise((r) => setTimeout(r, 10))
      }
      const run = (first: number, second: number, mine: number) =>
        orm.em().transaction(async (tx) => {
          ;(await tx.load('Item', first)).qty = mine
          await tx.flush()
          step++
          await waitFor(2)
          ;(await tx.load('Item', second)).qty = mine
          await tx.flush()
        })
      const outcome = await Promise.allSettled([run(a, b, 100), run(b, a, 200)])
      const failed = outcome.filter((o) => o.status === 'rejected')
      expect(failed).toHaveLength(1)
      expect((failed[0] as PromiseRejectedResult).reason).toBeInstanceOf(DeadlockError)
      const rows = await db.sql`select qty from item where id in ${db.sql([a, b])}`
      expect(new Set(rows.map((r) => r.qty)).size).toBe(1) // one transaction's values, whole
    } finally {
      await end()
    }
  })
})
