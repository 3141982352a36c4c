import pg from 'pg'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { ConnectionLostError, createTablesSql, FlushTimeoutError, type Flushwave, type FlushResult } from '../../src/index.js'
import { OUTCOME_BUDGET_MS } from '../../src/drivers/protocol/outcome.js'
import { bookstore } from '../support/bookstore.js'
import { EXECUTORS, openExecutor, type ExecutorName, type OpenedExecutor } from '../support/executors.js'

/**
 * A fault point toxiproxy cannot reach: PgBouncer (transaction pooling) in front of PostgreSQL drops
 * the client connection while the flush's COMMIT is in flight. A direct connection holds the anchor
 * author's row lock, so the flush sends BEGIN … COMMIT through PgBouncer and its server process
 * waits on the lock; then PgBouncer's admin console runs `KILL <db>` (drops every client and server
 * connection of that database, and pauses it) and `RESUME <db>`, and the lock is released. The
 * flush must settle with success (`recovered`) or a typed ConnectionLostError `rolled-back`, never
 * `unknown` (the server stays reachable), matching the rows; the same EntityManager then writes the
 * unit of work exactly once, and the pool works.
 *
 * What happens on the server (seen every time here, PgBouncer 1.18, PostgreSQL 15): PgBouncer closes
 * its server connection too, but a backend waiting on a lock does not read its socket, so it is still
 * waiting after the KILL, with the rest of the pipeline, COMMIT included, already sent to it. If the
 * lock goes before Flushwave's probe (through PgBouncer, once RESUMEd) ends the backend, the backend
 * finishes the UPDATE and runs that COMMIT (writing to a socket whose peer has closed does not fail
 * at once): committed, and the flush succeeds as `recovered`. Otherwise the probe finds the
 * transaction `in progress` and ends it with pg_terminate_backend: rolled back. Which comes first is
 * a race, so the lock goes at once in every other case (either outcome, each checked against the
 * rows) and stays until the flush settled in the others (rolled back, always).
 *
 * Needs PGBOUNCER_URL and the admin console (scripts/pgbouncer.sh sets PGBOUNCER_URL and
 * PGBOUNCER_ADMIN_URL, with the user in admin_users); without PgBouncer the file is skipped.
 * The file works in a database of its own, so that `KILL` drops only this test's connections.
 * FAULT_REPEAT (default 2) sets how many times the case runs per executor.
 */
const REPEAT = Number(process.env.FAULT_REPEAT ?? 2)
const FLUSH_TIMEOUT = 3_000
/** A failed flush settles within its timeout plus the outcome budget; the rest is slack for a busy machine. */
const SETTLE_MS = FLUSH_TIMEOUT + OUTCOME_BUDGET_MS + 8_000
const bouncer = process.env.PGBOUNCER_URL
const adminUrl = process.env.PGBOUNCER_ADMIN_URL ?? (bouncer ? withDatabase(bouncer, 'pgbouncer') : undefined)
/** The flush's connections, and the direct ones the test reads with (never through PgBouncer). */
const APP = 'flushwave-pgb-faults'
const DIRECT_APP = 'flushwave-pgb-faults-direct'

