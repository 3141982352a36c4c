/**
 * `pnpm example` from the repository root: PostgreSQL (embedded, or DATABASE_URL), migrations, a
 * little seed data, and the API on http://localhost:3000 (PORT to change). LATENCY_MS=5 puts a real
 * toxiproxy between the app and the database. TELEMETRY=console prints OpenTelemetry spans and
 * metrics. REPLICA_URLS (comma-separated, with DATABASE_URL the primary) sends reads to streaming
 * replicas, with read-your-writes by consistency token. Ctrl-C stops everything it started.
 *
 * `pnpm start` runs it as `node --import tsx`, not through the tsx CLI: the CLI relays Ctrl-C to its
 * child and SIGKILLs it unless the child acknowledges within 30 ms, which a busy machine can miss,
 * cutting the shutdown short (and leaving the embedded database's directory behind).
 */
import { proxyDatabase, startDatabase, startToxiproxy, type LatencyProxy, type ToxiproxyServer } from 'devdb'
import { startBookstore, type Bookstore } from './server.js'
import { EXPORTERS, isExporterName, registerTelemetry } from './telemetry.js'

const port = Number(process.env.PORT ?? 3000)
const latencyMs = Number(process.env.LATENCY_MS ?? 0)
const poolMax = Number(process.env.POOL_MAX ?? 10)
if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`PORT must be a port number, got ${JSON.stringify(process.env.PORT)}`)
if (!(latencyMs >= 0)) fail(`LATENCY_MS must be a number of milliseconds ≥ 0, got ${JSON.stringify(process.env.LATENCY_MS)}`)
if (!Number.isInteger(poolMax) || poolMax < 1) fail(`POOL_MAX must be a positive integer, got ${JSON.stringify(process.env.POOL_MAX)}`)
const replicaUrls = (process.env.REPLICA_URLS ?? '').split(',').filter((u) => u.trim() !== '')
for (const u of replicaUrls) if (!/^postgres(ql)?:\/\//.test(u)) fail(`REPLICA_URLS must be postgres:// URLs separated by commas, got ${JSON.stringify(u)}`)
const exporter = process.env.TELEMETRY || undefined
if (exporter !== undefined && !isExporterName(exporter)) fail(`TELEMETRY must be ${Object.keys(EXPORTERS).join(' or ')} (or unset), got ${JSON.stringify(exporter)}`)
// Before the orm is made: Flushwave reports to the global providers registered here.
const telemetry = exporter ? registerTelemetry(EXPORTERS[exporter]()) : undefined

// postgres.js 3.4.9 drops the promise of the array-types query each new connection runs: a
// connection cut during it (backends ended while the pool reconnects) rejects it with nobody
// listening (porsager/postgres#1192). That one is logged; any other unhandled rejection still ends
// the process (docs/guide/deploying.md).
process.on('unhandledRejection', (reason) => {
  if (!isDroppedTypesQuery(reason)) throw reason
  console.warn(`postgres.js: a new connection's array-types query failed: ${(reason as Error).message}`)
})

function isDroppedTypesQuery(reason: unknown): boolean {
  const query = (reason as { query?: unknown } | null)?.query
  return typeof query === 'string' && query.includes('from pg_catalog.pg_type a') && query.includes("typcategory = 'A'")
}

// Stopped in reverse order by shutdown().
let bookstore: Bookstore | undefined
let toxi: ToxiproxyServer | undefined
let proxy: LatencyProxy | undefined
let shuttingDown: Promise<void> | undefined

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const
const db = await ownSignals(() => startDatabase())
for (const signal of SIGNALS) process.once(signal, () => void shutdown(signal))
// A closed terminal must not crash the shutdown with EIO/EPIPE on a console.log.
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {})

async function start(): Promise<Bookstore> {
  let appDatabaseUrl = db.url
  if (latencyMs > 0) {
    toxi = await ownSignals(() => startToxiproxy())
    proxy = await proxyDatabase(toxi, db, { name: 'bookstore' })
    await proxy.setLatency(latencyMs)
    appDatabaseUrl = proxy.url
  }
  return (bookstore = await startBookstore({
    databaseUrl: db.url, // migrations go direct
    appDatabaseUrl,
    host: '127.0.0.1',
    port,
    poolMax,
    seed: true,
    warmUp: process.env.WARM_UP !== '0',
    executor: process.env.EXECUTOR === 'knex' || process.env.EXECUTOR === 'pg' ? process.env.EXECUTOR : 'postgres',
    traceRequests: telemetry !== undefined,
    replicaUrls,
    ...(process.env.LOG_LEVEL ? { logLevel: process.env.LOG_LEVEL } : {}),
  }))
}

