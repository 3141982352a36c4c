import { createTestSchema, proxyDatabase, searchPathOptions, startDatabase, startToxiproxy, type LatencyProxy, type TestSchema, type ToxicSpec } from 'devdb'
import type {} from 'devdb/vitest'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ConnectionLostError, createTablesSql, defineSchema, entity, FlushTimeoutError, FlushwaveError, NotLoadedError, t, type Flushwave, type FlushResult } from '../../src/index.js'
import { bookstore } from '../support/bookstore.js'
import { EXECUTORS, openExecutor, type ExecutorName, type OpenedExecutor } from '../support/executors.js'

/**
 * Faults injected with a real toxiproxy between Flushwave and PostgreSQL, at each point of a
 * flush. Every case checks the promise of a unit of work: the rows of a flush are all there or none
 * are, the error is typed and its `outcome` never contradicts the database, the flush settles
 * within its timeout, a retry writes the unit of work exactly once, and the pool is whole after.
 * FAULT_REPEAT (default 2) sets how many times each case runs. The suite runs once per executor.
 */
const REPEAT = Number(process.env.FAULT_REPEAT ?? 2)

/**
 * The bookstore, soft-deleted shelves whose slots a removal marks too (a cascade in the same
 * pipeline), and credits keyed by their book and a role (a composite primary key).
 */
const schema = defineSchema({
  ...bookstore.defs,
  Credit: entity('credit', { book: t.manyToOne('Book').onDelete('cascade'), role: t.text(), note: t.text().nullable() }, { primaryKey: ['book', 'role'] }),
  Shelf: entity('shelf', { id: t.id(), label: t.text(), deletedAt: t.timestamptz().nullable() }, { softDelete: 'deletedAt' }),
  Slot: entity('slot', { id: t.id(), label: t.text(), removedAt: t.timestamp().nullable(), shelf: t.manyToOne('Shelf').onDelete('cascade') }, { softDelete: 'removedAt' }),
})
const FLUSH_TIMEOUT = 1_500
/** How long a passing network failure lasts. */
const HEAL = 200
const APP = 'flushwave-faults'

let proxy: LatencyProxy
let ns: TestSchema
/** Straight to the database, never through the proxy: what the tests believe. */
let direct: postgres.Sql
/** Through the proxy: what Flushwave uses, with the executor of the suite running now. */
let executor: OpenedExecutor<typeof schema.defs>
let orm: Flushwave<typeof schema.defs>
let anchorId: number
let anchorBookId: number
const tally = { cases: 0, committed: 0, rolledBack: 0, unknown: 0, unknownReachable: 0, recovered: 0, retried: 0 }
/** Outcomes seen per fault of the matrix, with what the rows said, for the log. */
const seen = new Map<string, string[]>()

beforeAll(async () => {
  const db = await startDatabase()
  proxy = await proxyDatabase(await startToxiproxy(), db, { name: 'faults' })
  ns = await createTestSchema(db.url, 'faults')
  direct = postgres(db.url, { max: 2, onnotice: () => {}, ...searchPathOptions(ns.name) })
  for (const statement of createTablesSql(schema)) await direct.unsafe(statement)
  const [anchor] = await direct`insert into author (name, rating) values ('anchor', 0) returning id::int as id`
  anchorId = anchor!.id as number
  const [book] = await direct`insert into book (title, author_id) values ('anchor', ${anchorId}) returning id::int as id`
  anchorBookId = book!.id as number
  await direct`insert into credit (book_id, role) values (${anchorBookId}, 'editor')`
})

/** The executor under test, through the proxy, as the application would set it up. */
function open(name: ExecutorName, copyRows?: number): OpenedExecutor<typeof schema.defs> {
  // A short connect_timeout (postgres.js): after a stall, a connection attempt whose answers were dropped gives up soon.
  const orm = { flushTimeoutMs: FLUSH_TIMEOUT, ...(copyRows === undefined ? {} : { copyRows }) }
  return openExecutor(name, proxy.url, schema, { max: 2, searchPath: ns.name, applicationName: APP, connectTimeout: 2, orm })
}

