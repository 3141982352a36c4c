/**
 * Id allocation in steady state: bulkCreate×1 (211 rows with links) flushed 200 times at 0 ms on one
 * connection, after 3,000 warm-up rounds. Prints the latency quantiles and how many flushes waited on
 * an id allocation (none should: the pool refills in the background, between flushes).
 *
 * The same unit of work by hand (raw-pipelined: ids from nextval before the timed part, one unnest
 * insert per table, BEGIN…COMMIT pipelined) runs in alternating blocks of 20 on a connection of its
 * own, so that both see the same server: its tail is the floor for a Node.js client, and
 * Flushwave's tail is judged against it. Then, when pgbench is installed, the same transaction from
 * PostgreSQL's C client (pgbench-floor.ts): what this server and machine give with no Node.js
 * process in the way.
 *
 * Then what the slow flushes (over twice their median) had, in this order: a garbage-collection
 * pause inside them; a server backend or this process's main thread kept waiting 1 ms or more for
 * a CPU (Linux's scheduler counters, cpu-watch.ts) while V8's background threads (its compilers
 * and GC helpers) ran, or while they did not (the server's processes, or another's); for
 * Flushwave, a BEGIN that went out late because the connection was busy (on a pool of one, with a
 * background id refill: postgres.js sends a query once the one ahead of it is answered); a
 * statement the server itself took 1 ms or more over (from its log, on the embedded server; mostly
 * a COMMIT, which waits for its WAL flush); or none of these, an answer that came late between the
 * server and this process.
 *
 *   [POOL=n] [LATENCY=ms] [WARM_UP=n] pnpm --filter bench exec tsx src/steady-ids.ts [pooled]
 *
 * `pooled` first migrates the tables' identity columns to `increment by 1000` (pooled sequences):
 * a refill then rides after the COMMIT of the flush that runs the pool low, while a plain
 * sequence's runs in the background (on a pool of one, on the flush's connection). POOL is
 * Flushwave's connections (default 1). LATENCY puts a toxiproxy with that delay on every
 * server→client chunk in front of all three clients (default 0: straight to the server), where a
 * refill that holds the connection costs the next flush a whole round trip. WARM_UP is the rounds
 * of both series before the timed ones (default 3,000).
 *
 * Last, where the machine's CPU went during the timed flushes: all of it, what the hypervisor took,
 * and the share of the server's processes and this one's threads.
 */
import { PerformanceObserver } from 'node:perf_hooks'
import { proxyDatabase, startDatabase, startToxiproxy } from 'devdb'
import { flushwave, tcpNoDelay, type FlushResult } from 'flushwave'
import postgres from 'postgres'
import { benchDatabase, poolSequences, via } from './database.js'
import { graph } from './data.js'
import { createGraph, benchSchema } from './series/flushwave.js'
import { series as rawPipelined } from './series/raw-pipelined.js'
import { pgbenchFloor } from './pgbench-floor.js'
import { ServerLog } from './server-log.js'
import { quantile, sortedCopy } from './stats.js'
import { CpuWatch, cpuDelta, machineCpu, ownThreads, type CpuTime } from './cpu-watch.js'

/**
 * Steady state for V8 too: a function a flush calls once is optimised after hundreds of flushes
 * (planFlush, renderInsert, postgres.js's build), and its compile runs on a core the server
 * needs. Measured with --trace-opt (this script's 400 timed flushes, both series): 117 TurboFan
 * compilations after 20 warm-up rounds, 49 after 300, 30 after 500, 20 after 1,000. Flushwave's
 * executor `write` was still compiled for the first time after 500 rounds (24 ms of compile). With
 * TurboFan off (`node --max-opt=2`), Flushwave's p95 was 1.3× its median in three runs, against
 * 1.4–1.9× with it in seven (the compiles widen the tail; its median rose from 2.0 to 2.4 ms).
 *
 * On 2 cores a background compile takes the core the server backend needs. With 500 rounds, the
 * timed flushes still had 31 and 41 compilations (130 and 148 ms of compile) in two runs with
 * --trace-opt: Flushwave's flush (28 ms), renderPlan (9 ms), postgres.js's build (16 ms). In the
 * scheduler's counters V8's background threads ran 205–268 ms during the timed flushes, and 3 of
 * Flushwave's 4 slow flushes in one run had the server backend wait for a CPU meanwhile. With
 * 3,000 rounds: 14 compilations (24 ms), 56–108 ms of background work in eleven runs, and that
 * cause in 1, 2 and 1 of Flushwave's slow flushes in three of them. The warm-up takes about 20 s.
 */
