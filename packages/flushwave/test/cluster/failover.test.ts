import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ConnectionLostError, createTablesSql, defineSchema, entity, FlushwaveError, isRetryable, ledgerTableSql, t, UniqueViolationError } from '../../src/index.js'
import { EXECUTORS, openExecutor, type ExecutorName, type OpenedExecutor } from '../support/executors.js'
import { cluster } from './cluster.js'

/**
 * Flushes through primary failovers on a real Patroni cluster, through HAProxy: 8 workers run
 * units of work (`orm.unitOfWork`, retried) that insert a row and increment a counter, while the
 * primary's postmaster is killed (SIGKILL; Patroni fails over) and the primary is switched over
 * with patronictl, CLUSTER_KILLS and CLUSTER_SWITCHOVERS times each (default 5). Then, read
 * straight from the new primary: every unit of work acknowledged is there (0 lost), none reported
 * rolled back is (0 phantom), no id was handed out twice (0 duplicate keys), every error was typed,
 * and the counter equals the rows. With synchronous replication (the script's default) nothing
 * acknowledged may be lost; with SYNC=0 the losses are counted and printed, and every verdict
 * Flushwave gave is still checked against the rows.
 */
const KILLS = Number(process.env.CLUSTER_KILLS ?? 5)
const SWITCHOVERS = Number(process.env.CLUSTER_SWITCHOVERS ?? 5)
const WORKERS = 8
/** The longest a unit of work may take, retries and the outcome budget included. */
const BOUND_MS = 60_000

