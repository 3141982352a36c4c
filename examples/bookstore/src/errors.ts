/**
 * Every error a handler can throw becomes a small JSON body with no stack trace and no SQL:
 *
 * | error                                          | status | body                                         |
 * | ---------------------------------------------- | ------ | -------------------------------------------- |
 * | JSON schema (Ajv, all errors)                  | 400    | { error: 'invalid request', problems }       |
 * | Flushwave ValidationError / InvalidValueError  | 400    | { error: 'validation failed', problems }     |
 * | NotFoundError                                  | 404    | { error: 'not found', entity, id }           |
 * | InvalidCursorError                             | 400    | { error: 'invalid cursor' }                  |
 * | OptimisticLockError                            | 409    | { error: 'stale version', entity, ids }      |
 * | UniqueViolationError                           | 409    | { error: 'already exists', entity, constraint } |
 * | CheckViolation / ForeignKeyViolation           | 409    | { error: 'conflict', entity, constraint }    |
 * | retryable (serialization, deadlock, lock timeout), connection lost | 503 | { error: 'database busy, retry' } |
 * | HttpError (thrown by handlers)                 | its    | its body                                     |
 * | anything else                                  | 500    | { error: 'internal error' } (logged)         |
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import {
  CheckViolationError,
  ConnectionLostError,
  FlushError,
  ForeignKeyViolationError,
  InvalidCursorError,
  InvalidValueError,
  NotFoundError,
  OptimisticLockError,
  UniqueViolationError,
  ValidationError,
} from 'flushwave'

/** An error with the status and body to answer, thrown by handlers for rules of their own. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: { error: string } & Record<string, unknown>,
  ) {
    super(body.error)
  }
}

export interface Problem {
  /** Where: `body/books/0/price`, `params/id`, or `Book#3.price` for a Flushwave rule. */
  path: string
  message: string
}

interface AjvIssue {
  instancePath: string
  message?: string
  keyword: string
  params: Record<string, unknown>
}

/** Ajv's errors as problems; required and additionalProperties name the property in the path. */
export function schemaProblems(context: string, issues: readonly AjvIssue[]): Problem[] {
  return issues.map((issue) => {
    let path = `${context}${issue.instancePath}`
    let message = issue.message ?? issue.keyword
    if (issue.keyword === 'required') {
      path += `/${String(issue.params.missingProperty)}`
      message = 'is required'
    } else if (issue.keyword === 'additionalProperties') {
      path += `/${String(issue.params.additionalProperty)}`
      message = 'is not an accepted property'
    }
    return { path, message }
  })
}

/** The status and body for an error; `internal` is true when it is a bug (500) worth logging. */
export function describeError(error: unknown): { status: number; body: Record<string, unknown>; internal: boolean } {
  const reply = (status: number, body: Record<string, unknown>) => ({ status, body, internal: false })
  const fastify = error as Partial<FastifyError> & { validation?: AjvIssue[]; validationContext?: string }

  if (error instanceof HttpError) return reply(error.status, error.body)
  if (Array.isArray(fastify.validation)) {
    return reply(400, { error: 'invalid request', problems: schemaProblems(fastify.validationContext ?? 'request', fastify.validation) })
  }
  if (error instanceof ValidationError) {
    const problems = error.failures.map((f) => ({ path: f.property ? `${f.entity}.${f.property}` : f.entity, message: f.message }))
    return reply(400, { error: 'validation failed', problems })
  }
  if (error instanceof InvalidValueError) {
    // Its message reads "Entity.property: reason (got value)"; keep the part after the path.
    const message = error.message.slice(error.message.indexOf(': ') + 2)
    return reply(400, { error: 'validation failed', problems: [{ path: `${error.entity}.${error.property}`, message }] })
  }
  if (error instanceof NotFoundError) return reply(404, { error: 'not found', entity: error.entity, id: error.id })
  if (error instanceof InvalidCursorError) return reply(400, { error: 'invalid cursor', message: 'start again from the first page' })
  if (error instanceof OptimisticLockError) {
    return reply(409, { error: 'stale version', entity: error.entity, ids: error.ids, message: 'changed since it was read: reload it and retry' })
  }
  if (error instanceof UniqueViolationError) return reply(409, { error: 'already exists', entity: error.entity, constraint: error.constraint })
  if (error instanceof CheckViolationError || error instanceof ForeignKeyViolationError) {
    return reply(409, { error: 'conflict', entity: error.entity, constraint: error.constraint })
  }
  if ((error instanceof FlushError && 'retryable' in error) || error instanceof ConnectionLostError) {
    return reply(503, { error: 'database busy, retry' })
  }
  // Fastify's own client errors (bad JSON, wrong content type, body too large…): fixed texts.
  const status = fastify.statusCode
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const message = fastify.code?.startsWith('FST_') ? fastify.message : undefined
    return reply(status, { error: 'bad request', ...(message ? { message } : {}) })
  }
  return { status: 500, body: { error: 'internal error' }, internal: true }
}

export function errorHandler(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const { status, body, internal } = describeError(error)
  if (internal) request.log.error({ err: error }, 'unexpected error')
  return reply.code(status).send(body)
}
