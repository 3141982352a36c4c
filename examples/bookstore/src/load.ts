/**
 * `pnpm --filter bookstore load`: a bounded load run with autocannon against the running example
 * (`pnpm example` in another terminal), on 127.0.0.1 only. It stops by itself after DURATION seconds.
 *
 *   HANDLER=review|checkout|patch  (default review)
 *   DURATION=10                    seconds (1..300)
 *   CONNECTIONS=10                 concurrent connections (1..256)
 *   PORT=3000                      the example's port
 *   BOOKS=0                        only the first N published books (1: one hot book); 0 = all
 *   IDEMPOTENCY=0                  1: every checkout sends an Idempotency-Key of its own (a new UUID)
 *
 * Prints requests per second, latency percentiles, status codes, and what the Server-Timing headers
 * said about the flushes (duration, round trips, retried attempts).
 */
import { randomUUID } from 'node:crypto'
import autocannon from 'autocannon'

const HANDLERS = ['review', 'checkout', 'patch'] as const
type Handler = (typeof HANDLERS)[number]

const handler = (process.env.HANDLER ?? 'review') as Handler
const duration = Number(process.env.DURATION ?? 10)
const connections = Number(process.env.CONNECTIONS ?? 10)
const port = Number(process.env.PORT ?? 3000)
const hot = Number(process.env.BOOKS ?? 0)
const keyed = (process.env.IDEMPOTENCY ?? '0') === '1'
if (!HANDLERS.includes(handler)) fail(`HANDLER must be one of ${HANDLERS.join(', ')}, got ${JSON.stringify(process.env.HANDLER)}`)
if (!(Number.isInteger(duration) && duration >= 1 && duration <= 300)) fail(`DURATION must be 1..300 seconds, got ${JSON.stringify(process.env.DURATION)}`)
if (!(Number.isInteger(connections) && connections >= 1 && connections <= 256)) fail(`CONNECTIONS must be 1..256, got ${JSON.stringify(process.env.CONNECTIONS)}`)
if (!(Number.isInteger(hot) && hot >= 0)) fail(`BOOKS must be a whole number (0: all books), got ${JSON.stringify(process.env.BOOKS)}`)
if (!['0', '1'].includes(process.env.IDEMPOTENCY ?? '0')) fail(`IDEMPOTENCY must be 0 or 1, got ${JSON.stringify(process.env.IDEMPOTENCY)}`)
if (!(Number.isInteger(port) && port >= 1 && port <= 65535)) fail(`PORT must be a port number, got ${JSON.stringify(process.env.PORT)}`)

// Loopback only, whatever the environment says.
const base = `http://127.0.0.1:${port}`

interface BookRow {
  id: number
  version: number
  published: boolean
}
interface CustomerRow {
  id: number
}

async function get<T>(path: string): Promise<T> {
  const response = await fetch(`${base}${path}`, { signal: AbortSignal.timeout(5_000) }).catch(() => undefined)
  if (!response?.ok) fail(`GET ${base}${path} failed (${response?.status ?? 'no answer'}): is the example running? Start it with \`pnpm example\` (PORT=${port}).`)
  return (await response.json()) as T
}

const published = (await get<BookRow[]>('/books?published=true&limit=500')).filter((b) => b.published)
const books = hot > 0 ? published.slice(0, hot) : published
const customers = await get<CustomerRow[]>('/customers?limit=500')
if (books.length < Math.min(2, hot || 2) || customers.length < 1) fail('the example has too few published books or customers: restart it so that it seeds')

const pick = <T>(list: readonly T[]): T => list[Math.floor(Math.random() * list.length)]!
const json = { 'content-type': 'application/json' }

/**
 * PATCH needs the version the client read. autocannon resets a connection's context after each
 * request, so the versions are shared: each PATCH takes a book no other connection is PATCHing and
 * the version its last answer gave (200: `version`; 409: `currentVersion`). So connections never
 * conflict with each other, and a 409 here would mean a bug.
 */
const versions = new Map(books.map((b) => [b.id, b.version]))
const inFlight = new Map<number, number>() // book id → when it was sent
const freeBook = (): number => {
  const now = Date.now()
  const free = books.filter((b) => (inFlight.get(b.id) ?? 0) < now - 10_000)
  const id = pick(free.length > 0 ? free : books).id
  inFlight.set(id, now)
  return id
}

// What the Server-Timing headers said.
const flushMs: number[] = []
const roundTrips = new Map<number, number>()
let retried = 0
let retries = 0 // attempts beyond the first, summed
const statuses = new Map<number, number>()

const errors = new Map<string, number>() // `409 stale version` → count