function withDatabase(url: string, database: string): string {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Fails the test instead of hanging when a promise does not settle in time. */
async function settlesWithin<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const hung = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} still pending after ${ms} ms`)), ms)))
  return Promise.race([promise, hung]).finally(() => clearTimeout(timer))
}

/** Polls `check` every 20 ms until it returns a value, or fails naming `what` after `ms`. */
async function waitFor<T>(check: () => Promise<T | undefined>, ms: number, what: string): Promise<T> {
  const until = performance.now() + ms
  for (;;) {
    const value = await check()
    if (value !== undefined) return value
    if (performance.now() > until) throw new Error(`${what}: not after ${ms} ms`)
    await sleep(20)
  }
}

type Outcome = 'committed' | 'recovered' | 'rolled-back' | 'unknown'
type Written = 'all' | 'none' | 'partial'

describe.skipIf(!bouncer)('PgBouncer drops the client connection while COMMIT is in flight (skipped without PGBOUNCER_URL: run through scripts/pgbouncer.sh)', () => {
  const database = `fw_pgb_faults_${process.pid}_${Date.now().toString(36)}`
  /** On the server itself, outside the test's database: creates and drops it. */
  let server: postgres.Sql
  /** Straight to the test's database, never through PgBouncer: what the test believes. */
  let direct: postgres.Sql
  /** PgBouncer's admin console (simple queries only). */
  let console_: pg.Client
  let anchorId: number
  /** PgBouncer's server_login_retry before this file changed it, restored afterwards. */
  let loginRetry: string | undefined
  let counter = 0
  const summary = new Map<ExecutorName, Record<Outcome | 'backendOutlivedKill', number>>()

  beforeAll(async () => {
    const directUrl = inject('databaseUrl')
    server = postgres(directUrl, { max: 1, onnotice: () => {} })
    await server.unsafe(`create database ${database}`)
    direct = postgres(withDatabase(directUrl, database), { max: 3, onnotice: () => {}, connection: { application_name: DIRECT_APP } })
    for (const statement of createTablesSql(bookstore)) await direct.unsafe(statement)
    const [anchor] = await direct`insert into author (name, rating) values ('anchor', 0) returning id::int as id`
    anchorId = anchor!.id as number
    console_ = new pg.Client({ connectionString: adminUrl })
    // A console dropped by PgBouncer must fail the next command, not crash the process.
    console_.on('error', () => undefined)
    await settlesWithin(console_.connect(), 10_000, `connecting to PgBouncer's admin console at ${adminUrl} (is the user in admin_users?)`)
    // KILL also pauses the database until RESUME. A login that lands in between (Flushwave's probe
    // reconnects at once) has its server connection closed by the pause, which PgBouncer 1.18 counts
    // as a failed server login: it then opens no server connection for server_login_retry (15 s by
    // default), longer than Flushwave's outcome budget, and the server is out of reach. That pause is
    // the injection tool's, not the fault's: keep the retry short while this file runs.
    const { rows } = await settlesWithin(console_.query<{ key: string; value: string }>('SHOW CONFIG'), 5_000, 'PgBouncer admin command SHOW CONFIG')
    loginRetry = rows.find((row) => row.key === 'server_login_retry')?.value
    await admin('SET server_login_retry = 1')
  })

  afterAll(async () => {
    for (const [name, n] of summary) {
      console.log(
        `pgbouncer-faults ${name}: ${n.committed + n.recovered + n['rolled-back'] + n.unknown} cases; committed ${n.committed}, ` +
          `recovered ${n.recovered}, rolled back ${n['rolled-back']}, unknown ${n.unknown}; backend still waiting after the KILL: ${n.backendOutlivedKill}`,
      )
    }
    if (loginRetry !== undefined) await admin(`SET server_login_retry = ${loginRetry}`).catch(() => undefined)
    await console_?.end().catch(() => undefined)
    await direct?.end()
    await server?.unsafe(`drop database if exists ${database} with (force)`)
    await server?.end()
  })

  /** Runs an admin command on PgBouncer's console (simple query protocol). */
  async function admin(command: string): Promise<void> {
    await settlesWithin(console_.query(command), 5_000, `PgBouncer admin command ${command}`)
  }

  /** A unit of work: a new author with 3 books and 6 reviews, and a change to the anchor author (the one locked). */
  async function unitOfWork(orm: Flushwave<typeof bookstore.defs>) {
    const token = `uow-${process.pid}-${++counter}`
    const em = orm.em()
    const anchor = await em.load('Author', anchorId)
    const author = em.create('Author', { name: token })
    for (let b = 0; b < 3; b++) {
      const book = em.create('Book', { title: `${token}-b${b}`, author })
      for (let r = 0; r < 2; r++) em.create('Review', { stars: 5, body: `${token} `.padEnd(200, 'x'), book })
    }
    anchor.email = token
    return { em, token }
  }

  /** How much of the unit of work `token` the database holds, read directly. */
  async function written(token: string): Promise<Written> {
    const [row] = await direct`
      select (select count(*)::int from author where name = ${token}) as authors,
             (select count(*)::int from book where title like ${token + '-b%'}) as books,
             (select count(*)::int from review where body like ${token + ' %'}) as reviews,
             (select count(*)::int from author where id = ${anchorId} and email = ${token}) as anchor`
    const { authors, books, reviews, anchor } = row as { authors: number; books: number; reviews: number; anchor: number }
    if (authors === 1 && books === 3 && reviews === 6 && anchor === 1) return 'all'
    if (authors === 0 && books === 0 && reviews === 0 && anchor === 0) return 'none'
    return 'partial'
  }

  /** The server process of the flush, once it waits on the anchor's row lock (found by database: PgBouncer may not pass application_name on). */
  const blockedOnLock = () =>
    waitFor(
      async () => {
        const rows = await direct`select pid from pg_stat_activity where datname = ${database} and wait_event_type = 'Lock'`
        return rows[0]?.pid as number | undefined
      },
      10_000,
      'the flush waiting on the row lock',
    )

  async function xactStatus(xid: string): Promise<unknown> {
    const [row] = await direct`select pg_xact_status(${xid}::xid8) as s`
    return row!.s
  }

  /** Every connection of the pool can be checked out, and no transaction is left open on the server. */
  async function poolIsWhole(executor: OpenedExecutor<typeof bookstore.defs>): Promise<void> {
    await settlesWithin(executor.whole(), 10_000, 'checking out every pooled connection through PgBouncer')
    await waitFor(
      async () => {
        const [row] = await direct`select count(*)::int as n from pg_stat_activity where datname = ${database} and application_name <> ${DIRECT_APP} and state like 'idle in transaction%'`
        return row!.n === 0 ? true : undefined
      },
      5_000,
      'no transaction of the flush left open on the server',
    )
  }

  /**
   * One flush under the fault; returns its outcome and whether its server process was still waiting
   * on the lock after PgBouncer had dropped its connection. `holdLock`: the lock stays until the
   * flush settled, so the backend cannot commit and Flushwave's probe must end it (rolled back);
   * otherwise it goes right after RESUME and the backend races the probe (either outcome).
   */
  async function runCase(executor: OpenedExecutor<typeof bookstore.defs>, holdLock: boolean): Promise<{ outcome: Outcome; outlived: boolean }> {
    const { em, token } = await unitOfWork(executor.orm)
    const holder = await settlesWithin(direct.reserve(), 5_000, 'reserving the direct connection that holds the lock')
    let killed = false
    let resumed = false
    let locked = false
    let outlived = false
    let settled: { result: FlushResult } | { error: unknown }
    let backend: number
    try {
      await settlesWithin(holder`begin`, 5_000, 'begin on the lock holder')
      locked = true
      await settlesWithin(holder`select 1 from author where id = ${anchorId} for update`, 5_000, "locking the anchor author's row")
      // The whole pipeline, COMMIT included, goes out in one write (one round trip through
      // PgBouncer for every executor: round-trips-executors.test.ts); its UPDATE of the anchor waits.
      const flushing = settlesWithin(
        em.flush().then(
          (result): { result: FlushResult } => ({ result }),
          (error: unknown): { error: unknown } => ({ error }),
        ),
        SETTLE_MS,
        'flush after PgBouncer dropped its connection',
      )
      flushing.catch(() => undefined) // awaited below; not unhandled if a step before fails
      backend = await blockedOnLock()
      await admin(`KILL ${database}`)
      killed = true
      // KILL leaves the database paused: new connections (Flushwave's probe among them) wait for RESUME.
      await admin(`RESUME ${database}`)
      resumed = true
      // Whether the backend noticed that PgBouncer closed its connection (it does not: see top).
      const [after] = await direct`select wait_event_type from pg_stat_activity where pid = ${backend}`
      outlived = after?.wait_event_type === 'Lock'
      if (!holdLock) {
        // The lock goes while Flushwave asks what happened: the backend may commit first (see top).
        await settlesWithin(holder`commit`, 5_000, 'releasing the lock')
        locked = false
      }
      settled = await flushing
    } finally {
      if (locked) await holder`rollback`.catch(() => undefined)
      holder.release()
      if (killed && !resumed) await admin(`RESUME ${database}`).catch(() => undefined)
    }

    const state = await written(token)
    expect(state, 'a flush wrote part of its unit of work').not.toBe('partial')
    let outcome: Outcome
    if ('result' in settled) {
      const { result } = settled
      expect(holdLock, 'the flush succeeded although its transaction waited on a lock held until it settled').toBe(false)
      expect(state).toBe('all')
      // The client connection was gone before the lock was released: no COMMIT answer can have arrived.
      expect(result.recovered, 'a flush that succeeded after its connection was dropped must say it was recovered').toBeDefined()
      outcome = result.recovered ? 'recovered' : 'committed'
      if (result.recovered?.transactionId !== undefined) expect(await xactStatus(result.recovered.transactionId)).toBe('committed')
      expect((await em.flush()).statements, 'a committed flush leaves the EntityManager clean').toBe(0)
    } else {
      const { error } = settled
      expect(error, `untyped error: ${String(error)}`).toBeInstanceOf(ConnectionLostError)
      expect(error, 'the flush timed out before PgBouncer dropped its connection: the fault never happened').not.toBeInstanceOf(FlushTimeoutError)
      const lost = error as ConnectionLostError
      outcome = lost.outcome
      expect(lost.outcome, 'the server stayed reachable through PgBouncer: Flushwave must know the outcome').toBe('rolled-back')
      expect(state).toBe('none')
      expect(lost.retryable).toBe(true)
      if (lost.transactionId !== undefined) expect(await xactStatus(lost.transactionId)).toBe('aborted')
      // Through PgBouncer again, healed: the same EntityManager writes the unit of work exactly once.
      await settlesWithin(em.flush(), SETTLE_MS, 'retry of the same EntityManager')
      expect(await written(token)).toBe('all')
    }
    // The killed server connection's backend is gone once the flush settled: it holds no lock.
    await waitFor(
      async () => ((await direct`select 1 from pg_stat_activity where pid = ${backend}`).length === 0 ? true : undefined),
      5_000,
      `the flush's old server process ${backend} exiting`,
    )
    // The pool writes again, through Flushwave, and every connection of it can be checked out.
    const next = executor.orm.em()
    next.create('Author', { name: `${token}-after` })
    const after = await settlesWithin(next.flush(), SETTLE_MS, 'a new flush after the fault')
    expect(after.recovered).toBeUndefined()
    await poolIsWhole(executor)
    return { outcome, outlived }
  }

  describe.each(EXECUTORS)('%s', (name) => {
    let executor: OpenedExecutor<typeof bookstore.defs>
    beforeAll(async () => {
      // Through PgBouncer 1.18 in transaction mode postgres.js must not keep prepared statements.
      executor = openExecutor(name, withDatabase(bouncer!, database), bookstore, {
        max: 2,
        applicationName: APP,
        connectTimeout: 2,
        ...(name === 'postgres.js' ? { prepare: false } : {}),
        orm: { flushTimeoutMs: FLUSH_TIMEOUT },
      })
      await executor.orm.warmUp()
    })
    afterAll(async () => {
      await executor?.close()
    })

    it('KILL <db> on the admin console while the flush waits on a lock with COMMIT sent', { timeout: 30_000 + REPEAT * 30_000 }, async () => {
      const counts = { committed: 0, recovered: 0, 'rolled-back': 0, unknown: 0, backendOutlivedKill: 0 }
      summary.set(name, counts)
      for (let i = 0; i < REPEAT; i++) {
        // Every other case holds the lock until the flush settled: both sides of the race get run.
        const { outcome, outlived } = await runCase(executor, i % 2 === 1)
        counts[outcome]++
        if (outlived) counts.backendOutlivedKill++
      }
    })
  })
})