const WARM_UP = Number(process.env.WARM_UP ?? 3000)
if (!Number.isInteger(WARM_UP) || WARM_UP < 0) throw new Error(`WARM_UP is a number of rounds, not ${process.env.WARM_UP}`)
const FLUSHES = 200
const BLOCK = 20
/** A pause this long inside a flush counts as one of its causes; so does a statement the server took this long over. */
const GC_PAUSE_MS = 1
const SLOW_STATEMENT_MS = 1
/** A server backend or this process's main thread runnable this long without a CPU. */
const CPU_WAIT_MS = 1

interface Timed {
  readonly started: number
  readonly ms: number
  /** Flushwave only: from the start to its BEGIN leaving, past the client's own work on the flush. */
  readonly beginLateMs?: number
  /** Where the CPU went meanwhile (Linux), by the groups of `watchCpu`. */
  cpu?: Record<CpuGroup, CpuTime>
}

type CpuGroup = 'backends' | 'serverOthers' | 'main' | 'v8'

/**
 * Scheduler counters of everything on the path: the server backends of the two series (client
 * backends of the bench database but the admin's), the server's other processes, this process's
 * main thread, and its other threads (V8's compilers and GC helpers; libuv's pool). Undefined
 * where Linux's schedstat files are not there, or the server is not on this machine.
 */
async function watchCpu(admin: postgres.Sql, database: string, local: boolean): Promise<CpuWatch<CpuGroup> | undefined> {
  if (!local) return undefined
  const processes = await admin<{ pid: number; client: boolean }[]>`
    select pid, backend_type = 'client backend' and datname = ${database} and pid <> pg_backend_pid() as client from pg_stat_activity`
  const schedstat = (pid: number) => `/proc/${pid}/schedstat`
  const own = ownThreads()
  if (!own) return undefined
  return CpuWatch.open({
    backends: processes.filter((p) => p.client).map((p) => schedstat(p.pid)),
    serverOthers: processes.filter((p) => !p.client).map((p) => schedstat(p.pid)),
    main: own.main,
    v8: own.others,
  })
}

/** Whether a run's BEGIN left over 1 ms later than the median run's: a busy connection held it back. */
function beganLate(runs: readonly Timed[]): (run: Timed) => boolean {
  const mark = quantile(sortedCopy(runs.map((r) => r.beginLateMs ?? 0)), 0.5) + 1
  return (run) => (run.beginLateMs ?? 0) > mark
}

const pauses: { start: number; end: number }[] = []
const gc = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) if (e.duration >= GC_PAUSE_MS) pauses.push({ start: e.startTime, end: e.startTime + e.duration })
})
gc.observe({ entryTypes: ['gc'] })

