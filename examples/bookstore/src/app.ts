import Fastify, { type FastifyInstance } from 'fastify'
import type { Flushwave } from 'flushwave'
import { consistency } from './consistency.js'
import { errorHandler } from './errors.js'
import { instrumentRequests } from './request-spans.js'
import { routes } from './routes.js'
import type { Defs } from './schema.js'

export interface AppOptions {
  orm: Flushwave<Defs>
  /** pino level: 'info' logs every request; the default 'warn' logs only problems (and every 500). */
  logLevel?: string
  /** A span per request (request-spans.ts), the parent of its Flushwave spans: `TELEMETRY` set. */
  traceRequests?: boolean
}

/** The Fastify app: request validation, the handlers, and one error handler for everything. */
export function buildApp({ orm, logLevel = 'warn', traceRequests = false }: AppOptions): FastifyInstance {
  const app = Fastify({
    logger: { level: logLevel },
    // Bodies here are small; a low limit also bounds the work of validating with allErrors.
    bodyLimit: 64 * 1024,
    ajv: { customOptions: { allErrors: true, coerceTypes: false, removeAdditional: false } },
  })
  if (traceRequests) instrumentRequests(app)
  app.setErrorHandler(errorHandler)
  consistency(app, orm)
  app.setNotFoundHandler((request, reply) => reply.code(404).send({ error: 'not found', route: `${request.method} ${request.url.split('?')[0]}` }))
  routes(app, orm)
  return app
}
