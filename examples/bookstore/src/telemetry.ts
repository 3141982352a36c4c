/**
 * OpenTelemetry's SDK for `TELEMETRY=console pnpm example`: global tracer and meter providers and
 * the context manager that parents spans, registered before the orm is made. Flushwave reports to
 * the global providers by itself (a span per flush and per read, two histograms); the request spans
 * are request-spans.ts's. Without TELEMETRY nothing here runs and the API stays a no-op.
 */
import { context, metrics, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { AggregationTemporality, ConsoleMetricExporter, MeterProvider, PeriodicExportingMetricReader, type PushMetricExporter } from '@opentelemetry/sdk-metrics'
import { BasicTracerProvider, ConsoleSpanExporter, SimpleSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base'

export interface TelemetryExporters {
  /** Each span as it ends (SimpleSpanProcessor). */
  readonly spans: SpanExporter
  /** The metrics, every `metricIntervalMs` and once more at shutdown. */
  readonly metrics: PushMetricExporter
  /** Default 10 s. */
  readonly metricIntervalMs?: number
}

/**
 * What `TELEMETRY` may name: where spans and metrics go. The console prints metrics as deltas: each
 * print covers what happened since the last one (nothing when idle), the one at exit what is left.
 */
export const EXPORTERS = {
  console: (): TelemetryExporters => ({
    spans: new ConsoleSpanExporter(),
    metrics: new ConsoleMetricExporter({ temporalitySelector: () => AggregationTemporality.DELTA }),
  }),
} as const

export type ExporterName = keyof typeof EXPORTERS

export function isExporterName(value: string): value is ExporterName {
  return Object.hasOwn(EXPORTERS, value)
}

export interface RegisteredTelemetry {
  readonly tracerProvider: BasicTracerProvider
  readonly meterProvider: MeterProvider
  /** Exports what is left (the last metrics too), shuts the providers down and unregisters them. */
  shutdown(): Promise<void>
}

/** Registers the global tracer provider, meter provider and context manager, exporting to `exporters`. */
export function registerTelemetry({ spans, metrics: metricExporter, metricIntervalMs = 10_000 }: TelemetryExporters): RegisteredTelemetry {
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] })
  const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: metricIntervalMs })
  const meterProvider = new MeterProvider({ readers: [reader] })
  // Without a context manager, a span started inside another's context.with() would be a root span.
  const registered = [
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable()),
    trace.setGlobalTracerProvider(tracerProvider),
    metrics.setGlobalMeterProvider(meterProvider),
  ]
  const shutdown = async () => {
    try {
      await tracerProvider.shutdown()
      await meterProvider.shutdown() // the reader exports once more first
    } finally {
      trace.disable()
      metrics.disable()
      context.disable()
    }
  }
  if (registered.includes(false)) {
    // Not disable(): that would unregister what was there before too. Ours export nothing more.
    void Promise.allSettled([tracerProvider.shutdown(), meterProvider.shutdown()])
    throw new Error('OpenTelemetry: a global tracer provider, meter provider or context manager was registered already')
  }
  return { tracerProvider, meterProvider, shutdown }
}
