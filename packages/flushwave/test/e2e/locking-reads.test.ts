import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { defineSchema, entity, EntityStateError, InvalidValueError, LockTimeoutError, t } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { EXECUTORS } from '../support/executors.js'

const schema = defineSchema({
  Job: entity('job', { id: t.id(), status: t.text(), worker: t.text().nullable(), version: t.version() }),
})
let db: TestDatabase<typeof schema.defs>

/** Resolves once `n` parties have called it: two transactions holding their locks at the same time. */
function barrier(n: number): () => Promise<void> {
  let arrived = 0
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  return () => {
    if (++arrived === n) open()
    return opened
  }
}

describe.each(EXECUTORS)('locking reads through %s', (executor) => {
  beforeAll(async () => {
    db = await testDatabase(schema, { name: 'locks', max: 4, executor })
  })
  afterAll(() => db.close())
  beforeEach(async () => {
    await db.sql`truncate job`
    const em = db.orm.em()
    for (let i = 0; i < 3; i++) em.create('Job', { status: 'queued' })
    await em.flush()
    db.queries.length = 0
  })

  it('takes the next job with for update skip locked: two racing workers get different jobs', async () => {
    const bothHold = barrier(2)
    const worker = (name: string) =>
      db.orm.em().transaction(async (tx) => {
        const job = await tx.findOne('Job', { status: 'queued' }, { orderBy: { id: 'asc' }, lock: 'update', wait: 'skip-locked' })
        if (!job) throw new Error(`${name} found no job`)
        await bothHold() // both rows stay locked until both workers have picked
        job.status = 'taken'
        job.worker = name
        await tx.flush()
        return job.id
      })
    const [a, b] = await Promise.all([worker('a'), worker('b')])
    expect(a).not.toBe(b)
    const rows = await db.sql`select id::int, status, worker from job order by id`
    expect(rows.map((r) => r.status)).toEqual(['taken', 'taken', 'queued'])
    expect(new Set(rows.map((r) => r.worker))).toEqual(new Set(['a', 'b', null]))
    const reads = db.queries.filter((q) => q.phase === 'read').map((q) => q.text)
    expect(reads).toHaveLength(2)
    for (const text of reads) expect(text).toMatch(/ order by t\."id" asc limit \$2::int8 for update of t skip locked$/)
  })

  it('fails at once with a typed, retryable LockTimeoutError under nowait when the row is locked', async () => {
    const [first] = await db.sql`select id::int as id from job order by id limit 1`
    const locked = barrier(2)
    const released = barrier(2)
    const holder = db.orm.em().transaction(async (tx) => {
      await tx.load('Job', first!.id, { lock: 'update' })
      await locked()
      await released()
    })
    const contender = (async () => {
      await locked()
      try {
        return await db.orm.em().transaction((tx) => tx.load('Job', first!.id, { lock: 'update', wait: 'nowait' }))
      } finally {
        void released()
      }
    })()
    const error = await contender.catch((e: unknown) => e)
    await holder
    expect(error).toBeInstanceOf(LockTimeoutError)
    expect((error as LockTimeoutError).retryable).toBe(true)
    expect((error as Error).message).toMatch(/^locking read of Job \(table job\) failed/)
    // for share with nowait does not conflict with another share
    const shared = barrier(2)
    const share = () => db.orm.em().transaction(async (tx) => (await tx.load('Job', first!.id, { lock: 'share', wait: 'nowait' }), shared()))
    await Promise.all([share(), share()])
  })

  it('reads a row already in the EntityManager again under lock, keeping unflushed changes over it', async () => {
    const em = db.orm.em()
    const [job] = await em.find('Job', {}, { orderBy: { id: 'asc' }, limit: 1 })
    const elsewhere = db.orm.em()
    const copy = await elsewhere.load('Job', job!.id)
    copy.status = 'moved on'
    await elsewhere.flush() // job's version is now stale in `em`
    await em.transaction(async (tx) => {
      job!.worker = 'mine' // an unflushed change made before the lock
      const again = await tx.load('Job', job!.id, { lock: 'update' })
      expect(again).toBe(job)
      expect([job!.status, job!.worker, job!.version]).toEqual(['moved on', 'mine', 2])
      await tx.flush() // the version read under lock: no OptimisticLockError
    })
    expect(await db.sql`select status, worker, version from job where id = ${job!.id}`).toEqual([{ status: 'moved on', worker: 'mine', version: 3 }])
    const text = db.queries.filter((q) => q.phase === 'read').at(-1)!.text
    expect(text).toMatch(/ where t\."id" = any\(\$1::int8\[\]\) for update of t$/)
  })

  it('refuses a lock outside em.transaction(), and bad lock options, before sending anything', async () => {
    const em = db.orm.em()
    const sent = db.queries.length
    await expect(em.find('Job', {}, { lock: 'update' })).rejects.toThrow(EntityStateError)
    await expect(em.load('Job', 1, { lock: 'share' })).rejects.toThrow(/needs em.transaction\(\)/)
    await em.transaction(async (tx) => {
      await expect(tx.find('Job', {}, { wait: 'nowait' })).rejects.toThrow(InvalidValueError)
      await expect(tx.find('Job', {}, { lock: 'exclusive' as never })).rejects.toThrow(/expected 'update' or 'share'/)
      await expect(tx.load('Job', 1, { lock: 'update', wait: 'later' as never })).rejects.toThrow(/expected 'nowait' or 'skip-locked'/)
    })
    expect(db.queries.slice(sent).filter((q) => q.phase === 'read')).toEqual([])
  })
})
