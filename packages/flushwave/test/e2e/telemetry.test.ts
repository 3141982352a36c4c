import { context, metrics, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { AggregationTemporality, MeterProvider, MetricReader, type HistogramMetricData } from '@opentelemetry/sdk-metrics'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base'
import { createTestSchema, proxyDatabase, startToxiproxy, type LatencyProxy, type TestSchema } from 'devdb'
import postgres from 'postgres'
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest'
import { ConnectionLostError, createTablesSql, defineSchema, entity, flushwave, t, UniqueViolationError, type Flushwave, type FlushResult, type QueryEvent } from '../../src/index.js'
import { EXECUTORS, openExecutor, type ExecutorName, type OpenedExecutor } from '../support/executors.js'
import { openPGlite } from '../support/pglite.js'

/**
 * OpenTelemetry through the SDK's in-memory exporter and a metric reader: the spans of a flush, a
 * read, a stream, a transaction, a failed flush and a recovered one (a COMMIT whose answer was lost
 * behind a real toxiproxy, settled by the outcome ledger), their attributes after the database
 * semantic conventions, and the two histograms. On every executor; the global providers and
 * `telemetry: false` once.
 */
const schema = defineSchema({
  Author: entity('author', { id: t.id(), name: t.text().unique() }),
  Book: entity('book', { id: t.id(), title: t.text(), author: t.manyToOne('Author') }),
})
type Orm = Flushwave<typeof schema.defs>

class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE })
  }
  protected override onForceFlush = async () => {}
  protected override onShutdown = async () => {}
}

/** Spans, metrics and the context manager that parents spans started inside another's callback. */
function telemetry() {
  const exporter = new InMemorySpanExporter()
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  const reader = new TestReader()
  const meterProvider = new MeterProvider({ readers: [reader] })
  return {
    tracerProvider,
    meterProvider,
    spans: () => exporter.getFinishedSpans(),
    reset: () => exporter.reset(),
    /** Each histogram's data points by name: count, sum and attributes. */
    async histograms() {
      const { resourceMetrics } = await reader.collect()
      const found = new Map<string, { attributes: Record<string, unknown>; count: number; sum: number }[]>()
      for (const scope of resourceMetrics.scopeMetrics) {
        for (const metric of scope.metrics as HistogramMetricData[]) {
          found.set(metric.descriptor.name, metric.dataPoints.map((p) => ({ attributes: p.attributes, count: p.value.count, sum: p.value.sum ?? 0 })))
        }
      }
      return found
    },
  }
}

const contextManager = new AsyncLocalStorageContextManager().enable()
context.setGlobalContextManager(contextManager)
afterAll(() => void context.disable())

const byName = (spans: readonly ReadableSpan[], name: string) => spans.filter((s) => s.name === name)
const CLIENT = 2
const ERROR = 2

