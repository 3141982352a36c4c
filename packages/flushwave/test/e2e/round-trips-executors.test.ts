import { createTestSchema, proxyDatabase, startDatabase, startToxiproxy, type Database, type LatencyProxy, type ToxiproxyServer } from 'devdb'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { createTablesSql, type FlushResult, type QueryEvent, type Schema, type SchemaDefs } from '../../src/index.js'
import { bookstore } from '../support/bookstore.js'
import { bookstoreUuid } from '../support/bookstore-uuid.js'
import { EXECUTORS, openExecutor, type ExecutorName, type OpenedExecutor } from '../support/executors.js'

/**
 * Round trips per flush, per executor, counted by the executor and checked against the clock
 * through a 150 ms toxiproxy latency: a fresh connection that has run only `select 1`, then the
 * first flush of the bookstore graph (five statement shapes new to it), then the same flush again.
 * Ids are client-made (uuid), so no id allocation blurs the count. And reads made together: one
 * round trip for all, on a pool of one connection. With PGBOUNCER_URL set
 * (scripts/pgbouncer.sh) the proxy sits in front of PgBouncer in transaction mode instead.
 */
const LATENCY = 150
const bouncer = process.env.PGBOUNCER_URL

let toxi: ToxiproxyServer
let proxy: LatencyProxy
beforeAll(async () => {
  toxi = await startToxiproxy()
  proxy = await proxyDatabase(toxi, bouncer ? databaseAt(bouncer) : await startDatabase(), { name: 'rt-executors' })
})
afterAll(async () => {
  await proxy?.remove()
  await toxi?.stop()
})

function databaseAt(url: string): Database {
  const u = new URL(url)
  const user = decodeURIComponent(u.username)
  return { url, host: u.hostname, port: Number(u.port), user, password: decodeURIComponent(u.password), database: u.pathname.slice(1) || user, external: true, stop: async () => {} }
}

/** Tables of their own for one executor: a schema, or behind PgBouncer (no search_path there) a database. */
async function isolated(name: ExecutorName, schema: Schema<SchemaDefs>, setUp: readonly string[]): Promise<{ url: string; searchPath?: string; drop(): Promise<void> }> {
  const direct = inject('databaseUrl')
  const tag = name.replace(/[^a-z]/g, '')
  const tables = [...createTablesSql(schema), ...setUp]
  if (!bouncer) {
    const ns = await createTestSchema(direct, `rtx_${tag}`)
    const admin = postgres(direct, { max: 1, onnotice: () => {}, connection: { search_path: `"${ns.name}"` } })
    for (const statement of tables) await admin.unsafe(statement)
    await admin.end()
    return { url: proxy.url, searchPath: ns.name, drop: () => ns.drop() }
  }
  const database = `rtx_${tag}_${process.pid}_${Date.now().toString(36)}`
  const server = postgres(direct, { max: 1, onnotice: () => {} })
  await server.unsafe(`create database ${database}`)
  const u = new URL(direct)
  u.pathname = `/${database}`
  const admin = postgres(u.toString(), { max: 1, onnotice: () => {} })
  for (const statement of tables) await admin.unsafe(statement)
  await admin.end()
  const via = new URL(proxy.url)
  via.pathname = `/${database}`
  return {
    url: via.toString(),
    drop: async () => {
      await server.unsafe(`drop database if exists ${database} with (force)`)
      await server.end()
    },
  }
}

/** The bookstore graph: 1 author, 10 books, 100 reviews, 50 tags, 50 links; 5 statements. */
function graph(on: { em(): unknown }, name: string): () => Promise<FlushResult> {
  type Em = { create(name: string, data: Record<string, unknown>): { tags: { add(tag: unknown): void } }; flush(): Promise<FlushResult> }
  const em = on.em() as Em
  const author = em.create('Author', { name })
  for (let b = 0; b < 10; b++) {
    const book = em.create('Book', { title: `${name} ${b}`, author })
    for (let i = 0; i < 5; i++) book.tags.add(em.create('Tag', { name: `${name}-${b}-${i}` }))
    for (let r = 0; r < 10; r++) em.create('Review', { stars: 4, book })
  }
  return () => em.flush()
}

async function timed(flush: () => Promise<FlushResult>): Promise<[FlushResult, number]> {
  const started = performance.now()
  const result = await flush()
  return [result, performance.now() - started]
}

/**
 * An executor of its own on a pool of one connection through the proxy, opened (`select 1`) at 0 ms;
 * the latency is back at 0 and everything closed afterwards, whatever `test` did. The tables are
 * `bookstoreUuid`'s unless `options.schema` says otherwise, and `options.setUp` runs after them.
 */