describe.skipIf(cluster === undefined).each(EXECUTORS)('failovers under load on a real cluster, %s', (name: ExecutorName) => {
  const c = cluster!
  const tag = name.replace(/[^a-z]/g, '')
  const schema = defineSchema({
    Item: entity(`item_${tag}`, { id: t.id(), token: t.text().unique(), worker: t.integer() }),
    Tally: entity(`tally_${tag}`, { id: t.id(), n: t.integer() }),
  })
  let admin: postgres.Sql
  let opened: OpenedExecutor<typeof schema.defs>

  beforeAll(async () => {
    c.waitHealthy()
    admin = postgres(c.primaryUrl, { max: 1, onnotice: () => {} })
    for (const table of [`item_${tag}`, `tally_${tag}`]) await admin.unsafe(`drop table if exists ${table}`)
    for (const statement of createTablesSql(schema, { outcomeLedger: false })) await admin.unsafe(statement)
    const [ledger] = await admin`select to_regclass('flushwave_outcome') is not null as made`
    if (!ledger!.made) for (const statement of ledgerTableSql()) await admin.unsafe(statement)
    await admin.unsafe(`insert into tally_${tag} (id, n) values (1, 0)`)
    opened = openExecutor(name, c.primaryUrl, schema, { max: 10, connectTimeout: 2, orm: { flushTimeoutMs: 5_000 } })
    await opened.orm.warmUp()
  })
  afterAll(async () => {
    await opened?.close()
    await admin?.end({ timeout: 1 })
  })

  it(`${KILLS} primary kills and ${SWITCHOVERS} switchovers: 0 lost, 0 phantom, 0 duplicate ids, 0 untyped errors`, { timeout: 900_000 }, async () => {
    const orm = opened.orm
    const acknowledged = new Set<string>()
    const rolledBack = new Set<string>()
    const unknown = new Set<string>()
    const errors = { untyped: [] as unknown[], duplicateKeys: 0, failedAfterRetries: 0, byName: new Map<string, number>() }
    /** When each unit of work was acknowledged. */
    const acks: number[] = []
    let longestMs = 0
    let running = true
    let sequence = 0

    const worker = async (w: number) => {
      while (running) {
        const token = `${tag}-${w}-${++sequence}`
        const started = performance.now()
        try {
          await orm.unitOfWork(
            async (em) => {
              em.create('Item', { token, worker: w })
              em.increment(em.ref('Tally', 1), 'n', 1)
            },
            { attempts: 12, backoffMs: (attempt) => Math.min(1_000, 50 * 2 ** attempt) },
          )
          acknowledged.add(token)
          acks.push(performance.now())
        } catch (error) {
          errors.failedAfterRetries++
          const kind = error instanceof Error ? error.name : typeof error
          errors.byName.set(kind, (errors.byName.get(kind) ?? 0) + 1)
          if (!(error instanceof FlushwaveError)) errors.untyped.push(error)
          if (error instanceof UniqueViolationError && error.table === `item_${tag}` && error.constraint?.includes('pkey')) errors.duplicateKeys++
          if (error instanceof ConnectionLostError && error.outcome === 'unknown') unknown.add(token)
          else if (error instanceof FlushwaveError && (isRetryable(error) || error instanceof ConnectionLostError)) rolledBack.add(token)
          else unknown.add(token) // an error that says nothing about the outcome: checked against the rows only
          await new Promise((resolve) => setTimeout(resolve, 100))
        }
        longestMs = Math.max(longestMs, performance.now() - started)
      }
    }

    const workers = Array.from({ length: WORKERS }, (_, w) => worker(w))
    const gaps: { event: string; ms: number }[] = []
    try {
      await new Promise((resolve) => setTimeout(resolve, 2_000))
      for (const event of interleave(KILLS, SWITCHOVERS)) {
        const leader = c.leader()
        const at = performance.now()
        if (event === 'kill') c.killPostmaster(leader)
        else c.patronictl('switchover', '--force')
        c.waitHealthy(120)
        await new Promise((resolve) => setTimeout(resolve, 1_000))
        // The writes' gap: the longest time without an acknowledgement from the event on.
        const after = acks.filter((ack) => ack >= at)
        gaps.push({ event, ms: Math.round(Math.max(0, ...after.map((ack, i) => ack - (i === 0 ? at : after[i - 1]!)))) })
      }
    } finally {
      running = false
      await Promise.all(workers)
    }

    c.waitHealthy(120)
    const rows = new Set((await admin.unsafe(`select token from item_${tag}`)).map((r) => r.token as string))
    const [tally] = await admin.unsafe(`select n from tally_${tag} where id = 1`)
    const lost = [...acknowledged].filter((token) => !rows.has(token))
    const phantom = [...rolledBack].filter((token) => rows.has(token))
    const unknownCommitted = [...unknown].filter((token) => rows.has(token)).length
    console.log(
      `${name}${c.synchronous ? '' : ' (asynchronous replication)'}: ${acknowledged.size} acknowledged, ${rolledBack.size} rolled back, ${unknown.size} unknown ` +
        `(${unknownCommitted} of them committed); lost ${lost.length}, phantom ${phantom.length}, duplicate ids ${errors.duplicateKeys}, untyped ${errors.untyped.length}; ` +
        `${errors.failedAfterRetries} units failed after retries (${[...errors.byName].map(([k, n]) => `${k} ${n}`).join(', ')}); longest unit of work ${Math.round(longestMs)} ms; ` +
        `longest gap without a commit after each event: ${gaps.map((g) => `${g.event} ${g.ms} ms`).join(', ')}`,
    )
    expect(errors.untyped).toEqual([])
    expect(errors.duplicateKeys).toBe(0)
    expect(phantom).toEqual([])
    if (c.synchronous) expect(lost).toEqual([])
    // Every committed unit of work incremented once: the counter is the rows.
    expect(Number(tally!.n)).toBe(rows.size)
    expect(longestMs).toBeLessThan(BOUND_MS)
    expect(acknowledged.size).toBeGreaterThan(0)
  })
})

/** kill, switchover, kill, switchover, … then the rest of whichever has more. */
function interleave(kills: number, switchovers: number): ('kill' | 'switchover')[] {
  const order: ('kill' | 'switchover')[] = []
  for (let i = 0; i < Math.max(kills, switchovers); i++) {
    if (i < kills) order.push('kill')
    if (i < switchovers) order.push('switchover')
  }
  return order
}