describe.each(EXECUTORS)('OpenTelemetry on %s', (name: ExecutorName) => {
  const url = new URL(inject('databaseUrl'))
  let ns: TestSchema
  let direct: postgres.Sql
  let opened: OpenedExecutor<typeof schema.defs>
  let orm: Orm
  let proxy: LatencyProxy
  const otel = telemetry()
  const events: QueryEvent[] = []

  beforeAll(async () => {
    ns = await createTestSchema(url.toString(), `otel_${name.replace(/[^a-z]/g, '')}`)
    direct = postgres(url.toString(), { max: 1, onnotice: () => {}, connection: { search_path: `"${ns.name}"` } })
    for (const statement of createTablesSql(schema)) await direct.unsafe(statement)
    const database = { url: url.toString(), host: url.hostname, port: Number(url.port), user: url.username, password: url.password, database: url.pathname.slice(1), external: true, stop: async () => {} }
    proxy = await proxyDatabase(await startToxiproxy(), database, { name: 'otel' })
    const orm_ = { telemetry: { tracerProvider: otel.tracerProvider, meterProvider: otel.meterProvider }, onQuery: (e: QueryEvent) => events.push(e), flushTimeoutMs: 1_500 }
    opened = openExecutor(name, proxy.url, schema, { max: 2, searchPath: ns.name, connectTimeout: 2, orm: orm_ })
    orm = opened.orm
    await orm.warmUp()
  })
  afterEach(() => {
    otel.reset()
    events.length = 0
  })
  afterAll(async () => {
    await opened?.close()
    await proxy?.remove()
    await direct?.end({ timeout: 1 })
    await ns?.drop()
  })

  const where = { 'db.system.name': 'postgresql', 'db.namespace': url.pathname.slice(1), 'server.address': '127.0.0.1' }

  it('a flush: one CLIENT span with its statements, waves, round trips and rows per table; both histograms', async () => {
    const before = await otel.histograms()
    const em = orm.em()
    const author = em.create('Author', { name: `flush-${name}` })
    em.create('Book', { title: 'One', author })
    em.create('Book', { title: 'Two', author })
    const result = await em.flush()
    const [span, ...others] = byName(otel.spans(), 'flush')
    expect(others).toEqual([])
    expect(span!.kind).toBe(CLIENT)
    expect(span!.status.code).toBe(0)
    expect(span!.attributes).toMatchObject({
      ...where,
      'server.port': proxy.port,
      'db.operation.name': 'flush',
      'flushwave.flush.outcome': 'committed',
      'flushwave.flush.statements': result.statements,
      'flushwave.flush.waves': result.waves,
      'flushwave.flush.round_trips': 1,
      'flushwave.flush.cold_statements': result.coldStatements,
      'flushwave.flush.inserted.author': 1,
      'flushwave.flush.inserted.book': 2,
    })
    expect(result.roundTrips).toBe(1)
    expect(span!.attributes).not.toHaveProperty('flushwave.flush.recovered')

    const after = await otel.histograms()
    const flushes = (found: typeof after) => (found.get('db.client.operation.duration') ?? []).filter((p) => p.attributes['db.operation.name'] === 'flush' && p.attributes['flushwave.flush.outcome'] === 'committed')
    const count = (found: typeof after) => flushes(found).reduce((n, p) => n + p.count, 0)
    expect(count(after) - count(before)).toBe(1)
    expect(flushes(after)[0]!.attributes).toMatchObject(where)
    const trips = (found: typeof after) => (found.get('flushwave.flush.round_trips') ?? []).reduce((n, p) => n + p.sum, 0)
    expect(trips(after) - trips(before)).toBe(1)
  })

  it('a read: a span per statement, named for its operation and table, with the text sent (placeholders, no values) and the rows', async () => {
    const title = `read-${name}`
    const em = orm.em()
    em.create('Book', { title, author: em.create('Author', { name: title }) })
    await em.flush()
    otel.reset()
    events.length = 0
    const [books, count] = await Promise.all([orm.em().find('Book', { title }), orm.em().count('Author', { name: { like: 'read-%' } })])
    expect(books).toHaveLength(1)
    expect(count).toBeGreaterThan(0)
    const find = byName(otel.spans(), 'SELECT book')
    expect(find).toHaveLength(1)
    const sent = events.find((e) => e.phase === 'read' && /from "book"/.test(e.text))!
    expect(find[0]!.kind).toBe(CLIENT)
    expect(find[0]!.attributes).toMatchObject({ ...where, 'db.operation.name': 'SELECT', 'db.collection.name': 'book', 'db.query.text': sent.text, 'db.response.returned_rows': 1 })
    expect(String(find[0]!.attributes['db.query.text'])).not.toContain(title)
    expect(byName(otel.spans(), 'SELECT author')[0]!.attributes).toMatchObject({ 'db.collection.name': 'author', 'db.response.returned_rows': 1 })
    const reads = ((await otel.histograms()).get('db.client.operation.duration') ?? []).filter((p) => p.attributes['db.collection.name'] === 'book')
    expect(reads.reduce((n, p) => n + p.count, 0)).toBeGreaterThan(0)
    // Metrics carry no statement text (cardinality).
    for (const point of reads) expect(point.attributes).not.toHaveProperty('db.query.text')
  })

  it('a stream: one span over its batches, with every row counted', async () => {
    const em = orm.em()
    const author = em.create('Author', { name: `stream-${name}` })
    for (let i = 0; i < 25; i++) em.create('Book', { title: `stream-${name}-${i}`, author })
    await em.flush()
    otel.reset()
    let seen = 0
    for await (const _book of orm.em().stream('Book', { author }, { batchSize: 10 })) seen++
    expect(seen).toBe(25)
    const [span, ...others] = byName(otel.spans(), 'SELECT book')
    expect(others).toEqual([])
    expect(span!.attributes).toMatchObject({ 'db.collection.name': 'book', 'db.response.returned_rows': 25 })
  })

  it('a transaction: a span that is the parent of the reads and flushes made in it', async () => {
    const em = orm.em()
    await em.transaction(
      async () => {
        em.create('Author', { name: `tx-${name}` })
        await em.flush()
        await em.find('Author', { name: `tx-${name}` })
      },
      { isolation: 'repeatable read' },
    )
    const [tx] = byName(otel.spans(), 'transaction')
    expect(tx!.attributes).toMatchObject({ ...where, 'flushwave.transaction.outcome': 'committed', 'flushwave.transaction.isolation': 'repeatable read' })
    const [flush] = byName(otel.spans(), 'flush')
    const [read] = byName(otel.spans(), 'SELECT author')
    expect(flush!.attributes['flushwave.flush.outcome']).toBe('in-transaction')
    for (const child of [flush!, read!]) {
      expect(child.parentSpanContext?.spanId).toBe(tx!.spanContext().spanId)
      expect(child.spanContext().traceId).toBe(tx!.spanContext().traceId)
    }
  })

  it('a failed flush: the span says the error, its SQLSTATE, the table and that nothing committed', async () => {
    const name_ = `dup-${name}`
    const em = orm.em()
    em.create('Author', { name: name_ })
    await em.flush()
    otel.reset()
    const again = orm.em()
    again.create('Author', { name: name_ })
    const error = await again.flush().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(UniqueViolationError)
    const [span] = byName(otel.spans(), 'flush')
    expect(span!.status).toMatchObject({ code: ERROR, message: (error as Error).message })
    expect(span!.attributes).toMatchObject({
      ...where,
      'error.type': 'UniqueViolationError',
      'db.response.status_code': '23505',
      'db.collection.name': 'author',
      'flushwave.flush.outcome': 'rolled-back',
    })
    expect(span!.events.map((e) => [e.name, e.attributes?.['exception.type']])).toEqual([['exception', '23505']])
    const failed = ((await otel.histograms()).get('db.client.operation.duration') ?? []).filter((p) => p.attributes['error.type'] === 'UniqueViolationError')
    expect(failed.reduce((n, p) => n + p.count, 0)).toBe(1)
  })

  it('a recovered flush: the COMMIT answer is lost, the ledger says it committed, and the span says so', async () => {
    // The answers stall past the flush timeout while the server has the whole pipeline: it commits,
    // the connection is cut, and the outcome is asked on a fresh one once the network is back.
    const outcomes: string[] = []
    for (let attempt = 0; attempt < 6 && !outcomes.includes('recovered'); attempt++) {
      otel.reset()
      const em = orm.em()
      em.create('Author', { name: `recovered-${name}-${attempt}` })
      const heal = await proxy.addToxic({ type: 'timeout', stream: 'downstream', attributes: { timeout: 0 } })
      const healing = new Promise((resolve) => setTimeout(resolve, 2_000)).then(heal)
      const settled: FlushResult | unknown = await em.flush().catch((e: unknown) => e)
      await healing
      const [span] = byName(otel.spans(), 'flush')
      if (settled instanceof ConnectionLostError) {
        outcomes.push(settled.outcome)
        expect(span!.attributes).toMatchObject({ 'error.type': settled.constructor.name, 'flushwave.flush.outcome': settled.outcome })
        expect(span!.status.code).toBe(ERROR)
        continue
      }
      const result = settled as FlushResult
      expect(result.recovered).toBeDefined()
      outcomes.push('recovered')
      expect(span!.status.code).toBe(0)
      expect(span!.attributes).toMatchObject({ 'flushwave.flush.outcome': 'committed', 'flushwave.flush.recovered': true, 'flushwave.flush.inserted.author': 1 })
      if (result.recovered!.transactionId !== undefined) expect(span!.attributes['flushwave.flush.recovered_transaction_id']).toBe(result.recovered!.transactionId)
      expect(await direct`select 1 from author where name = ${`recovered-${name}-${attempt}`}`).toHaveLength(1)
    }
    expect(outcomes).toContain('recovered')
  })
})