afterAll(async () => {
  console.log(
    `faults: ${tally.cases} fault cases run; committed ${tally.committed} (recovered after a lost COMMIT answer: ${tally.recovered}), ` +
      `rolled back ${tally.rolledBack}, unknown ${tally.unknown} (with the server reachable: ${tally.unknownReachable}, unreachable: ${tally.unknown - tally.unknownReachable}); ` +
      `${tally.retried} retries; 0 partial commits`,
  )
  for (const [fault, outcomes] of seen) console.log(`  ${fault}: ${outcomes.join(', ')}`)
  await direct?.end()
  await ns?.drop()
  await proxy?.remove()
})

let counter = 0

/**
 * A unit of work: a new author with 3 books, 6 reviews (bodies of `bodyBytes`) and a credit per book
 * (keys composed from the books' ids), a change to the anchor author and to the anchor book's credit
 * (found by its key), and the soft delete of a shelf (written beforehand) with its 2 slots.
 */
async function unitOfWork(bodyBytes = 200, on = orm) {
  const token = `uow-${process.pid}-${++counter}`
  const [shelf] = await direct`insert into shelf (label) values (${token}) returning id::int as id`
  await direct`insert into slot (label, shelf_id) select ${token}, ${shelf!.id as number} from generate_series(1, 2)`
  const em = on.em()
  em.remove(em.ref('Shelf', shelf!.id as number))
  const anchor = await em.load('Author', anchorId)
  const author = em.create('Author', { name: token })
  for (let b = 0; b < 3; b++) {
    const book = em.create('Book', { title: `${token}-b${b}`, author })
    for (let r = 0; r < 2; r++) em.create('Review', { stars: 5, body: `${token} `.padEnd(bodyBytes, 'x'), book })
    em.create('Credit', { book, role: 'author', note: token })
  }
  em.ref('Credit', { book: anchorBookId, role: 'editor' }).note = token
  anchor.email = token
  em.increment(anchor, 'rating', '1') // an atomic counter: added once, or (unknown outcome) never resent
  return { em, token, anchor }
}

/** The anchor's counter, which every unit of work adds 1 to. */
const anchorRating = async (): Promise<number> => Number((await direct`select rating from author where id = ${anchorId}`)[0]!.rating)

type Written = 'all' | 'none' | 'partial'

/** How much of the unit of work `token` the database holds, read directly. */
async function written(token: string): Promise<Written> {
  const [row] = await direct`
    select (select count(*)::int from author where name = ${token}) as authors,
           (select count(*)::int from book where title like ${token + '-b%'}) as books,
           (select count(*)::int from review where body like ${token + ' %'}) as reviews,
           (select count(*)::int from author where id = ${anchorId} and email = ${token}) as anchor,
           (select count(*)::int from shelf where label = ${token} and deleted_at is not null) as shelves,
           (select count(*)::int from slot where label = ${token} and removed_at is not null) as slots,
           (select count(*)::int from credit where note = ${token}) as credits`
  const { authors, books, reviews, anchor, shelves, slots, credits } = row as { authors: number; books: number; reviews: number; anchor: number; shelves: number; slots: number; credits: number }
  if (authors === 1 && books === 3 && reviews === 6 && anchor === 1 && shelves === 1 && slots === 2 && credits === 4) return 'all'
  if (authors === 0 && books === 0 && reviews === 0 && anchor === 0 && shelves === 0 && slots === 0 && credits === 0) return 'none'
  return 'partial'
}