async function onExecutor<D extends SchemaDefs = typeof bookstoreUuid.defs>(
  name: ExecutorName,
  test: (orm: OpenedExecutor<D>['orm']) => Promise<void>,
  options: { schema?: Schema<D>; setUp?: readonly string[]; onQuery?: (event: QueryEvent) => void } = {},
): Promise<void> {
  const schema = options.schema ?? (bookstoreUuid as unknown as Schema<D>)
  const db = await isolated(name, schema as unknown as Schema<SchemaDefs>, options.setUp ?? [])
  // Through PgBouncer 1.18 in transaction mode postgres.js must not keep prepared statements.
  const executor = openExecutor(name, db.url, schema, {
    max: 1,
    ...(db.searchPath ? { searchPath: db.searchPath } : {}),
    ...(bouncer && name === 'postgres.js' ? { prepare: false } : {}),
    ...(options.onQuery ? { orm: { onQuery: options.onQuery } } : {}),
  })
  try {
    await executor.select1()
    await test(executor.orm)
  } finally {
    await proxy.setLatency(0)
    await executor.close()
    await db.drop()
  }
}

/** The clock agrees with one round trip: more than one latency, well under two (a second would add 150 ms). */
function oneRoundTrip(ms: number): void {
  expect(ms).toBeGreaterThan(LATENCY)
  expect(ms).toBeLessThan(2 * LATENCY)
}

/**
 * The fastest of up to three timings of `run` (it stops at the first under two latencies), each
 * at least one latency. A busy 2-core machine stalls a run now and then; one more round trip is a
 * latency more on every try, so retrying cannot let it pass.
 */
async function fastestMs(run: () => Promise<void>): Promise<number> {
  let best = Infinity
  for (let n = 0; n < 3 && best >= 2 * LATENCY; n++) {
    const started = performance.now()
    await run()
    const ms = performance.now() - started
    expect(ms).toBeGreaterThan(LATENCY)
    best = Math.min(best, ms)
  }
  return best
}

/** Four finds at once, as a handler loads what it needs: with the bookstore graph in, 1, 10, 100 and 50 rows. */
function fourFinds(em: { find(name: 'Author' | 'Book' | 'Review' | 'Tag', where: object): Promise<unknown[]> }, author: string): Promise<number[]> {
  return Promise.all([em.find('Author', { name: author }), em.find('Book', {}), em.find('Review', {}), em.find('Tag', {})]).then((found) => found.map((rows) => rows.length))
}

