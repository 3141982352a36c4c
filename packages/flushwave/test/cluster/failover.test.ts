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
 *
 * Meanwhile 4 readers read through the replicas (HAProxy's replica listener): after each kill,
 * until the first unit of work commits on the new primary, reads must still be answered, and every
 * read ends (rows or a typed error) within READ_BOUND_MS.
 */
const KILLS = Number(process.env.CLUSTER_KILLS ?? 5)
const SWITCHOVERS = Number(process.env.CLUSTER_SWITCHOVERS ?? 5)
const WORKERS = 8
/** The longest a unit of work may take, retries and the outcome budget included. */
const BOUND_MS = 60_000
const READERS = 4
const FLUSH_TIMEOUT_MS = 5_000
/** A read tries a replica, then the primary, each within the flush timeout. */
const READ_BOUND_MS = 2 * FLUSH_TIMEOUT_MS + 2_000

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
    opened = openExecutor(name, c.primaryUrl, schema, { max: 10, connectTimeout: 2, orm: { flushTimeoutMs: FLUSH_TIMEOUT_MS }, replicas: [{ url: c.replicaUrl }] })
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
    /** How each unit of work was acknowledged: printed for any that is lost. */
    const how = new Map<string, { at: number; attempts: number; recovered: boolean }>()
    const events: { event: string; at: number }[] = []
    let longestMs = 0
    let running = true
    let sequence = 0

    const worker = async (w: number) => {
      while (running) {
        const token = `${tag}-${w}-${++sequence}`
        const started = performance.now()
        try {
          const done = await orm.unitOfWork(
            async (em) => {
              em.create('Item', { token, worker: w })
              em.increment(em.ref('Tally', 1), 'n', 1)
            },
            { attempts: 12, backoffMs: (attempt) => Math.min(1_000, 50 * 2 ** attempt) },
          )
          acknowledged.add(token)
          acks.push(performance.now())
          how.set(token, { at: performance.now(), attempts: done.attempts, recovered: done.flush.recovered !== undefined })
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

    /** When each read was answered with rows; the longest read; reads that failed, by error name. */
    const reads: number[] = []
    const readFailures = new Map<string, number>()
    const untypedReads: unknown[] = []
    let longestReadMs = 0
    const reader = async () => {
      while (running) {
        const started = performance.now()
        try {
          await orm.em().find('Tally', { id: 1 })
          reads.push(performance.now())
        } catch (error) {
          const kind = error instanceof Error ? error.name : typeof error
          readFailures.set(kind, (readFailures.get(kind) ?? 0) + 1)
          if (!(error instanceof FlushwaveError)) untypedReads.push(error)
          await new Promise((resolve) => setTimeout(resolve, 100))
        }
        longestReadMs = Math.max(longestReadMs, performance.now() - started)
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
    }

    const workers = [...Array.from({ length: WORKERS }, (_, w) => worker(w)), ...Array.from({ length: READERS }, reader)]
    const gaps: { event: string; ms: number }[] = []
    /** After each kill: reads answered within the longest time without a commit, and that time. */
    const downtimeReads: { ms: number; reads: number }[] = []
    try {
      await new Promise((resolve) => setTimeout(resolve, 2_000))
      for (const event of interleave(KILLS, SWITCHOVERS)) {
        const leader = await c.async.leader()
        const at = performance.now()
        events.push({ event, at })
        if (event === 'kill') await c.async.killPostmaster(leader)
        else await c.async.patronictl('switchover', '--force')
        await c.async.waitHealthy(120)
        await new Promise((resolve) => setTimeout(resolve, 1_000))
        // The writes' gap: the longest time without an acknowledgement from the event on.
        const after = acks.filter((ack) => ack >= at)
        let gap = { from: at, to: at }
        after.forEach((ack, i) => {
          const from = i === 0 ? at : after[i - 1]!
          if (ack - from > gap.to - gap.from) gap = { from, to: ack }
        })
        gaps.push({ event, ms: Math.round(gap.to - gap.from) })
        // Reads answered while no unit of work could commit: the replicas kept serving.
        if (event === 'kill') downtimeReads.push({ ms: Math.round(gap.to - gap.from), reads: reads.filter((r) => r > gap.from && r < gap.to).length })
      }
    } finally {
      running = false
      await Promise.all(workers)
    }

    c.waitHealthy(120)
    const rows = new Set((await admin.unsafe(`select token from item_${tag}`)).map((r) => r.token as string))
    const [tally] = await admin.unsafe(`select n from tally_${tag} where id = 1`)
    const lost = [...acknowledged].filter((token) => !rows.has(token))
    for (const token of lost) {
      const h = how.get(token)!
      const near = events.reduce((a, b) => (Math.abs(b.at - h.at) < Math.abs(a.at - h.at) ? b : a))
      console.log(`lost ${token}: acknowledged ${Math.round(h.at - near.at)} ms from a ${near.event}, attempt ${h.attempts}${h.recovered ? ', recovered by the outcome ledger' : ''}`)
    }
    const phantom = [...rolledBack].filter((token) => rows.has(token))
    const unknownCommitted = [...unknown].filter((token) => rows.has(token)).length
    console.log(
      `${name}${c.synchronous ? '' : ' (asynchronous replication)'}: ${acknowledged.size} acknowledged, ${rolledBack.size} rolled back, ${unknown.size} unknown ` +
        `(${unknownCommitted} of them committed); lost ${lost.length}, phantom ${phantom.length}, duplicate ids ${errors.duplicateKeys}, untyped ${errors.untyped.length}; ` +
        `${errors.failedAfterRetries} units failed after retries (${[...errors.byName].map(([k, n]) => `${k} ${n}`).join(', ')}); longest unit of work ${Math.round(longestMs)} ms; ` +
        `longest gap without a commit after each event: ${gaps.map((g) => `${g.event} ${g.ms} ms`).join(', ')}`,
    )
    console.log(
      `${name}: ${reads.length} reads answered, failed ${[...readFailures].map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}; longest read ${Math.round(longestReadMs)} ms; ` +
        `reads answered in the longest time without a commit after each kill: ${downtimeReads.map((d) => `${d.reads} in ${d.ms} ms`).join(', ')}`,
    )
    expect(errors.untyped).toEqual([])
    expect(errors.duplicateKeys).toBe(0)
    expect(phantom).toEqual([])
    if (c.synchronous) expect(lost).toEqual([])
    // Every committed unit of work incremented once: the counter is the rows.
    expect(Number(tally!.n)).toBe(rows.size)
    expect(longestMs).toBeLessThan(BOUND_MS)
    expect(acknowledged.size).toBeGreaterThan(0)
    // Reads go on from the replicas while no primary commits, and each ends within its bound.
    expect(untypedReads).toEqual([])
    expect(longestReadMs).toBeLessThan(READ_BOUND_MS)
    for (const { ms, reads } of downtimeReads) if (ms > 2_000) expect(reads, `reads in a ${ms} ms window without a primary`).toBeGreaterThan(0)
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