function onResponse(status: number, body: string, _context: object, headers: Record<string, string | string[]>): void {
  statuses.set(status, (statuses.get(status) ?? 0) + 1)
  if (status >= 300) {
    let error = '?'
    try {
      error = String((JSON.parse(body) as { error?: unknown }).error)
    } catch {
      // not JSON
    }
    errors.set(`${status} ${error}`, (errors.get(`${status} ${error}`) ?? 0) + 1)
  }
  const header = Object.entries(headers).find(([name]) => name.toLowerCase() === 'server-timing')?.[1]
  const m = String(header ?? '').match(/dur=([\d.]+);desc="\d+ statements?, (\d+) round trips?(?:, id allocation)?(?:, \d+ cold)?(?:, attempt (\d+))?/)
  if (!m) return
  flushMs.push(Number(m[1]))
  roundTrips.set(Number(m[2]), (roundTrips.get(Number(m[2])) ?? 0) + 1)
  if (m[3]) {
    retried++
    retries += Number(m[3]) - 1
  }
}

const requests: autocannon.Request[] = {
  review: [
    {
      method: 'POST' as const,
      headers: json,
      setupRequest: (request: autocannon.Request) => ({
        ...request,
        path: `/books/${pick(books).id}/reviews`,
        body: JSON.stringify({ stars: 1 + Math.floor(Math.random() * 5), reviewer: 'autocannon', body: 'load run' }),
      }),
      onResponse,
    },
  ],
  checkout: [
    {
      method: 'POST' as const,
      path: '/checkout',
      headers: json,
      setupRequest: (request: autocannon.Request) => {
        const chosen = new Set<number>()
        const count = 1 + Math.floor(Math.random() * Math.min(3, books.length))
        while (chosen.size < count) chosen.add(pick(books).id)
        const lines = [...chosen].map((bookId) => ({ bookId, quantity: 1 }))
        const body = JSON.stringify({ customerId: pick(customers).id, lines })
        return { ...request, body, ...(keyed ? { headers: { ...json, 'idempotency-key': randomUUID() } } : {}) }
      },
      onResponse,
    },
  ],
  patch: [
    {
      method: 'PATCH' as const,
      headers: json,
      setupRequest: (request: autocannon.Request) => {
        const id = freeBook()
        const price = (5 + Math.random() * 20).toFixed(2)
        return { ...request, path: `/books/${id}`, body: JSON.stringify({ version: versions.get(id), price }) }
      },
      onResponse: (status: number, body: string, context: object, headers: Record<string, string | string[]>) => {
        onResponse(status, body, context, headers)
        try {
          const answer = JSON.parse(body) as { id?: number; version?: number; ids?: string[]; currentVersion?: number }
          const id = answer.id ?? Number(answer.ids?.[0])
          const version = answer.version ?? answer.currentVersion
          if (typeof version === 'number') versions.set(id, version)
          inFlight.delete(id)
        } catch {
          // not JSON: the book stays taken for 10 s
        }
      },
    },
  ],
}[handler] as autocannon.Request[]

const what = { review: 'POST /books/:id/reviews', checkout: `POST /checkout${keyed ? ' (Idempotency-Key)' : ''}`, patch: 'PATCH /books/:id' }[handler]
console.log(`${what} on ${base}: ${connections} connections for ${duration} s (${books.length} books${hot > 0 ? ` of ${published.length}: ids ${books.map((b) => b.id).join(', ')}` : ''}, ${customers.length} customers)…`)
if (handler === 'patch' && books.length < connections) console.log('note: fewer books than connections: some PATCHes will share a book, so expect 409s')

const result = await autocannon({ url: base, connections, duration, timeout: 10, requests })

const percentile = (sorted: readonly number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN
const sortedFlush = [...flushMs].sort((a, b) => a - b)
const flushed = sortedFlush.length
const trips = [...roundTrips.entries()].sort(([a], [b]) => a - b).map(([n, count]) => `${n}: ${((100 * count) / flushed).toFixed(1)}%`)

console.log(`
requests:   ${result.requests.total} in ${result.duration} s = ${result.requests.average.toFixed(1)} req/s (per-second min ${result.requests.min}, max ${result.requests.max})
latency:    p50 ${result.latency.p50} ms, p90 ${result.latency.p90} ms, p99 ${result.latency.p99} ms (avg ${result.latency.average.toFixed(1)}, max ${result.latency.max})
status:     ${[...statuses.entries()].sort(([a], [b]) => a - b).map(([s, n]) => `${s}: ${n}`).join(', ') || '-'}${errors.size ? ` (${[...errors.entries()].map(([e, n]) => `${e}: ${n}`).join(', ')})` : ''}; connection errors ${result.errors}, timeouts ${result.timeouts}
flushes:    ${flushed} with Server-Timing; duration p50 ${percentile(sortedFlush, 50).toFixed(1)} ms, p90 ${percentile(sortedFlush, 90).toFixed(1)} ms, p99 ${percentile(sortedFlush, 99).toFixed(1)} ms
round trips per flush: ${trips.join(', ') || '-'}; responses after a retried conflict: ${retried} (${retries} retries)`)

function fail(message: string): never {
  console.error(`load: ${message}`)
  process.exit(2)
}
