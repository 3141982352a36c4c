import { createTestSchema, type TestSchema } from 'devdb'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { createTablesSql, defineSchema, entity, EntityStateError, FlushError, flushwave, FlushwaveError, t, type Flushwave, type QueryEvent } from '../../src/index.js'
import { EXECUTORS, openExecutor, type ExecutorName, type OpenedExecutor } from '../support/executors.js'

/**
 * Idempotent units of work (`orm.unitOfWork(work, { idempotencyKey })`): the key and the work's
 * result are recorded in the flush's own transaction, so a second run answers with the first's
 * result and writes nothing; concurrent runs of one key write once; keys expire and are pruned.
 * The same under connection faults: idempotency-faults.test.ts.
 */
const schema = defineSchema({
  Order: entity('order', { id: t.uuidId(), key: t.text(), amount: t.integer() }),
  Note: entity('note', { id: t.id(), text: t.text() }),
})
type Orm = Flushwave<typeof schema.defs>

describe.each(EXECUTORS)('idempotent units of work on %s', (name: ExecutorName) => {
  let ns: TestSchema
  let direct: postgres.Sql
  let opened: OpenedExecutor<typeof schema.defs>
  let orm: Orm
  const events: QueryEvent[] = []

  beforeAll(async () => {
    ns = await createTestSchema(inject('databaseUrl'), `idem_${name.replace(/[^a-z]/g, '')}`)
    direct = postgres(inject('databaseUrl'), { max: 1, onnotice: () => {}, connection: { search_path: `"${ns.name}"` } })
    for (const statement of createTablesSql(schema, { idempotencyKeys: true })) await direct.unsafe(statement)
    opened = openExecutor(name, inject('databaseUrl'), schema, { max: 4, searchPath: ns.name, orm: { onQuery: (e) => events.push(e) } })
    orm = opened.orm
    await orm.warmUp()
  })
  afterAll(async () => {
    await opened?.close()
    await direct?.end({ timeout: 1 })
    await ns?.drop()
  })

  const order = (key: string, amount: number) =>
    orm.unitOfWork(
      async (em) => {
        const created = em.create('Order', { key, amount })
        return { orderId: created.id, amount }
      },
      { idempotencyKey: key },
    )
  const rows = async (key: string) => (await direct`select id::text, amount from "order" where key = ${key}`).map((r) => [r.id, r.amount])

  it('records the key in the flush\'s one round trip; a second run writes nothing and answers with the first result', async () => {
    events.length = 0
    const first = await order('k-1', 10)
    expect(first.replayed).toBe(false)
    expect(first.flush?.roundTrips).toBe(1)
    // Nothing but the flush (expired keys are pruned in the background, on no flush's round trip).
    expect(events.filter((e) => e.phase !== 'write' && !e.text.startsWith('delete from "flushwave_idempotency"'))).toEqual([])
    const again = await order('k-1', 99) // a retry with a different body: the key wins
    expect(again).toMatchObject({ replayed: true, flush: undefined, value: first.value })
    expect(await rows('k-1')).toEqual([[first.value.orderId, 10]])
    const [recorded] = await direct`select result from flushwave_idempotency where key = 'k-1'`
    expect(recorded!.result).toEqual({ value: first.value })
  })

  it('concurrent runs of one key: exactly one writes, every one answers with its result', async () => {
    const runs = await Promise.all(Array.from({ length: 6 }, (_, i) => order('k-concurrent', i)))
    const writers = runs.filter((r) => !r.replayed)
    expect(writers).toHaveLength(1)
    for (const run of runs) expect(run.value).toEqual(writers[0]!.value)
    expect(await rows('k-concurrent')).toEqual([[writers[0]!.value.orderId, writers[0]!.value.amount]])
  })

  it('a run whose work fails on what the recorded run did is answered from the record; without a record the error stands', async () => {
    const buyTheLast = () =>
      orm.unitOfWork(
        async (em) => {
          if ((await em.count('Order', { key: 'k-last' })) > 0) throw new Error('sold out')
          return { orderId: em.create('Order', { key: 'k-last', amount: 1 }).id }
        },
        { idempotencyKey: 'k-last' },
      )
    const first = await buyTheLast()
    events.length = 0
    const again = await buyTheLast()
    expect(again).toMatchObject({ replayed: true, flush: undefined, value: first.value })
    expect(events.filter((e) => e.phase === 'write')).toEqual([])
    const never = await orm.unitOfWork(async () => Promise.reject(new Error('sold out')), { idempotencyKey: 'k-never-recorded' }).catch((e: unknown) => e)
    expect((never as Error).message).toBe('sold out')
  })

  it('a unit of work with nothing to write still records its key and its result', async () => {
    const read = () => orm.unitOfWork(async (em) => ({ orders: await em.count('Order', {}) }), { idempotencyKey: 'k-read' })
    const first = await read()
    await order('k-after-read', 1)
    const second = await read()
    expect(first.replayed).toBe(false)
    expect(second).toMatchObject({ replayed: true, value: first.value })
  })

  it('undefined comes back undefined; settings and retries go with the key', async () => {
    const run = () =>
      orm.unitOfWork(
        async (em) => {
          em.create('Note', { text: 'undefined result' })
        },
        { idempotencyKey: 'k-void', settings: { 'app.flavour': 'plain' }, attempts: 2 },
      )
    expect((await run()).value).toBeUndefined()
    expect(await run()).toMatchObject({ replayed: true, value: undefined })
    const [row] = await direct`select count(*)::int as n from note where text = 'undefined result'`
    expect(row!.n).toBe(1)
  })

  it('the work may not flush or open a transaction; a result that is no JSON is refused; nothing is written', async () => {
    await expect(orm.unitOfWork(async (em) => (em.create('Note', { text: 'flushed by the work' }), await em.flush(), 1), { idempotencyKey: 'k-flush' })).rejects.toBeInstanceOf(EntityStateError)
    await expect(orm.unitOfWork(async (em) => em.transaction(async () => 1), { idempotencyKey: 'k-tx' })).rejects.toBeInstanceOf(EntityStateError)
    await expect(orm.unitOfWork(async (em) => (em.create('Note', { text: 'bigint result' }), 10n as never), { idempotencyKey: 'k-bigint' })).rejects.toBeInstanceOf(FlushwaveError)
    expect(() => orm.unitOfWork(async () => 1, { idempotencyKey: '' })).toThrow(FlushwaveError)
    const [row] = await direct`select count(*)::int as n from note where text in ('flushed by the work', 'bigint result')`
    expect(row!.n).toBe(0)
    const [keys] = await direct`select count(*)::int as n from flushwave_idempotency where key in ('k-flush', 'k-tx', 'k-bigint')`
    expect(keys!.n).toBe(0)
  })

  it('a key expires after keepSeconds: the work runs again; expired keys are pruned in the background', { timeout: 30_000 }, async () => {
    const short = openExecutor(name, inject('databaseUrl'), schema, { max: 2, searchPath: ns.name, orm: { idempotencyKeys: { keepSeconds: 1 } } })
    try {
      await direct`insert into flushwave_idempotency (key, result, at) values ('k-ancient', '{"value": 1}', now() - interval '2 days')`
      const run = (amount: number) => short.orm.unitOfWork(async (em) => ((em.create('Order', { key: 'k-expiring', amount }), amount)), { idempotencyKey: 'k-expiring' })
      expect(await run(1)).toMatchObject({ replayed: false, value: 1 })
      expect(await run(2)).toMatchObject({ replayed: true, value: 1 })
      await new Promise((resolve) => setTimeout(resolve, 1_100))
      expect(await run(3)).toMatchObject({ replayed: false, value: 3 })
      expect((await rows('k-expiring')).map((r) => r[1])).toEqual(expect.arrayContaining([1, 3]))
      for (let i = 0; ; i++) {
        const [left] = await direct`select count(*)::int as n from flushwave_idempotency where key = 'k-ancient'`
        if (left!.n === 0) break
        if (i === 50) throw new Error('the expired key was never pruned')
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    } finally {
      await short.close()
    }
  })
})

describe('idempotency keys without their table', () => {
  it('fail the flush typed, naming how to create the table; nothing is committed', async () => {
    const ns = await createTestSchema(inject('databaseUrl'), 'idem_missing')
    const sql = postgres(inject('databaseUrl'), { max: 1, onnotice: () => {}, connection: { search_path: `"${ns.name}"` } })
    try {
      for (const statement of createTablesSql(schema)) await sql.unsafe(statement)
      const orm = flushwave({ schema, sql })
      const error = await orm.unitOfWork(async (em) => void em.create('Note', { text: 'no table' }), { idempotencyKey: 'k' }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(FlushError)
      expect((error as Error).message).toMatch(/idempotencyTableSql/)
      expect((await sql`select count(*)::int as n from note`)[0]!.n).toBe(0)
    } finally {
      await sql.end({ timeout: 1 })
      await ns.drop()
    }
  })
})
