import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTablesSql, defineSchema, entity, ledgerTableSql, t, type QueryEvent } from '../../src/index.js'
import { EXECUTORS, openExecutor, type ExecutorName, type OpenedExecutor } from '../support/executors.js'
import { cluster } from './cluster.js'

/**
 * Read-your-writes on real streaming replicas: the primary through HAProxy, the two replicas
 * directly, one of them with WAL replay paused (`pg_wal_replay_pause()`, the cluster in Patroni's
 * maintenance mode so that Patroni does not resume it). 1,000 flush-then-read pairs per executor:
 * every read sees its own write; the paused replica's reads go to the primary, the other's are
 * answered where it has caught up. An EntityManager that did not flush reads the paused replica's
 * old data: the routing is real.
 */
const PAIRS = Number(process.env.CLUSTER_RYW_PAIRS ?? 1000)

describe.skipIf(cluster === undefined).each(EXECUTORS)('read-your-writes on a real cluster, %s', (name: ExecutorName) => {
  const c = cluster!
  const table = `post_${name.replace(/[^a-z]/g, '')}`
  const tableSchema = defineSchema({ Post: entity(table, { id: t.id(), title: t.text(), writer: t.text() }) })
  let admin: postgres.Sql
  let paused: postgres.Sql
  let opened: OpenedExecutor<typeof tableSchema.defs>
  const events: QueryEvent[] = []

  beforeAll(async () => {
    c.waitHealthy()
    // The application's user owns its tables (the flushwave database is its own).
    admin = postgres(c.primaryUrl, { max: 1, onnotice: () => {} })
    await admin.unsafe(`drop table if exists ${table}`)
    for (const statement of createTablesSql(tableSchema, { outcomeLedger: false })) await admin.unsafe(statement)
    const [ledger] = await admin`select to_regclass('flushwave_outcome') is not null as made`
    if (!ledger!.made) for (const statement of ledgerTableSql()) await admin.unsafe(statement)
    const leader = c.leader()
    const replicas = [1, 2, 3].filter((n) => n !== leader)
    c.patronictl('pause', '--wait')
    paused = postgres(c.superuserNodeUrls[replicas[0]! - 1]!, { max: 1, onnotice: () => {} })
    await paused`select pg_wal_replay_pause()`
    opened = openExecutor(name, c.primaryUrl, tableSchema, {
      max: 4,
      orm: { onQuery: (e) => events.push(e) },
      replicas: replicas.map((n) => ({ url: c.nodeUrls[n - 1]! })),
    })
    await opened.orm.warmUp()
  })
  afterAll(async () => {
    if (paused) await paused`select pg_wal_replay_resume()`.catch(() => undefined)
    await paused?.end({ timeout: 1 })
    if (cluster) c.patronictl('resume', '--wait')
    await opened?.close()
    await admin?.end({ timeout: 1 })
  })

  it(`${PAIRS} flush-then-read pairs: 0 stale reads; one replica paused`, async () => {
    const orm = opened.orm
    let stale = 0
    const before = events.length
    for (let i = 0; i < PAIRS; i++) {
      const em = orm.em()
      const post = em.create('Post', { title: `p${i}`, writer: name })
      const { lsn } = await em.flush()
      expect(lsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/)
      const found = await em.find('Post', { title: `p${i}`, writer: name })
      if (found.length !== 1 || found[0] !== post) stale++
      // The next request, with this one's token.
      const next = await orm.em({ after: em.consistencyToken() }).find('Post', { title: `p${i}`, writer: name })
      if (next.length !== 1) stale++
    }
    const sent = events.slice(before)
    const checks = sent.filter((e) => e.text.includes('pg_last_wal_replay_lsn')).length
    const reads = sent.filter((e) => e.phase === 'read' && !e.text.includes('pg_last_wal_replay_lsn')).length
    console.log(`${name}: ${PAIRS} pairs, ${2 * PAIRS} reads after a write, ${checks} replay checks, ${reads - checks} of them read on the primary (behind, or paused); ${stale} stale`)
    expect(stale).toBe(0)
    expect(checks).toBe(2 * PAIRS)
    // The paused replica serves half of them, and is behind for every one.
    expect(reads - checks).toBeGreaterThanOrEqual(PAIRS * 0.8)
  })

  it('an EntityManager that wrote nothing reads the replicas, the paused one with its old data', async () => {
    const em = freshEm()
    em.create('Post', { title: 'after the pause', writer: name })
    await em.flush()
    let missed = 0
    for (let i = 0; i < 20; i++) if ((await freshEm().find('Post', { title: 'after the pause', writer: name })).length === 0) missed++
    // Round robin over the two replicas: the paused one never has the row.
    expect(missed).toBeGreaterThanOrEqual(5)
  })

  const freshEm = () => opened.orm.em()
})
