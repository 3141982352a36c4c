import { flushwaveSeries } from './flushwave.js'

/**
 * Flushwave with OpenTelemetry off (`telemetry: false`): nothing wraps the executor or the flush,
 * exactly as when `@opentelemetry/api` is not installed. `flushwave` itself runs with the API
 * installed and no SDK registered (a no-op tracer and meter): side by side, the two show what the
 * instrumentation costs when nothing records.
 */
export const series = flushwaveSeries('flushwave-nootel', undefined, { telemetry: false })
