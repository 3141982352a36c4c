import { ConnectionLostError, FlushError } from '../errors.js'
import type { FlushResult } from '../flush/flush.js'
import type { Statement } from '../sql/statement.js'
import type { OtelApi } from './load-api.js'
import type { Attributes, ConnectionTarget, HistogramLike, MeterProviderLike, SpanLike, TelemetryOptions, TracerLike } from './otel-types.js'
import { summarize, type QuerySummary } from './summary.js'

const SPAN_KIND_CLIENT = 2
const STATUS_ERROR = 2
/** The semantic conventions' advice for `db.client.operation.duration`, in seconds. */
const DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10]
const ROUND_TRIP_BUCKETS = [0, 1, 2, 3, 4, 6, 8, 16]

interface Instruments {
  readonly duration: HistogramLike
  readonly roundTrips: HistogramLike
}

/**
 * Spans and metrics after OpenTelemetry's database conventions: a span per flush (its statements,
 * waves, round trips, cold statements, rows per table, outcome and recovery), per read statement
 * and per `em.transaction()`, each a CLIENT span with `db.system.name` `postgresql`; and two
 * histograms, `db.client.operation.duration` (seconds, flushes and reads) and
 * `flushwave.flush.round_trips`. While the tracer records nothing and the meter provider is a
 * no-op, an operation costs one non-recording span and no more.
 */
export class Telemetry {
  private readonly tracer: TracerLike
  /** db.system.name, db.namespace, server.address, server.port: on every span and metric. */
  private readonly base: Attributes
  private readonly flushStart: Attributes
  private readonly queryText: boolean
  private meterProvider: MeterProviderLike | undefined
  private instruments: Instruments | undefined

  constructor(
    private readonly api: OtelApi,
    private readonly options: TelemetryOptions,
    target: ConnectionTarget,
    private readonly version: string | undefined,
  ) {
    this.tracer = (options.tracerProvider ?? api.trace).getTracer('flushwave', version)
    const namespace = options.namespace ?? target.database
    this.base = {
      'db.system.name': 'postgresql',
      ...(namespace === undefined ? {} : { 'db.namespace': namespace }),
      ...(target.host === undefined ? {} : { 'server.address': target.host }),
      ...(target.port === undefined ? {} : { 'server.port': target.port }),
    }
    this.flushStart = { ...this.base, 'db.operation.name': 'flush' }
    this.queryText = options.queryText !== false
  }

  /** Runs `flush` under a `flush` span; inside `em.transaction()` its outcome is `in-transaction`. */
  flush(flush: () => Promise<FlushResult>, inTransaction: boolean): Promise<FlushResult> {
    const span = this.tracer.startSpan('flush', { kind: SPAN_KIND_CLIENT, attributes: this.flushStart })
    const metrics = this.metrics()
    // Nothing records: the flush runs as if there were no telemetry (no async frame of ours).
    return span.isRecording() || metrics !== undefined ? this.observeFlush(span, metrics, flush, inTransaction) : flush()
  }

  private async observeFlush(span: SpanLike, metrics: Instruments | undefined, flush: () => Promise<FlushResult>, inTransaction: boolean): Promise<FlushResult> {
    const recording = span.isRecording()
    const started = performance.now()
    try {
      const result = await (recording ? this.within(span, flush) : flush())
      const outcome = inTransaction ? 'in-transaction' : 'committed'
      if (recording) span.setAttributes(flushAttributes(result, outcome))
      if (metrics) {
        const attributes = { ...this.flushStart, 'flushwave.flush.outcome': outcome }
        metrics.duration.record((performance.now() - started) / 1000, attributes)
        metrics.roundTrips.record(result.roundTrips, attributes)
      }
      return result
    } catch (error) {
      const attributes = { ...this.flushStart, ...failure(error) }
      const outcome = outcomeOf(error)
      if (outcome !== undefined) attributes['flushwave.flush.outcome'] = outcome
      if (recording) failed(span, error, attributes)
      metrics?.duration.record((performance.now() - started) / 1000, attributes)
      throw error
    } finally {
      span.end()
    }
  }

