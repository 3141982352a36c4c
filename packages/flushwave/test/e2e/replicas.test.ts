import { createTestSchema, proxyDatabase, startToxiproxy, type LatencyProxy, type TestSchema } from 'devdb'
import postgres from 'postgres'
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest'
import { createTablesSql, defineSchema, entity, flushwave, FlushwaveError, t, type Flushwave, type QueryEvent } from '../../src/index.js'
import { EXECUTORS, openExecutor, type ExecutorName, type OpenedExecutor } from '../support/executors.js'

/**
 * Read replicas and read-your-writes, on every executor, against a replica whose lag the test
 * decides: a schema `<ns>_replica` holding copies of the tables, refreshed only by `replay()`,
 * whose own `pg_last_wal_replay_lsn()` and `pg_is_in_recovery()` come first on the replica pool's
 * search path (PostgreSQL resolves unqualified functions along it when pg_catalog is put after).
 * What a replica would say is then exact and deterministic; the same behaviour on real streaming
 * replicas with replay paused runs in the cluster suite (test/cluster).
 */
const schema = defineSchema({
  Author: entity('author', { id: t.id(), name: t.text() }),
})
type Orm = Flushwave<typeof schema.defs>
const LSN = /^[0-9A-F]+\/[0-9A-F]+$/