describe('OpenTelemetry through the global providers', () => {
  let ns: TestSchema
  let sql: postgres.Sql

  beforeAll(async () => {
    ns = await createTestSchema(inject('databaseUrl'), 'otel_global')
    sql = postgres(inject('databaseUrl'), { max: 1, onnotice: () => {}, connection: { search_path: `"${ns.name}"` } })
    for (const statement of createTablesSql(schema)) await sql.unsafe(statement)
  })
  afterAll(async () => {
    trace.disable()
    metrics.disable()
    await sql?.end({ timeout: 1 })
    await ns?.drop()
  })

  it('reports to the providers an SDK registers, also after flushwave() was called; telemetry: false reports nothing', async () => {
    const otel = telemetry()
    const before = flushwave({ schema, sql })
    const off = flushwave({ schema, sql, telemetry: false })
    // No SDK yet: nothing is recorded, and the flush works.
    const first = before.em()
    first.create('Author', { name: 'global-0' })
    await first.flush()
    trace.setGlobalTracerProvider(otel.tracerProvider)
    metrics.setGlobalMeterProvider(otel.meterProvider)
    for (const [i, orm] of [before, flushwave({ schema, sql }), off].entries()) {
      const em = orm.em()
      em.create('Author', { name: `global-${i + 1}` })
      await em.flush()
      await orm.em().find('Author', { name: `global-${i + 1}` })
    }
    // The new Flushwave's id pool is empty: its first flush fetches ids, in a span of the flush's own.
    expect(otel.spans().map((s) => s.name)).toEqual(['flush', 'SELECT author', 'allocate ids', 'flush', 'SELECT author'])
    const [allocate, flush] = otel.spans().slice(2)
    expect(allocate!.parentSpanContext?.spanId).toBe(flush!.spanContext().spanId)
    expect(allocate!.attributes).toMatchObject({ 'db.system.name': 'postgresql', 'flushwave.ids.tables': 1 })
    const flushes = ((await otel.histograms()).get('db.client.operation.duration') ?? []).filter((p) => p.attributes['db.operation.name'] === 'flush')
    expect(flushes.reduce((n, p) => n + p.count, 0)).toBe(2)
  })
})

describe('OpenTelemetry on PGlite', () => {
  it('a flush and a read, with no server address to report', async () => {
    const otel = telemetry()
    const db = await openPGlite()
    for (const statement of createTablesSql(schema)) await db.exec(statement)
    const orm = flushwave({ schema, pglite: db, telemetry: { tracerProvider: otel.tracerProvider, meterProvider: otel.meterProvider, namespace: 'memory.public' } })
    const em = orm.em()
    em.create('Author', { name: 'pglite' })
    await em.flush()
    await orm.em().find('Author', {})
    const [flush] = byName(otel.spans(), 'flush')
    expect(flush!.attributes).toMatchObject({ 'db.system.name': 'postgresql', 'db.namespace': 'memory.public', 'flushwave.flush.inserted.author': 1, 'flushwave.flush.outcome': 'committed' })
    expect(flush!.attributes).not.toHaveProperty('server.address')
    expect(byName(otel.spans(), 'SELECT author')[0]!.attributes).toMatchObject({ 'db.response.returned_rows': 1 })
    await db.close()
  })
})