  /** Runs a read statement under a span named after it (`SELECT book`). */
  read(statement: Statement, read: () => Promise<unknown[][]>): Promise<unknown[][]> {
    const summary = summarize(statement.text)
    const span = this.tracer.startSpan(summary.name, { kind: SPAN_KIND_CLIENT })
    const metrics = this.metrics()
    return span.isRecording() || metrics !== undefined ? this.observeRead(span, metrics, summary, statement, read) : read()
  }

  private async observeRead(span: SpanLike, metrics: Instruments | undefined, summary: QuerySummary, statement: Statement, read: () => Promise<unknown[][]>): Promise<unknown[][]> {
    const recording = span.isRecording()
    const attributes = this.readAttributes(statement, summary.operation, summary.collection)
    if (recording) span.setAttributes(attributes)
    const started = performance.now()
    try {
      const rows = await read()
      if (recording) span.setAttribute('db.response.returned_rows', rows.length)
      metrics?.duration.record((performance.now() - started) / 1000, withoutText(attributes))
      return rows
    } catch (error) {
      const failedWith = { ...withoutText(attributes), ...failure(error) }
      if (recording) failed(span, error, failedWith)
      metrics?.duration.record((performance.now() - started) / 1000, failedWith)
      throw error
    } finally {
      span.end()
    }
  }

  /** A server-side cursor's batches under one span, ended when the stream ends or is left. */
  async *stream(statement: Statement, batches: AsyncIterableIterator<unknown[][]>): AsyncIterableIterator<unknown[][]> {
    const summary = summarize(statement.text)
    const span = this.tracer.startSpan(summary.name, { kind: SPAN_KIND_CLIENT, attributes: this.readAttributes(statement, summary.operation, summary.collection) })
    let rows = 0
    try {
      for await (const batch of batches) {
        rows += batch.length
        yield batch
      }
    } catch (error) {
      if (span.isRecording()) failed(span, error, failure(error))
      throw error
    } finally {
      if (span.isRecording()) span.setAttribute('db.response.returned_rows', rows)
      span.end()
    }
  }

  /** Fetches sequence ids under an `allocate ids` span. */
  async allocate<T>(tables: number, allocate: () => Promise<T>): Promise<T> {
    const span = this.tracer.startSpan('allocate ids', { kind: SPAN_KIND_CLIENT })
    if (!span.isRecording()) return allocate()
    span.setAttributes({ ...this.base, 'db.operation.name': 'SELECT', 'flushwave.ids.tables': tables })
    try {
      return await allocate()
    } catch (error) {
      failed(span, error, failure(error))
      throw error
    } finally {
      span.end()
    }
  }

  /** Runs `em.transaction()`'s work under a `transaction` span, the parent of its flushes and reads. */
  async transaction<T>(isolation: string | undefined, run: () => Promise<T>): Promise<T> {
    const span = this.tracer.startSpan('transaction', { kind: SPAN_KIND_CLIENT })
    if (!span.isRecording()) return run()
    span.setAttributes({ ...this.base, 'db.operation.name': 'transaction', ...(isolation === undefined ? {} : { 'flushwave.transaction.isolation': isolation }) })
    try {
      const value = await this.within(span, run)
      span.setAttribute('flushwave.transaction.outcome', 'committed')
      return value
    } catch (error) {
      const outcome = outcomeOf(error)
      failed(span, error, { ...failure(error), 'flushwave.transaction.outcome': outcome ?? 'rolled-back' })
      throw error
    } finally {
      span.end()
    }
  }

  private readAttributes(statement: Statement, operation: string | undefined, collection: string | undefined): Attributes {
    const attributes: Attributes = { ...this.base }
    if (operation !== undefined) attributes['db.operation.name'] = operation
    if (collection !== undefined) attributes['db.collection.name'] = collection
    // Always with placeholders ($1): values are bound, never part of the text.
    if (this.queryText) attributes['db.query.text'] = statement.text
    return attributes
  }

