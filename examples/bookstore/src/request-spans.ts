import { context, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api'
import type { FastifyInstance, FastifyRequest } from 'fastify'

interface RequestSpan {
  readonly span: Span
  error?: Error
}

/**
 * A SERVER span per HTTP request, named `METHOD route` (`POST /checkout`), on the global tracer. It
 * is the active span while the request is handled, so Flushwave's flush and read spans are its
 * children: `done()` runs inside `context.with()`, and the AsyncLocalStorage context manager
 * carries that context on into the handler. Registered only when telemetry is on (buildApp's
 * `traceRequests`), before the routes.
 */
export function instrumentRequests(app: FastifyInstance): void {
  const tracer = trace.getTracer('bookstore')
  const open = new WeakMap<FastifyRequest, RequestSpan>()

  app.addHook('onRequest', (request, _reply, done) => {
    const route = request.routeOptions.url // undefined when no route matched (404)
    const span = tracer.startSpan(route === undefined ? request.method : `${request.method} ${route}`, {
      kind: SpanKind.SERVER,
      attributes: {
        'http.request.method': request.method,
        'url.path': request.url.split('?')[0]!,
        ...(route === undefined ? {} : { 'http.route': route }),
      },
    })
    open.set(request, { span })
    context.with(trace.setSpan(context.active(), span), () => done())
  })

  // Before the error handler answers: kept for the span of a 5xx.
  app.addHook('onError', (request, _reply, error, done) => {
    const opened = open.get(request)
    if (opened) opened.error = error
    done()
  })

  app.addHook('onResponse', (request, reply, done) => {
    end(request, reply.statusCode)
    done()
  })

  // The client went away before the answer: the span ends without a status code.
  app.addHook('onRequestAbort', (request, done) => {
    end(request, undefined)
    done()
  })

  function end(request: FastifyRequest, status: number | undefined): void {
    const opened = open.get(request)
    if (!opened) return
    open.delete(request)
    const { span, error } = opened
    if (status !== undefined) span.setAttribute('http.response.status_code', status)
    if (status !== undefined && status >= 500) {
      span.setAttribute('error.type', error?.constructor.name ?? String(status))
      if (error) span.recordException(error)
      span.setStatus({ code: SpanStatusCode.ERROR, ...(error ? { message: error.message } : {}) })
    }
    span.end()
  }
}
