import { metrics, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api'
import { AggregationTemporality, InMemoryMetricExporter, type HistogramMetricData } from '@opentelemetry/sdk-metrics'
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base'
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import { HttpError } from '../src/errors.js'
import { registerTelemetry, type RegisteredTelemetry } from '../src/telemetry.js'
import { startTestBookstore, type TestBookstore } from './support/bookstore.js'

/**
 * What `TELEMETRY=console` sets up, exporting to memory instead of the console: the request's
 * SERVER span is the parent of Flushwave's flush and read spans, and the histograms reach the
 * metric exporter.
 */
const spans = new InMemorySpanExporter()
const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
let telemetry: RegisteredTelemetry | undefined
let t: TestBookstore | undefined

beforeAll(async () => {
  telemetry = registerTelemetry({ spans, metrics: metricExporter, metricIntervalMs: 60_000 })
  // warmUp fills the id pool: the first checkout's flush is one round trip, no `allocate ids`.
  t = await startTestBookstore({
    name: 'bookstore_otel',
    poolMax: 2,
    seed: true,
    warmUp: true,
    traceRequests: true,
    // A 5xx that the error handler does not log (a 500 would be, with its stack, in the test output).
    configure: (app) => app.get('/busy', async () => Promise.reject(new HttpError(503, { error: 'database busy, retry' }))),
  })
})
afterAll(async () => {
  await t?.close()
  await telemetry?.shutdown()
  // Nothing stays registered: the API is a no-op again.
  expect(trace.getTracer('after').startSpan('after').isRecording()).toBe(false)
  expect(metrics.getMeterProvider()).not.toBe(telemetry?.meterProvider)
})
beforeEach(() => spans.reset())

const bookstore = () => t!
/** The request's span once it has ended (onResponse may run after the client has the answer). */
const requestSpan = (name: string) => vi.waitFor(() => spans.getFinishedSpans().find((s) => s.name === name && s.kind === SpanKind.SERVER) ?? Promise.reject(new Error(`no ${name} span yet`)))
const childrenOf = (parent: ReadableSpan) => spans.getFinishedSpans().filter((s) => s.parentSpanContext?.spanId === parent.spanContext().spanId)

describe('TELEMETRY: a span per request, the parent of its Flushwave spans', () => {
  it('POST /checkout: the SERVER span, its flush and its reads', async () => {
    const { bookIds, customerId } = bookstore().bookstore.seeded!
    const res = await bookstore().call('POST', '/checkout', { customerId, lines: [{ bookId: bookIds[0], quantity: 1 }, { bookId: bookIds[1], quantity: 2 }] })
    expect(res.status, res.text).toBe(201)

    const request = await requestSpan('POST /checkout')
    expect(request.parentSpanContext).toBeUndefined()
    expect(request.status.code).toBe(SpanStatusCode.UNSET)
    expect(request.attributes).toMatchObject({ 'http.request.method': 'POST', 'http.route': '/checkout', 'url.path': '/checkout', 'http.response.status_code': 201 })

    // Every other span of this request is a child of the request span: none escaped its context.
    const others = spans.getFinishedSpans().filter((s) => s !== request)
    expect(others.map((s) => s.spanContext().traceId)).toEqual(others.map(() => request.spanContext().traceId))
    expect(childrenOf(request)).toEqual(others)

    const [flush, ...moreFlushes] = others.filter((s) => s.name === 'flush')
    expect(moreFlushes).toEqual([])
    expect(flush!.kind).toBe(SpanKind.CLIENT)
    expect(flush!.attributes).toMatchObject({
      'db.system.name': 'postgresql',
      'db.operation.name': 'flush',
      'flushwave.flush.outcome': 'committed',
      'flushwave.flush.statements': 5,
      'flushwave.flush.round_trips': 1,
      'flushwave.flush.inserted.order': 1,
      'flushwave.flush.inserted.order_line': 2,
      'flushwave.flush.inserted.audit_log': 1,
    })
    const reads = others.filter((s) => s.name.startsWith('SELECT '))
    expect(new Set(reads.map((s) => s.name))).toEqual(new Set(['SELECT customer', 'SELECT book', 'SELECT stock']))
    expect(reads.find((s) => s.name === 'SELECT stock')!.attributes).toMatchObject({ 'db.collection.name': 'stock', 'db.response.returned_rows': 2 })
    expect(reads.every((s) => s.endTime[0] * 1e9 + s.endTime[1] <= flush!.startTime[0] * 1e9 + flush!.startTime[1])).toBe(true)
  })

  it('a 404 is no error; a 503 is, with its exception; no route: the span is named by the method', async () => {
    expect((await bookstore().call('GET', '/books/999999')).status).toBe(404)
    const notFound = await requestSpan('GET /books/:id')
    expect(notFound.attributes).toMatchObject({ 'http.route': '/books/:id', 'url.path': '/books/999999', 'http.response.status_code': 404 })
    expect(notFound.status.code).toBe(SpanStatusCode.UNSET)
    expect(childrenOf(notFound).map((s) => s.name)).toEqual(['SELECT book'])

    expect((await bookstore().call('GET', '/busy')).status).toBe(503)
    const failed = await requestSpan('GET /busy')
    expect(failed.attributes).toMatchObject({ 'http.response.status_code': 503, 'error.type': 'HttpError' })
    expect(failed.status).toEqual({ code: SpanStatusCode.ERROR, message: 'database busy, retry' })
    expect(failed.events.map((e) => e.name)).toEqual(['exception'])

    expect((await bookstore().call('GET', '/nowhere?x=1')).status).toBe(404)
    const unrouted = await requestSpan('GET')
    expect(unrouted.attributes).toEqual({ 'http.request.method': 'GET', 'url.path': '/nowhere', 'http.response.status_code': 404 })
  })

  it('the histograms reach the metric exporter', async () => {
    await telemetry!.meterProvider.forceFlush()
    const exported = metricExporter.getMetrics().at(-1)!.scopeMetrics.flatMap((scope) => scope.metrics) as HistogramMetricData[]
    const duration = exported.find((m) => m.descriptor.name === 'db.client.operation.duration')!
    expect(duration.descriptor.unit).toBe('s')
    const flushes = duration.dataPoints.find((p) => p.attributes['db.operation.name'] === 'flush' && p.attributes['flushwave.flush.outcome'] === 'committed')!
    expect(flushes.value.count).toBeGreaterThanOrEqual(1)
    const roundTrips = exported.find((m) => m.descriptor.name === 'flushwave.flush.round_trips')!
    expect(roundTrips.dataPoints.some((p) => p.value.count >= 1)).toBe(true)
  })
})