describe.each(EXECUTORS)(`round trips of %s${bouncer ? ' through PgBouncer (transaction mode)' : ''}`, (name) => {
  const via = `${name}${bouncer ? ' via PgBouncer' : ''} at ${LATENCY} ms`

  it('a fresh connection flushes new shapes in one round trip, and again in one', async () => {
    // Up to three fresh connections, each timed cold then warm, until both flushes of one are under
    // two latencies: a busy 2-core machine stalls a flush now and then (a warm one took 363 ms in a
    // CI run), and a cold flush can only be retried on a connection of its own. A round trip more
    // would be a latency more on every try, so retrying cannot let it pass; the counts hold on each.
    let best: readonly [number, number] | undefined
    for (let n = 0; n < 3 && !(best && Math.max(...best) < 2 * LATENCY); n++) {
      await onExecutor(name, async (orm) => {
        await proxy.setLatency(LATENCY)
        const [cold, coldMs] = await timed(graph(orm, 'cold'))
        const [warm, warmMs] = await timed(graph(orm, 'warm'))
        await proxy.setLatency(0)
        console.log(`${via}: cold flush ${coldMs.toFixed(0)} ms (${cold.roundTrips} RTT), warm ${warmMs.toFixed(0)} ms (${warm.roundTrips} RTT)`)
        for (const result of [cold, warm]) {
          expect(result).toMatchObject({ waves: 1, statements: 5, roundTrips: 1 })
          expect(result.plan.preparation).toEqual([])
          expect(result.inserted).toEqual({ author: 1, book: 10, review: 100, tag: 50, book_tag: 50 })
        }
        if (!best || Math.max(coldMs, warmMs) < Math.max(...best)) best = [coldMs, warmMs]
      })
    }
    oneRoundTrip(best![0])
    oneRoundTrip(best![1])
  })

  it('on a pool of one, with pooled sequences, the flush that leaves the id pool low carries the refill after its COMMIT: no flush waits behind it', async () => {
    const events: QueryEvent[] = []
    // Blocks of 100 ids per nextval (the README's migration, with a smaller increment): a graph
    // takes 100 review ids, so the pool runs low within a few flushes.
    const setUp = ['author', 'book', 'review', 'tag'].map((table) => `alter table ${table} alter column id set increment by 100`)
    await onExecutor(
      name,
      async (orm) => {
        expect((await graph(orm, 'pooled-0')()).plan.preparation.map((p) => p.kind)).toEqual(['allocate-ids'])
        // A refill that is not carried goes out on its own, through nextIds (a flush that ran short
        // would too, and would say so in its plan's preparation).
        const executor = orm.executor
        const nextIds = executor.nextIds.bind(executor)
        let onTheirOwn = 0
        executor.nextIds = (requests) => (onTheirOwn++, nextIds(requests))
        await proxy.setLatency(LATENCY)
        const allocations = () => events.filter((e) => e.phase === 'allocate').length
        const before = allocations()
        const timings: number[] = []
        for (let i = 1; i <= 6; i++) {
          const [result, ms] = await timed(graph(orm, `pooled-${i}`))
          expect(result).toMatchObject({ statements: 5, roundTrips: 1 })
          expect(result.plan.preparation).toEqual([])
          timings.push(ms)
        }
        await proxy.setLatency(0)
        const carried = allocations() - before - onTheirOwn
        console.log(`${via}: six flushes with pooled sequences, ${carried} refills carried, ${onTheirOwn} on their own: ${timings.map((ms) => ms.toFixed(0)).join(', ')} ms`)
        // A refill on the pool's one connection, sent after a flush, would hold up the next flush by a round trip.
        expect(onTheirOwn).toBe(0)
        expect(carried).toBeGreaterThanOrEqual(1)
        // The clock agrees: every flush over one latency, and all but at most one under two. A busy
        // 2-core machine stalls a flush now and then (one of these took 359 ms in a CI run); a flush
        // held up behind a refill is ruled out by the count above, and a round trip more on every
        // flush would show on all six.
        for (const ms of timings) expect(ms).toBeGreaterThan(LATENCY)
        const slow = timings.filter((ms) => ms >= 2 * LATENCY)
        expect(slow.length, `flushes of two latencies or more: ${slow.map((ms) => ms.toFixed(0)).join(', ')}`).toBeLessThanOrEqual(1)
      },
      { schema: bookstore, setUp, onQuery: (event) => events.push(event) },
    )
  })

  it("a request's reads made together share one round trip", async () => {
    await onExecutor(name, async (orm) => {
      await graph(orm, 'reads')()
      await proxy.setLatency(LATENCY)
      let counts: number[] = []
      const ms = await fastestMs(async () => void (counts = await fourFinds(orm.em(), 'reads')))
      await proxy.setLatency(0)
      console.log(`${via}: four finds at once ${ms.toFixed(0)} ms`)
      expect(counts).toEqual([1, 10, 100, 50])
      // One after another they would take four latencies; together, one.
      oneRoundTrip(ms)
    })
  })

  it("a list endpoint's filtered page with two levels populated, and its count, share one round trip, cold and warm", async () => {
    await onExecutor(name, async (orm) => {
      await graph(orm, 'list')()
      const times: number[] = []
      for (const round of ['cold', 'warm']) {
        const where = { author: { name: 'list' }, reviews: { some: { stars: { gte: 4 } } } } as const
        let loaded: unknown[] = []
        await proxy.setLatency(LATENCY)
        const ms = await fastestMs(async () => {
          const em = orm.em() // nothing loaded: the page's ids are not known before the round trip
          const [count, page] = await Promise.all([em.count('Book', where), em.findPage('Book', where, { orderBy: { title: 'asc' }, first: 4, populate: ['reviews', 'author.books', 'tags'] })])
          // Reading a relation not loaded would throw.
          loaded = [count, page.items.length, page.hasNextPage, page.items.map((b) => [b.reviews.length, b.tags.length, b.author.name, b.author.books.length])]
        })
        await proxy.setLatency(0)
        expect(loaded).toEqual([10, 4, true, Array(4).fill([10, 5, 'list', 10])])
        times.push(ms)
        console.log(`${via}: count + page + populate of two levels at once (${round}) ${ms.toFixed(0)} ms`)
      }
      for (const ms of times) oneRoundTrip(ms)
    })
  })

  it('inside em.transaction, reads made together share one round trip, and a flush made with them waits its turn', async () => {
    await onExecutor(name, async (orm) => {
      await graph(orm, 'tx-reads')()
      await proxy.setLatency(LATENCY)
      let ms = 0
      const counts = await orm.em().transaction(async (em) => {
        let found: number[] = []
        ms = await fastestMs(async () => void (found = await fourFinds(em, 'tx-reads')))
        // A flush and reads at once on the transaction's one connection: each gets its answers.
        em.create('Author', { name: 'tx-more' })
        const [flushed, tags] = await Promise.all([em.flush(), em.find('Tag', { name: 'tx-reads-0-0' }), em.find('Review', {})])
        expect(flushed.inserted).toEqual({ author: 1 })
        expect(tags.map((t) => t.name)).toEqual(['tx-reads-0-0'])
        return found
      })
      await proxy.setLatency(0)
      console.log(`${via}: four finds at once in a transaction ${ms.toFixed(0)} ms`)
      expect(counts).toEqual([1, 10, 100, 50])
      oneRoundTrip(ms)
      expect((await orm.em().find('Author', {})).map((a) => a.name).sort()).toEqual(['tx-more', 'tx-reads'])
    })
  })
})
