/**
 * What V8's young-generation GCs (scavenges) copy, loop by loop: the bytes each one keeps in the
 * young generation (`survived`) and moves to the old one (`promoted`), and its pause. A scavenge
 * pauses the main thread for about as long as it takes to copy those bytes, and one that lands
 * inside a flush is one cause of steady-ids.ts's slow flushes.
 *
 *   [NODE_FLAGS='--a-v8-flag …'] pnpm --filter bench exec tsx src/gc-promotion.ts [loop ...]
 *
 * Each loop runs in a child process under `node --trace-gc-nvp` (one line per GC) against the
 * embedded server: 1,500 rounds to warm up, then 1,500 more, each also making about 100 KB of arrays
 * that die at once, so that scavenges come at a steady rate. Printed per loop, over the last 30
 * scavenges of the main thread: the median and largest pause, the mean bytes survived and
 * promoted, and how many rounds a scavenge came every.
 *
 * The loops (see LOOPS): a bulkCreate×1 flush through Flushwave on postgres.js, on node-postgres,
 * and on an executor that answers writes from memory (Flushwave's own objects, no driver's); then
 * the drivers alone, `select 1` awaited once or twice a round.
 */
import { execFile } from 'node:child_process'
import { constants, PerformanceObserver } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { startDatabase } from 'devdb'
import { flushwave, tcpNoDelay, type Executor, type WriteOutcome } from 'flushwave'
import pg from 'pg'
import postgres from 'postgres'
import { benchDatabase, poolSequences } from './database.js'
import { graph } from './data.js'
import { benchSchema, createGraph } from './series/flushwave.js'
import { parseScavenges, summarize, type ScavengeSummary } from './gc-trace.js'

const WARM_UP = 1500
const ROUNDS = 1500
const LAST = 30
/** More Node or V8 flags for the children, e.g. `--no-allocation-site-pretenuring`. */
const NODE_FLAGS = (process.env.NODE_FLAGS ?? '').split(' ').filter((f) => f !== '')

const LOOPS = {
  flushwave: 'Flushwave, bulkCreate×1 (211 rows with links) on postgres.js, pooled ids',
  'flushwave-pg': 'the same on node-postgres',
  'flushwave-memory': 'the same with writes answered from memory (Flushwave alone)',
  'postgres.js-1': 'postgres.js, `select 1` once a round',
  'postgres.js-2': 'postgres.js, `select 1` twice a round, one after the other',
  'pg-2': 'node-postgres, `select 1` twice a round, one after the other',
} as const
type Loop = keyof typeof LOOPS

interface Round {
  once(): Promise<void>
  close(): Promise<void>
}

/** Writes answered as a server would answer bulkCreate's inserts, without one: ids still come from `ids`. */
function memoryWrites(ids: Executor): Executor {
  return {
    read: (statement) => ids.read(statement),
    nextIds: (requests) => ids.nextIds(requests),
    transaction: (fn) => ids.transaction(fn),
    warmUp: (statements, requests) => ids.warmUp(statements, requests),
    async write(waves): Promise<WriteOutcome> {
      await new Promise((resolve) => setImmediate(resolve)) // an answer comes in a later turn
      const rowCounts = waves.map((wave) =>
        wave.map(({ op }) => {
          if (op.kind === 'insert') return op.ids.length
          if (op.kind === 'link-insert') return op.owners.length
          throw new Error(`gc-promotion: a bulkCreate flush has no ${op.kind}`)
        }),
      )
      return { rowCounts, roundTrips: 1, coldStatements: 0 }
    },
  }
}

async function open(loop: Loop, url: string): Promise<Round> {
  let marker = 0
  if (loop === 'flushwave' || loop === 'flushwave-pg' || loop === 'flushwave-memory') {
    const pool = loop === 'flushwave-pg' ? new pg.Pool({ connectionString: url, max: 1 }) : undefined
    const sql = pool ? undefined : postgres(url, { ...tcpNoDelay, max: 1, onnotice: () => {} })
    const orm = pool
      ? flushwave({ schema: benchSchema, pg: pool })
      : loop === 'flushwave-memory'
        ? flushwave({ schema: benchSchema, executor: memoryWrites(flushwave({ schema: benchSchema, sql }).executor) })
        : flushwave({ schema: benchSchema, sql })
    return {
      async once() {
        const em = orm.em()
        createGraph(em, graph(1, `${loop}-${++marker}`)) // unique emails across loops
        await em.flush()
      },
      async close() {
        await pool?.end()
        await sql?.end()
      },
    }
  }
  if (loop === 'pg-2') {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    return {
      async once() {
        await client.query('select 1')
        await client.query('select 1')
      },
      close: () => client.end(),
    }
  }
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  const twice = loop === 'postgres.js-2'
  return {
    async once() {
      await sql.unsafe('select 1')
      if (twice) await sql.unsafe('select 1')
    },
    close: () => sql.end(),
  }
}

