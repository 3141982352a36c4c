import { createRequire } from 'node:module'
import type { MeterProviderLike, SpanLike, TracerProviderLike } from './otel-types.js'

/** What Flushwave uses of `@opentelemetry/api`'s module: the global providers and the active context. */
export interface OtelApi {
  readonly trace: TracerProviderLike & {
    getTracerProvider(): TracerProviderLike
    setSpan(context: unknown, span: SpanLike): unknown
  }
  readonly metrics: { getMeterProvider(): MeterProviderLike }
  readonly context: { active(): unknown; with<T>(context: unknown, fn: () => T): T }
  /** The meter every no-op provider hands out: metrics are off while the global provider gives it. */
  createNoopMeter(): unknown
}

let loaded: OtelApi | null | undefined

/**
 * `@opentelemetry/api`, or undefined when it is not installed. Loaded once, synchronously, from
 * where Flushwave is installed (the application's copy, as a peer dependency); its global providers
 * are shared by every copy of the API in the process.
 */
export function otelApi(): OtelApi | undefined {
  if (loaded === undefined) {
    try {
      loaded = createRequire(import.meta.url)('@opentelemetry/api') as OtelApi
    } catch {
      loaded = null
    }
  }
  return loaded ?? undefined
}
