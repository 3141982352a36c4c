/**
 * Where a unit of work's time goes, series side by side: when the client's first and last bytes
 * left, when the first answer arrived and when the last was handled, and the end; with the server's
 * own CPU over the run and the time it waited for a CPU (the bench database's server processes,
 * from /proc/<pid>/schedstat: Linux, a server on this machine), and the GC pauses inside the run.
 * A full GC before each run, as in the bench; samples alternate series by series.
 *
 * At 0 ms the server starts when the client's first bytes arrive, so the client's work before them
 * adds to the server's; what the client does after the last answer adds again. postgres.js sends a
 * pipeline in pieces of 1 KiB or more as it encodes it, which lets the server start on the first
 * piece while the client encodes the rest.
 *
 *   pnpm --filter bench exec tsx src/timeline.ts mixedFlush 10 300 flushwave,raw-pipelined
 */
import { readFileSync } from 'node:fs'
import net from 'node:net'
import { PerformanceObserver } from 'node:perf_hooks'
import { fullGc } from './gc.js'
import { sideBySide } from './side-by-side.js'
import { quantile, sortedCopy } from './stats.js'

const run = await sideBySide({ scenario: 'mixedFlush', size: 10, rounds: 300, series: 'flushwave,raw-pipelined' })
const { names: list, opened, scenario: sc, admin } = run

/** Microseconds since the run started, for every socket write and every 'data' event handled. */
let started = 0
let recording = false
const writes: number[] = []
const answers: [number, number][] = []
const now = () => performance.now() * 1000 - started
// The only sockets busy during a timed run are the series' own: the admin connection is idle then.
const write = net.Socket.prototype.write
net.Socket.prototype.write = function (this: net.Socket, ...args: unknown[]) {
  if (recording) writes.push(now())
  return (write as (...a: unknown[]) => boolean).apply(this, args)
} as typeof write
const emit = net.Socket.prototype.emit
net.Socket.prototype.emit = function (this: net.Socket, event: string | symbol, ...args: unknown[]) {
  if (!recording || event !== 'data') return (emit as (...a: unknown[]) => boolean).call(this, event, ...args)
  const arrived = now()
  const result = (emit as (...a: unknown[]) => boolean).call(this, event, ...args)
  answers.push([arrived, now()])
  return result
} as typeof emit

/** The process's GC pauses (performance.now() ms), to count those inside a timed run. */
const pauses: { start: number; ms: number }[] = []
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) pauses.push({ start: e.startTime, ms: e.duration })
}).observe({ entryTypes: ['gc'] })

/** CPU time and run-queue wait (ns) of the bench database's server processes, summed. */
async function serverProcesses(): Promise<number[]> {
  const rows = await admin`select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`
  return rows.map((r) => Number(r.pid))
}
function schedstat(pids: readonly number[]): [number, number] | undefined {
  try {
    let cpu = 0
    let wait = 0
    for (const pid of pids) {
      const [run, queued] = readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')
      cpu += Number(run)
      wait += Number(queued)
    }
    return [cpu, wait]
  } catch {
    return undefined // not Linux, or the server is not on this machine
  }
}

const points = ['first byte out', 'last byte out', 'first answer in', 'last answer handled', 'end'] as const
const samples = list.map(() => ({ points: points.map(() => [] as number[]), serverCpu: [] as number[], serverWait: [] as number[], gcs: 0, gcMs: 0, runs: 0 }))
const total = run.rounds
for (let i = 0; i < total; i++) {
  for (const [s, series] of opened.entries()) {
    const prepared = await sc.prepare(admin, series, `t${i}s${s}`)
    const pids = await serverProcesses()
    await fullGc()
    writes.length = 0
    answers.length = 0
    const before = schedstat(pids)
    started = performance.now() * 1000
    recording = true
    await prepared.run()
    const end = now()
    recording = false
    const after = schedstat(pids)
    // GC entries are delivered asynchronously: let them arrive before counting.
    await new Promise((resolve) => setImmediate(resolve))
    const from = started / 1000
    const inside = pauses.filter((p) => p.start >= from && p.start <= from + end / 1000)
    pauses.length = 0
    // The first quarter warms the process and the connections up.
    if (i < total / 4 || writes.length === 0 || answers.length === 0) continue
    const at = [writes[0]!, writes[writes.length - 1]!, answers[0]![0], answers[answers.length - 1]![1], end]
    at.forEach((t, p) => samples[s]!.points[p]!.push(t))
    samples[s]!.runs++
    samples[s]!.gcs += inside.length
    samples[s]!.gcMs += inside.reduce((sum, p) => sum + p.ms, 0)
    if (before && after) {
      samples[s]!.serverCpu.push((after[0] - before[0]) / 1000)
      samples[s]!.serverWait.push((after[1] - before[1]) / 1000)
    }
  }
}

const median = (xs: number[]) => (xs.length === 0 ? NaN : quantile(sortedCopy(xs), 0.5))
console.log(`${sc.name}×${sc.size}, median µs from the start (${total - Math.ceil(total / 4)} runs each, a full GC before each):`)
console.log(['series', ...points, 'after the last answer', 'server CPU', 'server waited for a CPU', 'GC pauses inside (per run, mean ms)'].join(' | '))
for (const [s, name] of list.entries()) {
  const x = samples[s]!
  const after = x.points[4]!.map((end, k) => end - x.points[3]![k]!)
  const cells = [...x.points.map(median), median(after), median(x.serverCpu), median(x.serverWait)]
  const gc = `${(x.gcs / x.runs).toFixed(2)} (${(x.gcMs / x.runs).toFixed(3)} ms)`
  console.log([name, ...cells.map((v) => (Number.isNaN(v) ? '-' : v.toFixed(0))), gc].join(' | '))
}
await run.close()
