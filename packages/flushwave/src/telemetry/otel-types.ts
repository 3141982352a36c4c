/**
 * The parts of OpenTelemetry's API that Flushwave calls, declared here so that its public types
 * never name `@opentelemetry/api` (an optional peer dependency). The API's and SDK's own objects
 * fit them: pass a `TracerProvider` and a `MeterProvider` as they are.
 */

export type AttributeValue = string | number | boolean
export type Attributes = Record<string, AttributeValue>

export interface SpanLike {
  setAttribute(key: string, value: AttributeValue): unknown
  setAttributes(attributes: Attributes): unknown
  recordException(exception: Error | string): unknown
  setStatus(status: { code: number; message?: string }): unknown
  isRecording(): boolean
  end(): void
}

export interface TracerLike {
  startSpan(name: string, options?: { kind?: number; attributes?: Attributes }): SpanLike
}

export interface TracerProviderLike {
  getTracer(name: string, version?: string): TracerLike
}

export interface HistogramLike {
  record(value: number, attributes?: Attributes): void
}

export interface MeterLike {
  createHistogram(name: string, options?: { unit?: string; description?: string; advice?: { explicitBucketBoundaries?: number[] } }): HistogramLike
}

export interface MeterProviderLike {
  getMeter(name: string, version?: string): MeterLike
}

/**
 * `flushwave({ telemetry })`. By default Flushwave reports to the global tracer and meter providers
 * of `@opentelemetry/api` when that package can be loaded, and does nothing when it cannot;
 * `false` turns it off.
 */
export interface TelemetryOptions {
  /** Spans go to this provider instead of the global one. */
  readonly tracerProvider?: TracerProviderLike
  /** Metrics go to this provider instead of the global one. */
  readonly meterProvider?: MeterProviderLike
  /**
   * `db.namespace` of every span and metric: by default the database name from the driver's
   * connection options (PostgreSQL's convention asks for `database.schema`: give it here).
   */
  readonly namespace?: string
  /** Whether read spans carry `db.query.text`, the statement with placeholders and no values (default true). */
  readonly queryText?: boolean
}

/** The server a driver connects to, as far as its options say without a round trip. */
export interface ConnectionTarget {
  readonly database?: string | undefined
  readonly host?: string | undefined
  readonly port?: number | undefined
}