/** Fails the test instead of hanging when a promise does not settle in time. */
async function settlesWithin<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const hung = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} still pending after ${ms} ms`)), ms)))
  return Promise.race([promise, hung]).finally(() => clearTimeout(timer))
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Every connection of the pool can be reserved (none leaked), and the server holds no open transaction of ours. */
async function poolIsWhole(): Promise<void> {
  await settlesWithin(executor.whole(), 5_000, 'checking out every pooled connection')
  for (let i = 0; ; i++) {
    const open = await direct`select count(*)::int as n from pg_stat_activity where application_name = ${APP} and state like 'idle in transaction%'`
    if (open[0]!.n === 0) return
    if (i === 50) throw new Error(`${open[0]!.n} transactions of Flushwave still open on the server`)
    await sleep(100)
  }
}

interface Fault {
  name: string
  /** Applied once the unit of work is built and just before flush(); returns what ends the fault. */
  apply(): Promise<() => Promise<void>>
  /** The network heals this long after flush() began; without it, the fault lasts until the flush settled. */
  healAfterMs?: number
  /** The fault outlasts the flush timeout: the error must be a FlushTimeoutError. */
  timesOut?: boolean
  /**
   * Outcomes this fault may produce; anything else fails the case. 'unknown' only where the server
   * cannot be reached within the outcome budget: elsewhere the outcome ledger decides.
   */
  expect: readonly Outcome[]
  /** The network stays broken until the flush settled: the server cannot be asked. */
  unreachable?: true
  bodyBytes?: number
}

type Outcome = 'committed' | 'recovered' | 'rolled-back' | 'unknown'

const toxic = (spec: ToxicSpec) => () => proxy.addToxic(spec)

const faults: Fault[] = [
  {
    name: 'proxy refuses connections before BEGIN',
    apply: async () => {
      await proxy.setEnabled(false)
      return () => proxy.setEnabled(true)
    },
    // 'unknown' when the pool handed out a connection whose close it had not yet seen: the
    // pipeline was written, no answer says whether the server read it, and the server cannot be
    // asked while the proxy refuses every connection.
    unreachable: true,
    expect: ['rolled-back', 'unknown'],
  },
  // Connection-killing faults heal after HEAL ms, as a passing network failure does, so that the
  // server can be asked what happened; one case keeps the network broken throughout.
  { name: 'reset_peer upstream: the pipeline never reaches the server', apply: toxic({ type: 'reset_peer', stream: 'upstream', attributes: { timeout: 0 } }), healAfterMs: HEAL, expect: ['rolled-back'] },
  ...[64, 2_000, 9_000].map((bytes): Fault => ({
    name: `limit_data upstream: the connection closes after ${bytes} bytes of the pipeline`,
    apply: toxic({ type: 'limit_data', stream: 'upstream', attributes: { bytes } }),
    healAfterMs: HEAL,
    bodyBytes: 2_000,
    expect: ['rolled-back'],
  })),
  // The six review bodies make 120 KB; what precedes them in the pipeline is under 4 KB. So the cut
  // falls in the middle of the reviews' rows: their COPY data on the runs that copy, their insert's
  // bound arrays on the others.
  {
    name: 'limit_data upstream: the connection closes in the middle of 120 KB of review rows (COPY data when copying)',
    apply: toxic({ type: 'limit_data', stream: 'upstream', attributes: { bytes: 60_000 } }),
    healAfterMs: HEAL,
    bodyBytes: 20_000,
    expect: ['rolled-back'],
  },
  {
    name: 'reset_peer downstream: the answers are lost from the first byte',
    apply: toxic({ type: 'reset_peer', stream: 'downstream', attributes: { timeout: 0 } }),
    healAfterMs: HEAL,
    expect: ['recovered', 'rolled-back'],
  },
  // The proxy closes both sides when the limit is hit; pipeline bytes the server had not read yet
  // are then lost with the connection, so any outcome is possible: it must match the database.
  ...[40, 200, 320].map((bytes): Fault => ({
    name: `limit_data downstream: the answers stop after ${bytes} bytes`,
    apply: toxic({ type: 'limit_data', stream: 'downstream', attributes: { bytes } }),
    healAfterMs: HEAL,
    expect: ['committed', 'recovered', 'rolled-back'],
  })),
  {
    name: 'limit_data downstream after 200 bytes, and the network stays broken: the server cannot be asked',
    apply: toxic({ type: 'limit_data', stream: 'downstream', attributes: { bytes: 200 } }),
    unreachable: true,
    expect: ['committed', 'recovered', 'rolled-back', 'unknown'],
  },
  {
    name: 'timeout upstream: a stall longer than the flush timeout, then the network heals',
    apply: toxic({ type: 'timeout', stream: 'upstream', attributes: { timeout: 0 } }),
    healAfterMs: FLUSH_TIMEOUT + 500,
    timesOut: true,
    expect: ['rolled-back'],
  },
  {
    name: 'timeout downstream: answers stall past the flush timeout, then the network heals',
    apply: toxic({ type: 'timeout', stream: 'downstream', attributes: { timeout: 0 } }),
    healAfterMs: FLUSH_TIMEOUT + 500,
    timesOut: true,
    expect: ['recovered', 'rolled-back'],
  },
  // toxiproxy delays each chunk in turn, and postgres.js writes a pipeline in 1 KiB pieces: the
  // spike is kept low enough that a few pieces stay within the flush timeout.
  { name: 'latency spike with jitter (100 ± 50 ms)', apply: toxic({ type: 'latency', stream: 'upstream', attributes: { latency: 100, jitter: 50 } }), expect: ['committed'] },
  {
    name: 'slicer: packets cut into a few bytes each way',
    apply: async () => {
      const up = await proxy.addToxic({ type: 'slicer', stream: 'upstream', attributes: { average_size: 8, size_variation: 6, delay: 50 } })
      const down = await proxy.addToxic({ type: 'slicer', stream: 'downstream', attributes: { average_size: 8, size_variation: 6, delay: 50 } })
      return async () => (await up(), await down())
    },
    bodyBytes: 1_000,
    expect: ['committed'],
  },
  { name: 'bandwidth 64 KB/s upstream for a 30 KB pipeline', apply: toxic({ type: 'bandwidth', stream: 'upstream', attributes: { rate: 64 } }), bodyBytes: 5_000, expect: ['committed'] },
  {
    name: 'bandwidth 8 KB/s upstream: the flush outlasts its timeout',
    apply: toxic({ type: 'bandwidth', stream: 'upstream', attributes: { rate: 8 } }),
    bodyBytes: 5_000,
    timesOut: true,
    expect: ['rolled-back'],
  },
]

/** Runs one unit of work under `fault` and checks every promise; returns what happened. */
async function runCase(fault: Fault): Promise<[Outcome, Written]> {
  const ratingBefore = await anchorRating()
  const { em, token } = await unitOfWork(fault.bodyBytes)
  const clear = await fault.apply()
  let cleared: Promise<void> | undefined
  const timer = fault.healAfterMs === undefined ? undefined : setTimeout(() => (cleared = clear()), fault.healAfterMs)
  let result: FlushResult | undefined
  let error: unknown
  try {
    result = await settlesWithin(em.flush(), FLUSH_TIMEOUT + 8_000, `flush under "${fault.name}"`)
  } catch (e) {
    error = e
  } finally {
    clearTimeout(timer)
    await (cleared ?? clear())
  }

  const state = await written(token)
  expect(state, 'a flush wrote part of its unit of work').not.toBe('partial')
  let outcome: Outcome
  if (result) {
    expect(state).toBe('all')
    outcome = result.recovered ? 'recovered' : 'committed'
    // Proven by pg_xact_status (the id arrived) or by the rows the flush inserted with sequence ids.
    if (result.recovered?.transactionId !== undefined) expect(result.recovered.transactionId).toMatch(/^\d+$/)
  } else {
    expect(error).toBeInstanceOf(ConnectionLostError)
    const lost = error as ConnectionLostError
    if (fault.timesOut) expect(lost, lost.message).toBeInstanceOf(FlushTimeoutError)
    outcome = lost.outcome
    // The reported outcome never contradicts the database.
    if (lost.outcome === 'rolled-back') expect(state).toBe('none')
    expect(lost.retryable).toBe(lost.outcome === 'rolled-back')
  }
  expect(fault.expect, `outcome of "${fault.name}"`).toContain(outcome)

  // Faults gone: a retry of the same EntityManager writes the unit of work exactly once.
  if (outcome === 'rolled-back' || outcome === 'unknown') {
    tally.retried++
    // Once the network is back, the pool serves at once: a connection the fault broke must not hold
    // on to its queries, nor keep the next ones waiting. Only where the network stayed broken for
    // the whole flush may the pool still be backing off from refused connections: retry while
    // that is all it says.
    let retry: unknown
    for (let attempt = 0; attempt < (fault.unreachable ? 10 : 1); attempt++) {
      retry = await em.flush().then(() => undefined, (e: unknown) => e)
      if (!(retry instanceof ConnectionLostError && retry.outcome === 'rolled-back')) break
      await sleep(300)
    }
    if (state === 'none') expect(retry).toBeUndefined()
    else expect(retry, 'a retry after an unknown outcome that had committed must not write twice').toBeInstanceOf(FlushwaveError)
    expect(await written(token)).toBe('all')
    // The increment went once; after an unknown outcome it is never resent, so one that had not
    // committed is lost (documented), and one that had is not added twice.
    expect(await anchorRating(), 'the counter after the retry').toBe(ratingBefore + (outcome === 'unknown' && state === 'none' ? 0 : 1))
  } else {
    // Committed: the EntityManager is clean, a second flush has nothing to do.
    const again = await em.flush()
    expect(again.statements).toBe(0)
    expect(await anchorRating(), 'the counter after a commit').toBe(ratingBefore + 1)
  }
  await poolIsWhole()
  tally.cases++
  tally[outcome === 'committed' || outcome === 'recovered' ? 'committed' : outcome === 'rolled-back' ? 'rolledBack' : 'unknown']++
  if (outcome === 'recovered') tally.recovered++
  if (outcome === 'unknown' && !fault.unreachable) tally.unknownReachable++
  return [outcome, state]
}

/** Waits until the flush of APP blocks on a row lock, and returns its server process id. */
async function blockedOnLock(): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const rows = await direct`select pid from pg_stat_activity where application_name = ${APP} and wait_event_type = 'Lock'`
    if (rows.length > 0) return rows[0]!.pid as number
    await sleep(20)
  }
  const activity = await direct`select pid, state, wait_event_type, wait_event, left(query, 60) as query from pg_stat_activity where application_name = ${APP}`
  throw new Error(`the flush never waited on the lock; sessions of Flushwave: ${JSON.stringify(activity)}`)
}

describe.each(EXECUTORS)('%s', (name) => {
  /** Every other run of a fault case flushes its books, reviews and credits by COPY (inside the pipeline the fault cuts). */
  let copying: OpenedExecutor<typeof schema.defs> | undefined
  beforeAll(async () => {
    executor = open(name)
    orm = executor.orm
    await orm.warmUp()
    copying = open(name, 3)
    await copying.orm.warmUp()
    const { em } = await unitOfWork(200, copying.orm)
    expect((await em.flush()).copied).toEqual({ book: 3, review: 6, credit: 3 })
  })
  afterAll(async () => {
    await executor?.close()
    await copying?.close()
  })

  describe('faults between Flushwave and PostgreSQL (toxiproxy)', () => {
    for (const fault of faults) {
      it(fault.name, { timeout: 60_000 }, async () => {
        for (let i = 0; i < REPEAT; i++) {
          orm = i % 2 === 1 && copying ? copying.orm : executor.orm
          const [outcome, rows] = await runCase(fault)
          seen.set(fault.name, [...(seen.get(fault.name) ?? []), outcome === 'unknown' ? `unknown (rows: ${rows})` : outcome])
        }
        orm = executor.orm
      })
    }
  })

  describe('a read whose answers stop', () => {
    // postgres.js pipelines a pool's queries onto busy connections: a connection whose answers
    // stopped would keep taking them, each as late. The late read's connection is cut at its
    // deadline instead (its server process ends), and the reads after it are answered at once.
    it('is cut at its deadline; the next reads are answered at once, each with its own rows', { timeout: 60_000 }, async () => {
      for (let i = 0; i < REPEAT; i++) {
        const text = `select 'late read ${process.pid} ${++counter}'::text as marker`
        await executor.whole() // every connection open: the read reaches the server, only its answer is held
        const heal = await proxy.addToxic({ type: 'timeout', stream: 'downstream', attributes: { timeout: 0 } })
        let late: unknown
        try {
          late = await settlesWithin(orm.em().query(text), FLUSH_TIMEOUT + 8_000, 'the late read').then(
            () => undefined,
            (e: unknown) => e,
          )
          // Still without answers: the server process ends because Flushwave said goodbye on its own.
          for (let w = 0; ; w++) {
            const [row] = await direct`select count(*)::int as n from pg_stat_activity where application_name = ${APP} and query = ${text}`
            if (row!.n === 0) break
            if (w === 100) throw new Error("the late read's server process still runs: its connection was not cut")
            await sleep(20)
          }
        } finally {
          await heal()
        }
        expect(late).toBeInstanceOf(ConnectionLostError)
        expect((late as ConnectionLostError).outcome).toBe('rolled-back')
        // More reads at once than the pool has connections, so that some share one. On postgres.js
        // a read may time out once (typed, nothing written) and is asked again: after the cut, one
        // of the pool's reconnects can stall for longer than the read's 1.5 s (docs/guide/limitations.md,
        // postgres.js's write scheduling). Every answer must be the read's own.
        const values = Array.from({ length: 40 }, (_, n) => n + 1)
        const ask = (n: number) => orm.em().query<{ n: number }>('select $1::int as n', [n])
        const askAgain = (n: number) => ask(n).catch((e: unknown) => (name === 'postgres.js' && e instanceof ConnectionLostError && e.outcome === 'rolled-back' ? ask(n) : Promise.reject(e)))
        const answers = await settlesWithin(Promise.all(values.map(askAgain)), 8_000, 'the reads after the heal')
        expect(answers.map((rows) => rows[0]?.n)).toEqual(values)
        await poolIsWhole()
      }
    })
  })

  describe('after COMMIT was sent, the server is asked what happened (pg_xact_status)', () => {
    it('the answers are lost after the server committed: the flush succeeds, marked recovered', { timeout: 60_000 }, async () => {
      for (let i = 0; i < REPEAT; i++) {
        // Warm, so that postgres.js sends the whole pipeline at once, COMMIT included.
        await orm.warmUp()
        const ratingBefore = await anchorRating()
        const { em, token, anchor } = await unitOfWork()
        const holder = await direct.reserve()
        let dropAnswers: (() => Promise<void>) | undefined
        try {
          // Hold the anchor's row lock: the flush sends everything, gets BEGIN and its transaction id
          // back, then waits on the lock with COMMIT already sent.
          await holder`begin`
          await holder`select 1 from author where id = ${anchorId} for update`
          const flushing = settlesWithin(em.flush(), FLUSH_TIMEOUT + 8_000, 'flush')
          flushing.catch(() => undefined) // awaited below; not unhandled if a step before fails
          await blockedOnLock()
          // From here every answer is dropped; the lock goes, the server commits, and the network
          // heals before the flush times out: only the answers to this flush are lost.
          dropAnswers = await proxy.addToxic({ type: 'timeout', stream: 'downstream', attributes: { timeout: 0 } })
          await holder`commit`
          for (let w = 0; (await written(token)) !== 'all'; w++) {
            if (w === 300) throw new Error(`the flush did not commit once the lock was free: ${await written(token)}`)
            await sleep(10)
          }
          await dropAnswers()
          dropAnswers = undefined
          const result = await flushing
          expect(result.recovered?.transactionId).toMatch(/^\d+$/)
          expect(result.recovered?.cause).toBeInstanceOf(Error)
          const [status] = await direct`select pg_xact_status(${result.recovered!.transactionId!}::xid8) as s`
          expect(status!.s).toBe('committed')
          expect((await em.flush()).statements).toBe(0)
          // The UPDATE's answer, the new counter, was lost with the rest: forgotten, not guessed.
          expect(() => anchor.rating).toThrow(NotLoadedError)
          expect(em.isLoaded(anchor)).toBe(false)
          expect(await anchorRating()).toBe(ratingBefore + 1)
          tally.cases++
          tally.committed++
          tally.recovered++
        } finally {
          await dropAnswers?.()
          holder.release()
        }
        await poolIsWhole()
      }
    })

    // The connection is cut once the whole pipeline, COMMIT included, is written and before any
    // answer arrived: the client knows neither the transaction id nor the server process. The
    // server still holds the transaction, blocked on a lock. Released at once, it may commit before
    // Flushwave asks; held, Flushwave's claim on the ledger token ends it. Never 'unknown'.
    for (const lockHeld of [false, true]) {
      const expected: readonly Outcome[] = lockHeld ? ['rolled-back'] : ['recovered', 'rolled-back']
      it(`the connection is cut right after COMMIT was written, before any answer, the lock ${lockHeld ? 'held on' : 'released at once'}: ${expected.join(' or ')}`, { timeout: 60_000 }, async () => {
        for (let i = 0; i < REPEAT; i++) {
          await orm.warmUp() // the whole pipeline leaves at once
          const { em, token } = await unitOfWork()
          // A flush first, so that the executor is done reconnecting after the previous cut: with no
          // answers coming back, even its reconnecting `select 1` would stall the flush under test.
          const settle = orm.em()
          settle.create('Tag', { name: `${token}-settle` })
          await settle.flush()
          const holder = await direct.reserve()
          let heal: (() => Promise<void>) | undefined
          let outcome: Outcome
          try {
            await holder`begin`
            await holder`select 1 from author where id = ${anchorId} for update`
            heal = await proxy.addToxic({ type: 'timeout', stream: 'downstream', attributes: { timeout: 0 } })
            const flushing = settlesWithin(em.flush(), FLUSH_TIMEOUT + 8_000, 'flush')
            flushing.catch(() => undefined)
            await blockedOnLock()
            await proxy.setEnabled(false) // cuts every connection through the proxy
            if (!lockHeld) await holder`commit`
            await heal()
            heal = undefined
            await sleep(HEAL)
            await proxy.setEnabled(true)
            const settled = await flushing.then((result) => ({ result }), (error: unknown) => ({ error }))
            if ('result' in settled) {
              expect(settled.result.recovered, 'no answer arrived, yet the flush did not need to recover its outcome').toBeDefined()
              outcome = 'recovered'
            } else {
              expect(settled.error).toBeInstanceOf(ConnectionLostError)
              outcome = (settled.error as ConnectionLostError).outcome
            }
          } finally {
            await heal?.()
            await proxy.setEnabled(true)
            await holder`commit`.catch(() => undefined)
            holder.release()
          }
          const state = await written(token)
          expect(expected, `outcome with the lock ${lockHeld ? 'held' : 'released'}`).toContain(outcome)
          expect(state).toBe(outcome === 'recovered' ? 'all' : 'none')
          if (outcome === 'rolled-back') {
            await em.flush()
            expect(await written(token)).toBe('all')
            tally.retried++
          } else {
            expect((await em.flush()).statements).toBe(0)
          }
          await poolIsWhole()
          tally.cases++
          tally[outcome === 'recovered' ? 'committed' : 'rolledBack']++
          if (outcome === 'recovered') tally.recovered++
          seen.set(`cut after COMMIT, lock ${lockHeld ? 'held' : 'released'}`, [...(seen.get(`cut after COMMIT, lock ${lockHeld ? 'held' : 'released'}`) ?? []), outcome])
        }
      })
    }

    it('a flush stuck on a lock past its timeout is ended on the server and reported rolled back', { timeout: 60_000 }, async () => {
      for (let i = 0; i < REPEAT; i++) {
        const { em, token } = await unitOfWork()
        const holder = await direct.reserve()
        let error: unknown
        try {
          await holder`begin`
          await holder`select 1 from author where id = ${anchorId} for update`
          const started = performance.now()
          error = await settlesWithin(em.flush(), FLUSH_TIMEOUT + 8_000, 'flush').then(() => undefined, (e: unknown) => e)
          expect(performance.now() - started).toBeGreaterThanOrEqual(FLUSH_TIMEOUT - 5)
        } finally {
          await holder`commit`
          holder.release()
        }
        expect(error).toBeInstanceOf(FlushTimeoutError)
        const timeout = error as FlushTimeoutError
        expect(timeout.outcome).toBe('rolled-back')
        expect(timeout.transactionId).toMatch(/^\d+$/)
        const [status] = await direct`select pg_xact_status(${timeout.transactionId!}::xid8) as s`
        expect(status!.s).toBe('aborted')
        expect(await written(token)).toBe('none')
        await em.flush()
        expect(await written(token)).toBe('all')
        await poolIsWhole()
        tally.cases++
        tally.rolledBack++
        tally.retried++
      }
    })

    it('the server process is terminated mid-flush (FATAL 57P01): rolled back, typed, retried', { timeout: 60_000 }, async () => {
      // A pool of its own each time: postgres.js 3.4.9 keeps the FATAL error of a terminated server
      // process and hands it to the next session of that connection, which can cost the pool the
      // connection (docs/reliability.md). That is the driver's; this checks Flushwave's promises.
      for (let i = 0; i < REPEAT; i++) {
        const own = open(name)
        const { em, token } = await unitOfWork(200, own.orm)
        const holder = await direct.reserve()
        let error: unknown
        try {
          await holder`begin`
          await holder`select 1 from author where id = ${anchorId} for update`
          const flushing = settlesWithin(em.flush().then(() => undefined, (e: unknown) => e), 15_000, 'flush')
          flushing.catch(() => undefined)
          const pid = await blockedOnLock()
          await direct`select pg_terminate_backend(${pid})`
          error = await flushing
        } finally {
          await holder`commit`
          holder.release()
        }
        expect(error).toBeInstanceOf(ConnectionLostError)
        expect((error as ConnectionLostError).outcome).toBe('rolled-back')
        expect(await written(token)).toBe('none')
        await em.flush()
        expect(await written(token)).toBe('all')
        await own.close()
        tally.cases++
        tally.rolledBack++
        tally.retried++
      }
    })
  })
})