describe.each(EXECUTORS)('replicas on %s', (name: ExecutorName) => {
  let ns: TestSchema
  let replica: string
  let direct: postgres.Sql
  let proxy: LatencyProxy
  let opened: OpenedExecutor<typeof schema.defs>
  let orm: Orm
  const events: QueryEvent[] = []
  const url = () => inject('databaseUrl')

  /** The replica catches up: its tables become the primary's, its replay position the primary's current one. */
  const replay = async () => {
    await direct.begin(async (tx) => {
      await tx.unsafe(`delete from "${replica}".author`)
      await tx.unsafe(`insert into "${replica}".author select * from "${ns.name}".author`)
      await tx.unsafe(`update "${replica}".replay set lsn = pg_current_wal_lsn()`)
    })
  }
  const names = (authors: readonly { name: string }[]) => authors.map((a) => a.name).sort()
  const checks = () => events.filter((e) => e.text.includes('pg_last_wal_replay_lsn')).length

  beforeAll(async () => {
    ns = await createTestSchema(url(), `rep_${name.replace(/[^a-z]/g, '')}`)
    replica = `${ns.name}_replica`
    direct = postgres(url(), { max: 1, onnotice: () => {}, connection: { search_path: `"${ns.name}"` } })
    for (const statement of createTablesSql(schema)) await direct.unsafe(statement)
    await direct.unsafe(`create schema "${replica}"`)
    await direct.unsafe(`create table "${replica}".author (like "${ns.name}".author)`)
    await direct.unsafe(`create table "${replica}".replay (lsn pg_lsn not null)`)
    await direct.unsafe(`insert into "${replica}".replay values ('0/0')`)
    await direct.unsafe(`create function "${replica}".pg_last_wal_replay_lsn() returns pg_lsn language sql as 'select lsn from "${replica}".replay'`)
    await direct.unsafe(`create function "${replica}".pg_is_in_recovery() returns boolean language sql as 'select true'`)
    const database = new URL(url())
    proxy = await proxyDatabase(
      await startToxiproxy(),
      { url: url(), host: database.hostname, port: Number(database.port), user: database.username, password: database.password, database: database.pathname.slice(1), external: true, stop: async () => {} },
      { name: 'replica' },
    )
    opened = openExecutor(name, url(), schema, {
      max: 2,
      searchPath: ns.name,
      connectTimeout: 2,
      orm: { onQuery: (e) => events.push(e), replicaRetryMs: 300 },
      replicas: [{ url: proxy.url, searchPath: [replica, 'pg_catalog'] }],
    })
    orm = opened.orm
    await orm.warmUp()
  })
  afterAll(async () => {
    await opened?.close()
    await proxy?.remove()
    await direct?.unsafe(`drop schema if exists "${replica}" cascade`)
    await direct?.end({ timeout: 1 })
    await ns?.drop()
  })
  beforeEach(async () => {
    await direct`delete from author`
    await replay()
    events.length = 0
  })

  it('reads outside a transaction go to the replica; a flush and its WAL position go to the primary in one round trip', async () => {
    const em = orm.em()
    em.create('Author', { name: 'written' })
    const result = await em.flush()
    expect(result.roundTrips).toBe(1)
    expect(result.lsn).toMatch(LSN)
    // A new EntityManager has no position to wait for: it reads the replica, which has not replayed the flush.
    expect(await orm.em().find('Author', {})).toEqual([])
    await direct.unsafe(`insert into "${replica}".author (id, name) values (-1, 'only on the replica')`)
    expect(names(await orm.em().find('Author', {}))).toEqual(['only on the replica'])
    expect(checks()).toBe(0)
    // em.query may write: it goes to the primary.
    expect(await orm.em().query<{ n: number }>('select count(*)::int as n from author where id > 0')).toEqual([{ n: 1 }])
  })

  it('an EntityManager reads its own writes: behind the flush, the replica sends the read to the primary; caught up, it answers', async () => {
    const em = orm.em()
    em.create('Author', { name: 'mine' })
    const { lsn } = await em.flush()
    expect(em.consistencyToken()).toBe(lsn)
    events.length = 0
    expect(names(await em.find('Author', {}))).toEqual(['mine'])
    expect(checks()).toBe(1)
    await replay()
    await direct.unsafe(`insert into "${replica}".author (id, name) values (-1, 'only on the replica')`)
    // Caught up: the replica answers (it has a row the primary has not).
    expect(names(await em.find('Author', {}))).toEqual(['mine', 'only on the replica'])
    // Reads made together go behind one check, in one pipeline.
    events.length = 0
    const [all, count] = await Promise.all([em.find('Author', {}), em.count('Author', {})])
    expect([all.length, count]).toEqual([2, 2])
    expect(checks()).toBe(1)
  })

  it('with replicaWaitMs, a read behind the flush waits on the replica while it catches up, else goes to the primary', async () => {
    const waiting = openExecutor(name, url(), schema, {
      max: 2,
      searchPath: ns.name,
      connectTimeout: 2,
      orm: { replicaWaitMs: 2_000 },
      replicas: [{ url: proxy.url, searchPath: [replica, 'pg_catalog'] }],
    })
    try {
      const em = waiting.orm.em()
      em.create('Author', { name: 'waited for' })
      await em.flush()
      // The replica catches up 300 ms into the read, with a row only it has: the read waits and it answers.
      const started = performance.now()
      const catchUp = new Promise((resolve) => setTimeout(resolve, 300)).then(() =>
        direct.begin(async (tx) => {
          await tx.unsafe(`delete from "${replica}".author`)
          await tx.unsafe(`insert into "${replica}".author select * from "${ns.name}".author`)
          await tx.unsafe(`insert into "${replica}".author (id, name) values (-1, 'only on the replica')`)
          await tx.unsafe(`update "${replica}".replay set lsn = pg_current_wal_lsn()`)
        }),
      )
      const found = await em.find('Author', {})
      const ms = performance.now() - started
      await catchUp
      expect(names(found)).toEqual(['only on the replica', 'waited for'])
      expect(ms).toBeGreaterThanOrEqual(250)
      expect(ms).toBeLessThan(1_800)
      // Behind again, and it stays behind: after about 2 s the read goes to the primary.
      em.create('Author', { name: 'never replayed' })
      await em.flush()
      const before = performance.now()
      expect(names(await em.find('Author', {}))).toEqual(['never replayed', 'waited for'])
      expect(performance.now() - before).toBeGreaterThanOrEqual(1_800)
    } finally {
      await waiting.close()
    }
  })

  it('a consistency token carries the position to the next request: orm.em({ after })', async () => {
    const em = orm.em()
    em.create('Author', { name: 'posted' })
    await em.flush()
    const token = em.consistencyToken()!
    expect(await orm.em().find('Author', {})).toEqual([])
    expect(names(await orm.em({ after: token }).find('Author', {}))).toEqual(['posted'])
    expect(() => orm.em({ after: 'not a position' })).toThrow(FlushwaveError)
    expect(orm.em().consistencyToken()).toBeUndefined()
  })

  it('after a transaction that wrote, reads go to the primary (its commit position is not known)', async () => {
    const em = orm.em()
    await em.transaction(async () => {
      em.create('Author', { name: 'in a transaction' })
      await em.flush()
      // Inside the transaction, reads are the transaction's own, on the primary.
      expect(names(await em.find('Author', {}))).toEqual(['in a transaction'])
    })
    expect(em.consistencyToken()).toBe('primary')
    expect(names(await em.find('Author', {}))).toEqual(['in a transaction'])
    expect(names(await orm.em({ after: 'primary' }).find('Author', {}))).toEqual(['in a transaction'])
  })

  it('a replica that cannot be reached is left out: reads go to the primary, untroubled, and return once it is back', async () => {
    await direct.unsafe(`insert into "${replica}".author (id, name) values (-1, 'only on the replica')`)
    expect(names(await orm.em().find('Author', {}))).toEqual(['only on the replica'])
    const heal = await proxy.addToxic({ type: 'reset_peer', stream: 'downstream', attributes: { timeout: 0 } })
    try {
      // Its pooled connections are reset, and new ones too: the primary answers.
      for (let i = 0; i < 3; i++) expect(await orm.em().find('Author', {})).toEqual([])
    } finally {
      await heal()
    }
    await new Promise((resolve) => setTimeout(resolve, 400)) // replicaRetryMs
    let back: string[] = []
    for (let i = 0; i < 20 && back.length === 0; i++) back = names(await orm.em().find('Author', {}))
    expect(back).toEqual(['only on the replica'])
  })
})

describe('replicas: bad options', () => {
  it('are refused before anything is sent', () => {
    const sql = postgres('postgres://127.0.0.1:1/none')
    expect(() => flushwave({ schema, sql, replicas: 'x' as never })).toThrow(FlushwaveError)
    expect(() => flushwave({ schema, sql, replicas: [null as never] })).toThrow(FlushwaveError)
    expect(() => flushwave({ schema, sql, replicas: [sql], replicaRetryMs: -1 })).toThrow(FlushwaveError)
    for (const wait of [-1, 1.5, 10_001, Number.NaN]) expect(() => flushwave({ schema, sql, replicas: [sql], replicaWaitMs: wait })).toThrow(FlushwaveError)
    expect(() => flushwave({ schema, sql, replicas: [sql], replicaWaitMs: 5_000, flushTimeoutMs: 5_000 })).toThrow(/less than flushTimeoutMs/)
    void sql.end()
  })
})
