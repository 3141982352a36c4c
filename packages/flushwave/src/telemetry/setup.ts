import { createRequire } from 'node:module'
import { FlushwaveError } from '../errors.js'
import type { Executor } from '../drivers/executor.js'
import { otelApi } from './load-api.js'
import type { TelemetryOptions } from './otel-types.js'
import { targetOf } from './target.js'
import { Telemetry } from './telemetry.js'
import { TracedExecutor } from './traced-executor.js'

/**
 * The instrumentation scope's version: Flushwave's, read from its package.json on first use. Code
 * that runs from elsewhere (a bundle, a copy of the sources) has none, and the version is optional.
 */
let version: string | undefined | null = null
function flushwaveVersion(): string | undefined {
  if (version === null) {
    try {
      version = (createRequire(import.meta.url)('../../package.json') as { version?: string }).version
    } catch {
      version = undefined
    }
  }
  return version
}

/**
 * `flushwave({ telemetry })`: the Telemetry and the traced executor, or none when `telemetry` is
 * false or `@opentelemetry/api` cannot be loaded (then nothing is wrapped: no cost at all).
 * `driver` is what the application passed (postgres.js, pg.Pool, knex): its options name the database.
 */
export function withTelemetry(executor: Executor, options: TelemetryOptions | false | undefined, driver: unknown): { executor: Executor; telemetry: Telemetry | undefined } {
  if (options === false) return { executor, telemetry: undefined }
  if (options !== undefined && (typeof options !== 'object' || options === null)) throw new FlushwaveError(`telemetry must be an options object or false, not ${String(options)}`)
  const api = otelApi()
  if (api === undefined) {
    if (options?.tracerProvider || options?.meterProvider) throw new FlushwaveError('telemetry: tracerProvider and meterProvider need @opentelemetry/api installed')
    return { executor, telemetry: undefined }
  }
  // An executor taken from another Flushwave is traced already.
  const inner = executor instanceof TracedExecutor ? executor.inner : executor
  const telemetry = new Telemetry(api, options ?? {}, targetOf(driver), flushwaveVersion())
  return { executor: new TracedExecutor(inner, telemetry), telemetry }
}