const { seeded, migrations, url, warmedUp } = await start().catch(async (error: unknown) => {
  const message = (error as NodeJS.ErrnoException).code === 'EADDRINUSE' ? `port ${port} is in use: set PORT to another one` : String((error as Error)?.message ?? error)
  console.error(`bookstore: could not start: ${message}`)
  await shutdown()
  process.exit(1)
})
const base = `http://localhost:${new URL(url).port}`
const [bookId = 1, otherBookId = bookId] = seeded?.bookIds ?? []
const json = "-H 'content-type: application/json'"
const where = db.external ? 'PostgreSQL from DATABASE_URL' : `embedded PostgreSQL on 127.0.0.1:${db.port}`
const via =
  (proxy ? `, the app's pool through toxiproxy (${latencyMs} ms per reply)` : '') +
  (process.env.EXECUTOR === 'knex' ? '; EXECUTOR=knex: flushes pipelined on a knex connection' : '') +
  (process.env.EXECUTOR === 'pg' ? '; EXECUTOR=pg: flushes pipelined on a node-postgres pg.Pool' : '') +
  (replicaUrls.length > 0 ? `; reads from ${replicaUrls.length} replica${replicaUrls.length > 1 ? 's' : ''} (REPLICA_URLS), read-your-writes by Consistency-Token` : '')
const created = Object.entries(seeded?.created ?? {}).map(([table, n]) => `${table} ${n}`).join(', ')

console.log(`
Bookstore API listening on ${base}  (bound to 127.0.0.1; ${where}${via})
migrations: ${migrations.length ? `applied ${migrations.join(', ')}` : 'up to date'}; seed: ${created ? `created ${created}` : 'already there'}
warm-up: ${warmedUp ? `${warmedUp.prepared} statement shapes prepared on ${warmedUp.connections} connections in ${warmedUp.durationMs.toFixed(0)} ms` : 'skipped (WARM_UP=0): the first flushes on each connection are cold'}${
  telemetry ? `\ntelemetry (TELEMETRY=${exporter}): a span per request, flush and read as each ends; metrics every 10 s and at exit` : ''
}

Try:
  curl -s ${base}/authors/${seeded?.authorId ?? 1}
  curl -si -X POST ${base}/books/${bookId}/reviews ${json} -d '{"stars":5,"reviewer":"you","body":"Loved it."}'
  curl -si -X POST ${base}/checkout ${json} -d '{"customerId":${seeded?.customerId ?? 1},"lines":[{"bookId":${bookId},"quantity":1},{"bookId":${otherBookId},"quantity":2}]}'

Load (another terminal): pnpm --filter bookstore load   (HANDLER=review|checkout|patch DURATION=10 CONNECTIONS=10)
Ctrl-C stops the server${db.external ? '' : ' and the database'}.
`)

async function shutdown(signal?: NodeJS.Signals): Promise<void> {
  if (shuttingDown) {
    if (signal) {
      console.error('bookstore: stopping anyway')
      process.exit(1)
    }
    return shuttingDown
  }
  shuttingDown = (async () => {
    if (signal) console.log(`\n${signal}: stopping…`)
    const step = async (what: string, fn: () => Promise<void>) => {
      try {
        await fn()
      } catch (error) {
        console.error(`bookstore: ${what}: ${(error as Error).message}`)
      }
    }
    await step('closing the server and the pool', async () => bookstore?.close())
    await step('exporting the last spans and metrics', async () => telemetry?.shutdown())
    // A local toxiproxy goes with its proxies (and Ctrl-C in a terminal reaches it too); only a
    // shared one (TOXIPROXY_URL) needs ours removed.
    if (toxi?.external) await step('removing the proxy', async () => proxy?.remove())
    await step('stopping toxiproxy', async () => toxi?.stop())
    await step('stopping PostgreSQL', () => db.stop())
    if (signal) {
      console.log(db.external ? 'stopped.' : 'stopped (the embedded database and its directory are gone).')
      process.exit(0)
    }
  })()
  return shuttingDown
}

/**
 * devdb's embedded PostgreSQL and its toxiproxy install SIGINT/SIGTERM handlers that stop their
 * server and exit the process at once, racing with shutdown() (which closes the HTTP server and the
 * pool first). This process stops them itself, so their signal handlers go; their 'exit' handlers
 * stay, in case shutdown() cannot finish.
 */
async function ownSignals<T>(start: () => Promise<T>): Promise<T> {
  const before = new Map(SIGNALS.map((signal) => [signal, new Set(process.listeners(signal))]))
  try {
    return await start()
  } finally {
    for (const signal of SIGNALS) for (const listener of process.listeners(signal)) if (!before.get(signal)!.has(listener)) process.off(signal, listener)
  }
}

function fail(message: string): never {
  console.error(`bookstore: ${message}`)
  process.exit(2)
}