let garbage: unknown

/** In the child: the rounds, then a line of JSON with how many scavenges the measured ones had. */
async function child(loop: Loop, url: string): Promise<void> {
  const round = await open(loop, url)
  // Small arrays of numbers. With `{ i, s }` objects instead, V8's allocation-site pretenuring
  // made part of the numbers the churn's own: a loop like postgres.js-1 promoted 51 KB a
  // scavenge, and 0 with --no-allocation-site-pretenuring. The drivers-alone loops stay sensitive
  // to the churn's shape: with one 96 KB array a round, postgres.js-1 promoted 60 KB, not 45.
  const churn = () => {
    for (let i = 0; i < 12; i++) garbage = new Array<number>(1000).fill(i)
  }
  for (let i = 0; i < WARM_UP; i++) churn(), await round.once()
  let scavenges = 0
  const gcs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) if ((e as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MINOR) scavenges++
  })
  gcs.observe({ entryTypes: ['gc'] })
  for (let i = 0; i < ROUNDS; i++) churn(), await round.once()
  await new Promise((resolve) => setTimeout(resolve, 50)) // the observer's last entries
  gcs.disconnect()
  await round.close()
  console.log(JSON.stringify({ rounds: ROUNDS, scavenges }))
}

/** Runs `loop` in a child process and summarizes its trace. */
function measure(loop: Loop, url: string): Promise<{ summary: ScavengeSummary | undefined; roundsPerScavenge: number }> {
  const args = ['--trace-gc-nvp', ...NODE_FLAGS, '--import', import.meta.resolve('tsx'), fileURLToPath(import.meta.url), '--child', loop, url]
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024, timeout: 600_000 }, (error, stdout, stderr) => {
      if (error) return reject(new Error(`${loop}: ${stderr || error.message}`))
      // V8 writes its trace through a buffer of its own: lines may follow the child's last one.
      const counted = /^\{"rounds".*$/m.exec(stdout)?.[0]
      if (counted === undefined) return reject(new Error(`${loop}: the child printed no counts`))
      const { rounds, scavenges } = JSON.parse(counted) as { rounds: number; scavenges: number }
      resolve({ summary: summarize(parseScavenges(stdout), LAST), roundsPerScavenge: scavenges > 0 ? rounds / scavenges : NaN })
    })
  })
}

async function main(): Promise<void> {
  const asked = process.argv.slice(2)
  const unknown = asked.filter((a) => !Object.hasOwn(LOOPS, a))
  if (unknown.length > 0) throw new Error(`unknown loop ${unknown.join(', ')}; the loops: ${Object.keys(LOOPS).join(', ')}`)
  const loops = (asked.length > 0 ? asked : Object.keys(LOOPS)) as Loop[]
  const db = await startDatabase()
  const bench = await benchDatabase(db.url)
  try {
    // Pooled sequences, as in steady-ids.ts: no flush waits on ids.
    await poolSequences(bench.admin)
    console.log(`node ${process.version}${NODE_FLAGS.length > 0 ? ` ${NODE_FLAGS.join(' ')}` : ''}; the last ${LAST} scavenges of ${ROUNDS} rounds after ${WARM_UP} to warm up`)
    for (const loop of loops) {
      const { summary: s, roundsPerScavenge } = await measure(loop, bench.url)
      const what = s
        ? `pause median ${s.pauseMedianMs.toFixed(1)} ms (largest ${s.pauseMaxMs.toFixed(1)}), survived ${s.survivedKb.toFixed(0)} KB, promoted ${s.promotedKb.toFixed(0)} KB, one every ${roundsPerScavenge.toFixed(0)} rounds`
        : 'no scavenge'
      console.log(`${loop.padEnd(17)} ${what}  (${LOOPS[loop]})`)
    }
  } finally {
    await bench.drop()
    await db.stop()
  }
}

if (process.argv[2] === '--child') await child(process.argv[3] as Loop, process.argv[4]!)
else if (process.argv[1] === fileURLToPath(import.meta.url)) await main()
