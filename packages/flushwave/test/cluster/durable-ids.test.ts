import { execFileSync } from 'node:child_process'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTablesSql, defineSchema, entity, flushwave, t, type QueryEvent } from '../../src/index.js'
import { EXECUTORS, openExecutor, type ExecutorName, type OpenedExecutor } from '../support/executors.js'
import { cluster } from './cluster.js'

/**
 * Ids are handed out only once the synchronous standby has them. nextval() WAL-logs a sequence 32
 * calls ahead; the call that logs waits for the synchronous standby (PostgreSQL gives it a
 * transaction id), the 31 after it do not: they answer values that only the first call's record
 * covers, while that call may still be waiting. With the standby's WAL receiver stopped
 * (SIGSTOP), a bare nextval() is answered from the logged range at once; with a pooled sequence
 * (increment 1000), that is 31,000 ids a standby promoted now would hand out again. Flushwave's
 * allocation writes a WAL record of its own after the sequence's and waits for it.
 */
describe.skipIf(cluster === undefined || !cluster.synchronous).each(EXECUTORS)('ids on the synchronous standby before they are handed out, %s', (name: ExecutorName) => {
  const c = cluster!
  const table = `idblock_${name.replace(/[^a-z]/g, '')}`
  const tableSchema = defineSchema({ Ticket: entity(table, { id: t.id(), note: t.text() }) })
  let admin: postgres.Sql
  let superuser: postgres.Sql
  let standby: postgres.Sql
  let receiver: number
  let opened: OpenedExecutor<typeof tableSchema.defs>
  const events: QueryEvent[] = []

  const signal = (sig: 'STOP' | 'CONT') => execFileSync('kill', [`-${sig}`, String(receiver)])

  beforeAll(async () => {
    c.waitHealthy()
    admin = postgres(c.primaryUrl, { max: 1, onnotice: () => {} })
    await admin.unsafe(`drop table if exists ${table}`)
    for (const statement of createTablesSql(tableSchema, { outcomeLedger: false })) await admin.unsafe(statement)
    // Patroni in maintenance mode: it must not act on a standby that stopped receiving.
    c.patronictl('pause', '--wait')
    superuser = postgres(c.superuserUrl, { max: 1, onnotice: () => {} })
    const [sync] = await superuser`select application_name as node from pg_stat_replication where sync_state = 'sync'`
    expect(sync, 'a synchronous standby').toBeDefined()
    const node = Number(String(sync!.node).replace(/\D/g, ''))
    standby = postgres(c.superuserNodeUrls[node - 1]!, { max: 1, onnotice: () => {} })
    const [walReceiver] = await standby`select pid from pg_stat_wal_receiver`
    receiver = walReceiver!.pid as number
    opened = openExecutor(name, c.primaryUrl, tableSchema, { max: 2, orm: { outcomeLedger: false, onQuery: (e) => events.push(e) } })
  })
  afterAll(async () => {
    if (receiver !== undefined) signal('CONT')
    if (cluster) c.patronictl('resume', '--wait')
    await opened?.close()
    await Promise.all([admin?.end({ timeout: 1 }), superuser?.end({ timeout: 1 }), standby?.end({ timeout: 1 })])
  })

  it('an id block waits for the synchronous standby; a bare nextval() in the logged range does not', { timeout: 60_000 }, async () => {
    await admin.unsafe(`alter table ${table} alter column id set increment by 1000`)
    const nextval = () => admin.unsafe(`select nextval(pg_get_serial_sequence('${table}', 'id'))::int8 as id`)
    // A pool of its own, empty: the block is asked for now, not taken from an earlier one.
    const orm = flushwave({ schema: tableSchema, executor: opened.orm.executor, outcomeLedger: false })
    const em = orm.em()
    const tickets = Array.from({ length: 10 }, (_, i) => em.create('Ticket', { note: `t${i}` }))
    const bare = postgres(c.primaryUrl, { max: 1, onnotice: () => {} })
    await bare`select 1`
    signal('STOP')
    let assigned = false
    let resumedAt = 0
    let logging: Promise<unknown> | undefined
    try {
      // The call that logs the sequence 32 calls ahead: it waits for the standby.
      logging = nextval().then(() => undefined) // postgres.js sends a query once it is awaited
      await sleep(300)
      // The control: a call inside the logged range is answered without the standby.
      const inRange = await Promise.race([bare.unsafe(`select nextval(pg_get_serial_sequence('${table}', 'id'))::int8 as id`), sleep(5_000).then(() => 'late' as const)])
      expect(inRange, 'a nextval() inside the logged range is answered without the standby').not.toBe('late')
      const assigning = em.assignIds().then(() => (assigned = true))
      assigning.catch(() => undefined)
      await sleep(2_000)
      expect(assigned, 'ids answered while the synchronous standby had not received them').toBe(false)
    } finally {
      signal('CONT')
      resumedAt = performance.now()
    }
    for (let i = 0; !assigned && i < 500; i++) await sleep(20)
    expect(assigned, 'ids answered once the standby went on').toBe(true)
    expect(performance.now() - resumedAt).toBeLessThan(10_000)
    await logging
    await bare.end({ timeout: 1 })
    const ids = tickets.map((ticket) => Number(em.idOf(ticket)))
    expect(new Set(ids).size).toBe(ids.length)
    // The standby's sequence is past every id handed out: promoted, it would not give one again.
    const [seq] = await standby.unsafe(`select last_value::int8 as last from ${table}_id_seq`)
    expect(Number(seq!.last)).toBeGreaterThanOrEqual(Math.max(...ids))
    expect((await em.flush()).inserted).toEqual({ [table]: 10 })
  })
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