  /** Runs `fn` with `span` as the active span, so that spans started inside are its children. */
  private within<T>(span: SpanLike, fn: () => Promise<T>): Promise<T> {
    return this.api.context.with(this.api.trace.setSpan(this.api.context.active(), span), fn)
  }

  /**
   * The histograms, made again whenever the meter provider changes (an SDK registered after
   * `flushwave()`); undefined while it is the API's no-op provider.
   */
  private metrics(): Instruments | undefined {
    const provider = this.options.meterProvider ?? this.api.metrics.getMeterProvider()
    if (provider !== this.meterProvider) {
      this.meterProvider = provider
      const meter = provider.getMeter('flushwave', this.version)
      this.instruments =
        meter === this.api.createNoopMeter()
          ? undefined
          : {
              duration: meter.createHistogram('db.client.operation.duration', {
                unit: 's',
                description: 'Duration of database client operations: flushes (db.operation.name flush) and reads.',
                advice: { explicitBucketBoundaries: DURATION_BUCKETS },
              }),
              roundTrips: meter.createHistogram('flushwave.flush.round_trips', {
                unit: '{round_trip}',
                description: 'Network round trips a flush waited on.',
                advice: { explicitBucketBoundaries: ROUND_TRIP_BUCKETS },
              }),
            }
    }
    return this.instruments
  }
}

/** A committed flush's facts as span attributes; rows per table as `flushwave.flush.inserted.<table>` and so on. */
function flushAttributes(result: FlushResult, outcome: string): Attributes {
  const attributes: Attributes = {
    'flushwave.flush.outcome': outcome,
    'flushwave.flush.statements': result.statements,
    'flushwave.flush.waves': result.waves,
    'flushwave.flush.round_trips': result.roundTrips,
    'flushwave.flush.cold_statements': result.coldStatements,
  }
  if (result.statements >= 2) attributes['db.operation.batch.size'] = result.statements
  for (const [kind, rows] of [['inserted', result.inserted], ['upserted', result.upserted], ['updated', result.updated], ['deleted', result.deleted], ['copied', result.copied]] as const) {
    for (const table in rows) attributes[`flushwave.flush.${kind}.${table}`] = rows[table]!
  }
  if (result.recovered) {
    attributes['flushwave.flush.recovered'] = true
    if (result.recovered.transactionId !== undefined) attributes['flushwave.flush.recovered_transaction_id'] = result.recovered.transactionId
  }
  return attributes
}

/** Whether a failed flush committed: known for server refusals and lost connections; otherwise left out. */
function outcomeOf(error: unknown): string | undefined {
  if (error instanceof FlushError) return 'rolled-back'
  if (error instanceof ConnectionLostError) return error.outcome
  return undefined
}

/** `error.type` (the error's class), `db.response.status_code` (SQLSTATE) and the table a statement failed on. */
function failure(error: unknown): Attributes {
  const attributes: Attributes = { 'error.type': error instanceof Error ? error.constructor.name : '_OTHER' }
  const { code, table } = (typeof error === 'object' && error !== null ? error : {}) as { code?: unknown; table?: unknown }
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) attributes['db.response.status_code'] = code
  if (error instanceof FlushError && typeof table === 'string') attributes['db.collection.name'] = table
  return attributes
}

function failed(span: SpanLike, error: unknown, attributes: Attributes): void {
  span.setAttributes(attributes)
  span.recordException(error instanceof Error ? error : String(error))
  span.setStatus({ code: STATUS_ERROR, message: error instanceof Error ? error.message : String(error) })
}

/** Metric attributes stay low in cardinality: no statement text. */
function withoutText(attributes: Attributes): Attributes {
  if (!('db.query.text' in attributes)) return attributes
  const { 'db.query.text': _text, ...rest } = attributes
  return rest
}