const serverLog = new ServerLog()
const db = await startDatabase({ onLog: serverLog.onLog })
const bench = await benchDatabase(db.url)
// Only a server of our own: this changes its settings.
if (!db.external) await ServerLog.watch(bench.admin, bench.name, SLOW_STATEMENT_MS)
const latencyMs = Number(process.env.LATENCY ?? 0)
const toxi = latencyMs > 0 ? await startToxiproxy() : undefined
const proxy = toxi && (await proxyDatabase(toxi, db, { name: 'steady-ids' }))
await proxy?.setLatency(latencyMs)
const url = proxy ? via(bench.url, proxy.host, proxy.port) : bench.url
const sql = postgres(url, { ...tcpNoDelay, max: Number(process.env.POOL ?? 1), onnotice: () => {} })
const raw = await rawPipelined.open(url)
try {
  if (process.argv[2] === 'pooled') {
    await poolSequences(bench.admin)
  }
  // When a flush's first statement is handed to postgres.js: its connection is reserved by then
  // (on a pool of one, after any refill ahead of it), and BEGIN leaves with it. Not postgres.js's
  // `debug` hook: with it postgres.js captures a stack trace per query, and those kept each
  // flush's objects alive through young-generation GCs (a forced minor GC every 10 flushes found
  // 4× the bytes surviving, and twice the pause), a cost only this series paid. Nor the socket's
  // first write: a background refill may write first.
  let beginSentAt = 0
  let flushStarted = false
  const orm = flushwave({
    schema: benchSchema,
    sql,
    onQuery: (event) => {
      if (flushStarted && event.phase === 'write') (flushStarted = false), (beginSentAt = performance.now())
    },
  })
  const flushwaveRuns: Timed[] = []
  const rawRuns: Timed[] = []
  let waited = 0
  let marker = 0
  const clientWork = (createMs: number, r: FlushResult) => createMs + r.phases.checks + r.phases.ids + r.phases.changes + r.phases.plan + r.phases.render
  const flushwaveOnce = async (): Promise<Timed & { waited: boolean }> => {
    const g = graph(1, `s${++marker}`)
    const em = orm.em()
    const started = performance.now()
    flushStarted = true
    createGraph(em, g)
    const createMs = performance.now() - started
    const result = await em.flush()
    const ms = performance.now() - started
    return { started, ms, beginLateMs: beginSentAt - started - clientWork(createMs, result), waited: result.plan.preparation.length > 0 }
  }
  const rawOnce = async (): Promise<Timed> => {
    const run = await raw.bulkCreate(graph(1, `r${++marker}`))
    const started = performance.now()
    await run()
    return { started, ms: performance.now() - started }
  }
  // Counted in the warm-up too, so that V8 has compiled the counting before the timed flushes.
  let watch = await watchCpu(bench.admin, bench.name, !db.external)
  const counted = async <T extends Timed>(once: () => Promise<T>): Promise<T> => {
    const before = watch?.sample()
    const run = await once()
    if (before) run.cpu = cpuDelta(before, watch!.sample())
    return run
  }
  for (let i = 0; i < WARM_UP; i++) await counted(flushwaveOnce), await counted(rawOnce)
  // Again, for threads started since (libuv's pool, more V8 workers).
  watch?.close()
  watch = await watchCpu(bench.admin, bench.name, !db.external)
  pauses.length = 0
  const machineBefore = machineCpu()
  const watchBefore = watch?.sample()
  for (let block = 0; block < FLUSHES / BLOCK; block++) {
    for (let i = 0; i < BLOCK; i++) {
      const run = await counted(flushwaveOnce)
      flushwaveRuns.push(run)
      if (run.waited) waited++
    }
    for (let i = 0; i < BLOCK; i++) rawRuns.push(await counted(rawOnce))
  }
  const machineAfter = machineCpu()
  const watched = watchBefore && cpuDelta(watchBefore, watch!.sample())
  watch?.close()
  const describe = (latencies: readonly number[]) => {
    const sorted = sortedCopy(latencies)
    // The value below which a share p of the runs lie (p99 of 200: the second slowest), as before.
    const q = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!
    return `median ${q(0.5).toFixed(2)} ms, p95 ${q(0.95).toFixed(2)} ms, p99 ${q(0.99).toFixed(2)} ms (p99 ${(q(0.99) / q(0.5)).toFixed(1)}× the median)`
  }
  const slow = (runs: readonly Timed[]) => {
    const median = quantile(sortedCopy(runs.map((r) => r.ms)), 0.5)
    const late = beganLate(runs)
    let paused = 0
    let byV8 = 0
    let byOthers = 0
    let busy = 0
    let server = 0
    let transit = 0
    const statements = new Map<string, number>()
    const over = runs.filter((r) => r.ms > 2 * median)
    for (const r of over) {
      const slowStatements = serverLog.between(performance.timeOrigin + r.started, performance.timeOrigin + r.started + r.ms)
      // A backend or the main thread that waited for a CPU lost it to V8's background work when
      // that ran meanwhile, else to a process (the server's, the other side of this one's, or another's).
      const starved = r.cpu && (r.cpu.backends.wait >= CPU_WAIT_MS || r.cpu.main.wait >= CPU_WAIT_MS)
      if (pauses.some((p) => p.start < r.started + r.ms && p.end > r.started)) paused++
      else if (starved && r.cpu!.v8.run >= CPU_WAIT_MS) byV8++
      else if (starved) byOthers++
      else if (late(r)) busy++
      else if (slowStatements.length > 0) {
        server++
        for (const st of slowStatements) statements.set(st.what, (statements.get(st.what) ?? 0) + 1)
      } else transit++
    }
    const connection = runs[0]?.beginLateMs === undefined ? '' : `, BEGIN sent over 1 ms late (the connection was busy) ${busy}`
    const which = [...statements].map(([what, n]) => `${n} ${what}`).join(', ')
    const onServer = db.external ? '' : `, a statement the server took ${SLOW_STATEMENT_MS} ms or more over ${server}${which && ` (${which})`}`
    const starvation = runs[0]?.cpu
      ? `, a server backend or the main thread waiting ${CPU_WAIT_MS} ms or more for a CPU while V8's background threads ran ${byV8}, while they did not ${byOthers}`
      : ''
    return `${over.length} over 2× the median: with a GC pause of ${GC_PAUSE_MS} ms or more ${paused}${starvation}${connection}${onServer}, none of these (the answer came late) ${transit}`
  }
  console.log(`at ${latencyMs} ms latency, ${process.argv[2] === 'pooled' ? 'pooled' : 'plain'} sequences, Flushwave on ${Number(process.env.POOL ?? 1)} connection(s)`)
  // Slow or not: at a latency, a BEGIN held back by a refill costs a round trip, yet may stay under 2× the median.
  const heldBack = flushwaveRuns.filter(beganLate(flushwaveRuns)).length
  console.log(
    `bulkCreate×1 ×${FLUSHES}, flushwave:     ${describe(flushwaveRuns.map((r) => r.ms))}; flushes that waited on id allocation: ${waited}; ` +
      `whose BEGIN a busy connection held back over 1 ms: ${heldBack}`,
  )
  console.log(`bulkCreate×1 ×${FLUSHES}, raw-pipelined: ${describe(rawRuns.map((r) => r.ms))}`)
  // The floor failing takes nothing from the two series' numbers: it is reported, the rest printed,
  // and the script exits non-zero.
  let floor: string
  try {
    const byPgbench = await pgbenchFloor(url, WARM_UP + FLUSHES)
    floor = byPgbench ? describe(byPgbench.slice(WARM_UP)) : 'not run: pgbench is not on PATH (Debian/Ubuntu: apt-get install postgresql-client)'
  } catch (error) {
    floor = (error instanceof Error ? error.message : String(error)).trim()
    process.exitCode = 1
  }
  console.log(`bulkCreate×1 ×${FLUSHES}, pgbench:       ${floor}`)
  console.log(`slow flushes, flushwave:     ${slow(flushwaveRuns)}`)
  console.log(`slow flushes, raw-pipelined: ${slow(rawRuns)}`)
  if (watched && machineBefore && machineAfter) {
    const ms = (group: CpuGroup) => watched[group].run.toFixed(0)
    const ours = Object.values<CpuTime>(watched).reduce((sum, t) => sum + t.run, 0)
    console.log(
      `CPU in the timed flushes: the machine's about ${machineAfter.busy - machineBefore.busy} ms (counted in 10 ms ticks; ${machineAfter.steal - machineBefore.steal} ms stolen by the hypervisor), ` +
        `and ${ours.toFixed(0)} ms of it ours: the two series' server backends ${ms('backends')}, the server's other processes ${ms('serverOthers')}, ` +
        `this process's main thread ${ms('main')} and its other threads (V8's compilers and GC helpers) ${ms('v8')}`,
    )
  }
} finally {
  gc.disconnect()
  await sql.end()
  await raw.close()
  await bench.drop()
  await proxy?.remove()
  await toxi?.stop()
  await db.stop()
}
